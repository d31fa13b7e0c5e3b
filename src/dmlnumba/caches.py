"""One bounded cache for everything keyed by layout (validated parameters, plans,
parameter blocks, runners, launch configurations): a dict that starts over when
full.  Its entries are cheap to remake, and an application that keeps making new
layouts must not grow memory without bound."""

from collections.abc import Callable, Hashable
from typing import Any

#: Entries a cache holds before it starts over.
LIMIT = 4096


class Bounded(dict):
    """A dict of at most ``limit`` entries; adding one to a full cache clears it."""

    def __init__(self, limit: int = LIMIT) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: Hashable, value: Any) -> Any:
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value

    def get_or_make(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The entry for ``key``, made by ``make()`` (and kept) the first time."""
        v = self.get(key)
        if v is None:
            v = self.put(key, make())
        return v
