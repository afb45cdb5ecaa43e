"""Tests of the runtime: executables and their inputs, rlx._core, custom
kernels, the C API, the shims beyond the ABI (the ABI itself: tests/cts/)
and bad input at every public entry point."""
