"""Tests of rlx/tune: calibration, its cache and the cost model."""
