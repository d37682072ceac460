"""Jet 0.7's own unit tests, ported: one module per Jet test class (docs/jet_conformance.md)."""
