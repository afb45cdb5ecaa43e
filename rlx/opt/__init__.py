"""Graph-level optimisations and planning (memory plan, fusion, scheduling)."""
