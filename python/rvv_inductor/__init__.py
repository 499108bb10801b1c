"""RVV (RISC-V Vector 1.0) BF16 Linear kernels for TorchInductor.

    import rvv_inductor
    rvv_inductor.enable()          # idempotent; or set RVV_INDUCTOR_ENABLE=1
    model = torch.compile(model)   # BF16 Linear shapes that pass the gate -> RVV kernels
    rvv_inductor.disable()         # stock Inductor again

    rvv_inductor.compile_linears(model)   # or: only the Linear layers, with packed weights

See docs/architecture.md for what is routed where, and why. Importing the package does not import
torch; ``compile_linears`` and ``RVVLinear`` load the regional runtime on first use.
"""
from __future__ import annotations

import logging
import sys

from .cpu import CpuOverrideError
from .integration import disable, enable, is_enabled, status
from .paths import env_flag
from .policy import Gate

__all__ = ["enable", "disable", "is_enabled", "status", "compile_linears", "RVVLinear", "RVVQuantLinear",
           "load_gguf", "CpuOverrideError", "Gate"]
__version__ = "0.1.0"


def __getattr__(name):
    if name in ("compile_linears", "RVVLinear", "RVVQuantLinear"):
        from . import regional  # lazy: torch; `import rvv_inductor` must not import it

        return getattr(regional, name)
    if name == "load_gguf":
        from .gguf_load import load_gguf  # lazy: torch, transformers; `import rvv_inductor` must not import them

        return load_gguf
    raise AttributeError(name)


def _autoenable() -> None:
    if env_flag("RVV_INDUCTOR_ENABLE"):
        enable()


def _torch_autoload() -> None:
    """Entry point (group ``torch.backends``) that torch calls at the end of ``import
    torch`` when the package is installed: with RVV_INDUCTOR_ENABLE=1, plain
    ``torch.compile`` users get RVV kernels without touching their code. A failure here
    must never break ``import torch``, so it is logged instead."""
    try:
        _autoenable()
    except Exception as e:  # noqa: BLE001
        logging.getLogger("rvv_inductor").warning("rvv_inductor: RVV_INDUCTOR_ENABLE=1 but enable() failed: %s", e)


def _torch_is_initialising() -> bool:
    spec = getattr(sys.modules.get("torch"), "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


# `import rvv_inductor` with RVV_INDUCTOR_ENABLE=1 enables too (errors surface here). When
# torch itself is importing us through the entry point, _torch_autoload does it instead.
if not _torch_is_initialising():
    _autoenable()
