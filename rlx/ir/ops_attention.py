"""Placeholder: filled in by the kernel-library work (issue 3)."""
