"""Installing and removing the Inductor integration: ``enable()`` and ``disable()``.

``enable()`` installs, reversibly (``_patching.PatchSet``):

* the real L1d/L2 sizes behind ``torch.cpu.get_capabilities`` (``inductor/cache_sizes.py``);
* ``config.cpp.march`` from detection (``-march=native`` fails on RISC-V compilers);
* with V: the ``cpp_prefix.h`` overlay, the RVV vector ISA and the RVV micro-GEMMs
  (``inductor/prefix_overlay.py``, ``vec_isa.py``, ``micro_gemm.py``);
* the lowerings that route BF16 GEMMs to the C++ GEMM template: ``aten.mm``/``addmm``
  (``inductor/routing.py``) and ``rvv_inductor::linear_packed`` (``packed_lowering.py``).

``disable()`` undoes every patch in reverse order and then calls the callbacks registered
with ``on_disable`` (the regional runtime forgets its compiled regions there).
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Callable

from . import cpu
from ._patching import PatchSet
from .policy import Gate

log = logging.getLogger("rvv_inductor")
_patches = PatchSet()
_lock = threading.RLock()
_status: dict = {}
_on_disable: list[Callable[[], None]] = []


def _register_torch_logs() -> None:
    """TORCH_LOGS=rvv_inductor (or +rvv_inductor for debug) shows every routing decision
    (shape, route, reason) as it is made, like any Inductor component."""
    try:
        from torch._logging._internal import register_log

        register_log("rvv_inductor", "rvv_inductor")
    except Exception:  # noqa: BLE001  (a torch without this hook: the explicit setup below still works)
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


def enable(gate: Gate | None = None) -> dict:
    """Install the RVV ISA, the micro-GEMMs, the cache-size fix and the routing.

    ``gate`` decides which GEMMs of a whole-graph compile go to RVV (default:
    ``Gate()`` with the keys of RVV_INDUCTOR_GATE). Calling it again is a no-op, except
    that a new ``gate`` replaces the old one. Raises CpuOverrideError if RVV_INDUCTOR_CPU
    claims features the CPU lacks. Returns a status dict (what was installed and why)."""
    with _lock:
        from .inductor import routing

        if gate is not None:
            routing.set_gate(gate)
        if _patches.active:
            return dict(_status)
        info = cpu.effective()  # may raise CpuOverrideError: fail before patching anything
        routing.set_gate(gate or Gate.from_env())
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

    from . import ops
    from .inductor import cache_sizes, micro_gemm, packed_lowering, prefix_overlay, routing, vec_isa

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
    lowerings = dict(routing.LOWERINGS)
    lowerings[ops.linear_packed] = packed_lowering.linear_packed_lowering
    for op, fn in lowerings.items():
        if op in lowering.user_lowerings:
            log.warning("rvv_inductor: replacing an existing user lowering for %s", op)
        _patches.set(lowering.user_lowerings, op, fn)
    return st


def on_disable(callback: Callable[[], None]) -> None:
    """Call ``callback`` at every ``disable()`` (after the patches are undone)."""
    with _lock:
        _on_disable.append(callback)


def disable() -> None:
    """Restore stock Inductor (every patch is undone, in reverse order)."""
    with _lock:
        _patches.restore()
        _status.clear()
        for callback in _on_disable:
            callback()


def is_enabled() -> bool:
    return _patches.active


def status() -> dict:
    return dict(_status)
