"""Bundled public data sets turned into fairmon's input contracts (Coat, COMPAS); pure, no I/O."""
