"""Tests of the lowering (rlx/lowering/, rlx/runtime/target.py, params.py,
views.py): dispatch grids, merged dimensions, views and dense copies."""
