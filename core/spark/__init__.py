"""Placeholder package, filled in by its own issue."""
