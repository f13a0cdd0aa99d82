"""Helpers shared by test modules: small training loops, fixed data, readers of other tools'
files, figure-layout checks. Test modules import these (and the oracles of
``tests/reference/``), never each other; fixtures live in the ``conftest.py`` files."""
