"""The package's version (pyproject.toml's; every generated banner and manifest names it)."""
__version__ = "0.1.0"
