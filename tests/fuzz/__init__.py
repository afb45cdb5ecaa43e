"""A differential fuzzer: random ops and random graphs, compiled by rlx under
every combination of passes / pin_outputs / replay / precision and compared
with PyTorch (and rlx.run_reference). test_fuzz.py, beside it, drives it; docs/fuzzing.md
documents the short CI run and the long run."""
