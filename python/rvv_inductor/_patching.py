"""Reversible attribute patches, so that enable() is idempotent and disable() restores
stock Inductor exactly (every hook this package installs goes through here)."""
from __future__ import annotations

import threading
from typing import Any

_MISSING = object()


class PatchSet:
    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []
        self._lock = threading.RLock()

    @property
    def active(self) -> bool:
        return bool(self._saved)

    def set(self, owner: Any, name: str, value: Any) -> None:
        """Replace owner.name (or owner[name] for dicts) and remember the original."""
        with self._lock:
            if isinstance(owner, dict):
                old = owner.get(name, _MISSING)
                owner[name] = value
            else:
                old = getattr(owner, name, _MISSING)
                setattr(owner, name, value)
            self._saved.append((owner, name, old))

    def restore(self) -> None:
        with self._lock:
            while self._saved:
                owner, name, old = self._saved.pop()
                if isinstance(owner, dict):
                    if old is _MISSING:
                        owner.pop(name, None)
                    else:
                        owner[name] = old
                elif old is _MISSING:
                    delattr(owner, name)
                else:
                    setattr(owner, name, old)
