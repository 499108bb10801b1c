"""An include-path overlay that lets Inductor's cpp_prefix.h enable at::vec for RVV.

Generated kernels start with ``#include <torch/csrc/inductor/cpp_prefix.h>``, which turns
on the vector helpers only for ``CPU_CAPABILITY_{AVX512,AVX2,ZVECTOR,NEON,VSX,SVE256,
SVE128}``. We write a copy of the installed header with ``CPU_CAPABILITY_RVV`` added to
that condition, and put its directory in front of torch's include paths while the
package is enabled. The edit is applied only if the upstream text is exactly what we
expect; otherwise the overlay is not used, VecRVV's probe fails, and Inductor stays
scalar (correct, just not vectorised).
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from .. import paths

log = logging.getLogger("rvv_inductor")

_REL = Path("torch/csrc/inductor/cpp_prefix.h")
_GATE_OLD = "defined(CPU_CAPABILITY_VSX) || defined(CPU_CAPABILITY_SVE256) ||   \\\n    defined(CPU_CAPABILITY_SVE128)\n"
_GATE_NEW = ("defined(CPU_CAPABILITY_VSX) || defined(CPU_CAPABILITY_SVE256) ||   \\\n"
             "    defined(CPU_CAPABILITY_SVE128) || defined(CPU_CAPABILITY_RVV)\n")

_overlay_dir: Path | None = None


def _upstream_header() -> Path | None:
    # lazy: torch; `import rvv_inductor` imports this module and must not load torch
    from torch.utils.cpp_extension import include_paths

    # enable() puts the overlay first in include_paths (include_paths_wrapper): look past it.
    for inc in getattr(include_paths, "__wrapped__", include_paths)():
        p = Path(inc) / _REL
        if p.is_file():
            return p
    return None


# Right after the at::vec headers: our vector math for the generic Vectorized
# (csrc/rvv_inductor/inductor_vec_math.h), before generated code instantiates it.
_VEC_OLD = "#include <ATen/cpu/vec/functional.h>\n#include <ATen/cpu/vec/vec.h>\n"
_VEC_NEW = _VEC_OLD + ("#if defined(CPU_CAPABILITY_RVV) && __has_include(<rvv_inductor/inductor_vec_math.h>)\n"
                       "#include <rvv_inductor/inductor_vec_math.h>\n#endif\n")


def patch(text: str) -> str | None:
    """``cpp_prefix.h``'s text with CPU_CAPABILITY_RVV added to its vector gate and our
    vector math included after the at::vec headers, or None unless both places appear
    exactly once, exactly as in torch 2.14."""
    if text.count(_GATE_OLD) != 1 or text.count(_VEC_OLD) != 1:
        return None
    return text.replace(_GATE_OLD, _GATE_NEW).replace(_VEC_OLD, _VEC_NEW)


def build() -> Path | None:
    """Writes the overlay (once per upstream header content); returns its include dir."""
    global _overlay_dir
    src = _upstream_header()
    if src is None:
        log.warning("rvv_inductor: %s not found; RVV pointwise vectorisation disabled", _REL)
        return None
    patched = patch(src.read_text())
    if patched is None:
        log.warning("rvv_inductor: unexpected vector gate in %s (torch version?); "
                    "RVV pointwise vectorisation disabled", src)
        return None
    # Inductor keys a kernel's .so on its source and compile command, not on the headers
    # it includes: the headers' digest in the overlay's path (its include directory)
    # changes the command when inductor_vec_math.h or anything it includes changes.
    patched += f"// rvv_inductor kernel headers {paths.headers_digest()}\n"
    digest = hashlib.sha256(patched.encode()).hexdigest()[:16]
    root = paths.state_dir() / f"prefix-overlay-{digest}"
    target = root / _REL
    if not target.is_file() or target.read_text() != patched:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(patched)
        tmp.replace(target)
    _overlay_dir = root
    return root


def ready() -> bool:
    return _overlay_dir is not None and (_overlay_dir / _REL).is_file()


def include_paths_wrapper(original):
    """torch.utils.cpp_extension.include_paths, with the overlay first."""

    def include_paths(*args, **kwargs):
        dirs = list(original(*args, **kwargs))
        if _overlay_dir is not None:
            dirs.insert(0, str(_overlay_dir))
        return dirs

    include_paths.__wrapped__ = original
    return include_paths
