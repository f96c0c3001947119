"""dhir's version, from the installed package's metadata (importlib.metadata takes about
60 ms to load, so `dhir` gives `__version__` from here only when it is asked for)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dhir")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
