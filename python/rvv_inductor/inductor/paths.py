"""Where the C++ headers and this package's generated files live."""
from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent.parent


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


def state_dir() -> Path:
    """Per-user directory for generated files, next to Inductor's own cache."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    d = Path(cache_dir()) / "rvv_inductor"
    d.mkdir(parents=True, exist_ok=True)
    return d


def env_flag(name: str, default: bool = False) -> bool:
    v = os.environ.get(name)
    if v is None:
        return default
    return v.strip().lower() in ("1", "true", "yes", "on")
