"""forge-ci: the core. See README.md in this folder for the dependency rule."""

__version__ = "0.1.0"
