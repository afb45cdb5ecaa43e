"""Tests of rlx/ir (the graph, dtypes, shapes, op inference, printer) and
rlx/reference (the numpy oracle every kernel test compares with)."""
