"""Bundled public data sets for the demo and tests: Coat and COMPAS (package data; see fairmon.resources)."""
