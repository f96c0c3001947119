"""Names a package gives from its modules, each module imported when one of its names is
first used (a module `__getattr__`, PEP 562): importing the package, or one of its
modules, then loads only what is needed."""

from collections.abc import Callable, Mapping
from importlib import import_module


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], object]:
    """`package`'s `__getattr__`: each name of `homes` from the module it maps to."""

    def __getattr__(name: str) -> object:
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        return getattr(import_module(module), name)

    return __getattr__
