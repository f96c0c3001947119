"""Facts kept beside attributes, by the attribute object itself: attributes have no
room of their own for them, and compare by value, so a plain dict would give two equal
attributes (two descriptions written alike) one entry. An entry goes when its attribute
does."""

import weakref
from typing import Generic, TypeVar

from xdsl.ir import Attribute

_T = TypeVar("_T")


class ByIdentity(Generic[_T]):
    def __init__(self) -> None:
        self._found: dict[int, tuple[weakref.ref[Attribute], _T]] = {}

    def put(self, attribute: Attribute, fact: _T, replace: bool = True) -> None:
        """Keep `fact` for `attribute`; with `replace` False, keep one it has instead."""
        key = id(attribute)
        if not replace and self.get(attribute) is not None:
            return
        forget = weakref.ref(attribute, lambda _: self._found.pop(key, None))
        self._found[key] = (forget, fact)

    def get(self, attribute: Attribute) -> _T | None:
        found = self._found.get(id(attribute))
        return found[1] if found is not None and found[0]() is attribute else None
