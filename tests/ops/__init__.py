"""The kernels against rlx/reference, one file per op family
(test_<family>.py); helpers.py holds what several families share,
conftest.py their fixtures."""
