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
