"""The version of gradlab, written once: ``pyproject.toml`` reads it from here."""

__version__ = "0.2.0"
