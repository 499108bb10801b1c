"""Where the C++ headers and this package's generated files live, and the environment
flags it reads (general helpers: the Inductor integration, the runtime and the tools use
them)."""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def include_dir() -> Path:
    """Directory that contains ``rvv_inductor/*.h`` (the kernel headers).

    Installed wheels ship them under the package; a source checkout uses csrc/."""
    for candidate in (_PKG / "include", _PKG.parent.parent / "csrc"):
        if (candidate / "rvv_inductor" / "cpu_features.h").is_file():
            return candidate
    raise FileNotFoundError(
        "rvv_inductor's C++ headers were not found (looked in the package's include/ and "
        "the repository's csrc/); reinstall the package"
    )


@functools.cache
def headers_digest() -> str:
    """Content hash of the kernel headers. It goes into the generated code (and the
    cpp_prefix.h overlay), so that a changed header changes Inductor's cache key instead
    of reusing a stale .so."""
    h = hashlib.sha256()
    root = include_dir() / "rvv_inductor"
    for p in sorted(root.rglob("*.h")):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


@functools.cache
def sources_digest(root: Path | None = None) -> str:
    """Content hash of this package's Python sources, the demo's aside. Beside the headers'
    hash in Inductor's cache key (integration.py, CacheKeyPass): a graph compiled by an
    older lowering is compiled again instead of served from a cache that version filled
    (Inductor's FX graph cache keys on the graph and its own settings, not on the code of
    user lowerings)."""
    root = _PKG if root is None else root
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if rel.parts[0] in ("demo", "__pycache__"):
            continue
        h.update(rel.as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def state_dir() -> Path:
    """Per-user directory for generated files, next to Inductor's own cache."""
    # lazy: Inductor; this module must import without torch (bench/report.py and the host tier)
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    d = Path(cache_dir()) / "rvv_inductor"
    d.mkdir(parents=True, exist_ok=True)
    return d


def env_flag(name: str, default: bool = False) -> bool:
    v = os.environ.get(name)
    if v is None:
        return default
    return v.strip().lower() in ("1", "true", "yes", "on")
