"""RVV (RISC-V Vector 1.0) BF16 Linear kernels for TorchInductor.

    import rvv_inductor
    rvv_inductor.enable()          # idempotent; or set RVV_INDUCTOR_ENABLE=1
    model = torch.compile(model)   # BF16 Linear shapes that pass the gate -> RVV kernels
    rvv_inductor.disable()         # stock Inductor again

See README.md for what is routed where, and why.
"""
from __future__ import annotations

import logging
import threading

from . import cpu
from ._patching import PatchSet
from .cpu import CpuOverrideError

__all__ = ["enable", "disable", "is_enabled", "status", "compile_linears", "CpuOverrideError", "Gate"]
__version__ = "0.1.0"

log = logging.getLogger("rvv_inductor")
_patches = PatchSet()
_lock = threading.RLock()
_status: dict = {}


def _register_torch_logs() -> None:
    """TORCH_LOGS=rvv_inductor (or +rvv_inductor for debug) shows every routing decision
    (shape, route, reason) as it is made, like any Inductor component."""
    import os

    try:
        from torch._logging._internal import register_log

        register_log("rvv_inductor", "rvv_inductor")
    except Exception:  # a torch without this hook: the explicit setup below still works
        pass
    # torch parsed TORCH_LOGS at import time, before this package registered its name.
    settings = [s.strip() for s in os.environ.get("TORCH_LOGS", "").split(",")]
    if "rvv_inductor" in settings or "+rvv_inductor" in settings:
        log.setLevel(logging.DEBUG if "+rvv_inductor" in settings else logging.INFO)
        if not log.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("[rvv_inductor] %(message)s"))
            log.addHandler(handler)
            log.propagate = False


def enable(gate=None) -> dict:
    """Install the RVV ISA, the micro-GEMMs, the cache-size fix and the routing.

    Calling it again is a no-op (except that a new ``gate`` replaces the old one).
    Raises CpuOverrideError if RVV_INDUCTOR_CPU claims features the CPU lacks.
    Returns a status dict (what was installed and why)."""
    with _lock:
        from .inductor import routing

        if gate is not None:
            routing.set_gate(gate)
        if _patches.active:
            return dict(_status)
        info = cpu.effective()  # may raise CpuOverrideError: fail before patching anything
        routing.set_gate(gate or routing.Gate.from_env())
        _register_torch_logs()
        try:
            _status.clear()
            _status.update(_install(info))
        except Exception:
            _patches.restore()
            raise
        log.info("rvv_inductor enabled: %s", _status)
        return dict(_status)


def _install(info: cpu.CpuInfo) -> dict:
    import torch
    import torch._inductor.lowering as lowering  # before cpp_micro_gemm: import-order trap
    from torch._inductor import config as inductor_config
    from torch._inductor import cpu_vec_isa
    from torch._inductor.codegen import cpp_micro_gemm
    import torch.utils.cpp_extension as cpp_extension

    from .inductor import cache_sizes, micro_gemm, prefix_overlay, routing, vec_isa

    st = {"cpu": info, "vec_isa": None, "march": None, "micro_gemms": [], "routing": True}
    _patches.set(torch.cpu, "get_capabilities", cache_sizes.get_capabilities_wrapper(torch.cpu.get_capabilities))
    if info.is_riscv64:
        _patches.set(inductor_config.cpp, "march", info.march)
        st["march"] = info.march
    if info.is_riscv64 and info.has_v:
        if prefix_overlay.build() is not None:
            _patches.set(cpp_extension, "include_paths", prefix_overlay.include_paths_wrapper(cpp_extension.include_paths))
        _patches.set(cpu_vec_isa, "valid_vec_isa_list",
                     vec_isa.rvv_valid_vec_isa_list_factory(cpu_vec_isa.valid_vec_isa_list))
        for cls, cfgs in micro_gemm.configs_for(info).items():
            _patches.set(cpp_micro_gemm.micro_gemm_configs, cls, cfgs)
            st["micro_gemms"].append(f"{cls.__name__}{tuple(cfgs[0].register_blocking)}")
        picked = cpu_vec_isa.pick_vec_isa()
        st["vec_isa"] = str(picked) if picked else None
    from . import ops
    from .inductor import packed_lowering

    lowerings = dict(routing.LOWERINGS)
    lowerings[ops.linear_packed] = packed_lowering.linear_packed_lowering
    for op, fn in lowerings.items():
        if op in lowering.user_lowerings:
            log.warning("rvv_inductor: replacing an existing user lowering for %s", op)
        _patches.set(lowering.user_lowerings, op, fn)
    return st


def disable() -> None:
    """Restore stock Inductor (every patch is undone, in reverse order)."""
    with _lock:
        _patches.restore()
        _status.clear()
        # Compiled regions were built with the RVV lowering; forget them so that layers
        # compiled from now on follow the current configuration (RVVLinear modules keep
        # working: their op then runs its eager C++ kernel).
        import sys

        regional = sys.modules.get(__name__ + ".regional")
        if regional is not None:
            regional.ARTIFACTS.clear()


def is_enabled() -> bool:
    return _patches.active


def status() -> dict:
    return dict(_status)


def __getattr__(name):
    if name == "Gate":
        from .inductor.routing import Gate

        return Gate
    if name in ("compile_linears", "RVVLinear"):
        from . import regional

        return getattr(regional, name)
    raise AttributeError(name)


def _autoenable() -> None:
    from .inductor.paths import env_flag

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
        log.warning("rvv_inductor: RVV_INDUCTOR_ENABLE=1 but enable() failed: %s", e)


def _torch_is_initialising() -> bool:
    import sys

    spec = getattr(sys.modules.get("torch"), "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


# `import rvv_inductor` with RVV_INDUCTOR_ENABLE=1 enables too (errors surface here). When
# torch itself is importing us through the entry point, _torch_autoload does it instead.
if not _torch_is_initialising():
    _autoenable()
