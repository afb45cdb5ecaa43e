"""Tests of rlx/opt: the compile pipeline's passes (fusion, sibling fusion,
precision, segments, barriers) and the arena memory plan."""
