"""Tests of the lowering (rlx/runtime/lowering*.py, target.py, params.py,
views.py): dispatch grids, merged dimensions, views and dense copies."""
