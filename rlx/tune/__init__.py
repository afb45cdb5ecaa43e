"""Tuning above the runtime: calibration (measured device speeds), the cost
model built from it, and the decisions it makes (gemm or row kernel per
shape, device="auto"). rlx.compile injects them into the pipeline; nothing
below imports this package."""
