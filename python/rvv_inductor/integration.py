"""Installing and removing the Inductor integration: ``enable()`` and ``disable()``.

``enable()`` installs, reversibly (``_patching.PatchSet``):

* the real L1d/L2 sizes behind ``torch.cpu.get_capabilities`` (``inductor/cache_sizes.py``);
* ``config.cpp.march`` from detection (``-march=native`` fails on RISC-V compilers);
* with V: the ``cpp_prefix.h`` overlay, the RVV vector ISA and the RVV micro-GEMMs
  (``inductor/prefix_overlay.py``, ``vec_isa.py``, ``micro_gemm.py``);
* the lowerings that route BF16 GEMMs to the C++ GEMM template: ``aten.mm``/``addmm``
  (``inductor/routing.py``) and ``rvv_inductor::linear_packed`` (``packed_lowering.py``);
  with ``weights="int8"|"int4"``, frozen weights quantized at compile time and run by the
  quantized kernels (``inductor/quant_lowering.py``);
* a no-op post-grad pass whose uuid carries the gate and weight format into Inductor's FX
  graph cache key.

``disable()`` undoes every patch in reverse order and then calls the callbacks registered
with ``on_disable`` (the regional runtime forgets its compiled regions there).
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Callable

from . import cpu, paths
from ._patching import PatchSet
from .inductor import cache_sizes, prefix_overlay
from .policy import DEFAULT_ACTIVATIONS, Gate
from .weight_spec import KEEP_BY_TENSOR, WeightSpec

log = logging.getLogger("rvv_inductor")
_patches = PatchSet()
_lock = threading.RLock()
_status: dict = {}
_on_disable: list[Callable[[], None]] = []


def _register_torch_logs() -> None:
    """TORCH_LOGS=rvv_inductor (or +rvv_inductor for debug) shows every routing decision
    (shape, route, reason) as it is made, like any Inductor component."""
    try:
        from torch._logging._internal import register_log  # lazy: torch; `import rvv_inductor` must not import it

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


def enable(gate: Gate | None = None, *, weights: str | None = None, group_size: int | None = None,
           keep_bf16=None, activations: str | None = None) -> dict:
    """Install the RVV ISA, the micro-GEMMs, the cache-size fix and the routing.

    ``gate`` decides which GEMMs of a whole-graph compile go to RVV (default:
    ``Gate()`` with the keys of RVV_INDUCTOR_GATE).

    ``weights``: "bf16" (the default: frozen weights stay BF16), "int8" or "int4": the
    frozen BF16 weight of every gated GEMM is quantized at compile time (round to nearest,
    FP16 scales, the format of ``compile_linears(weights=...)``) and runs the quantized
    kernels (``inductor/quant_lowering.py``). ``group_size``: K rows per scale
    (``policy.GROUP_SIZES``; default ``policy.DEFAULT_GROUP_SIZE``: INT8 0 = per output
    channel, INT4 64); a layer whose K it does not divide stays BF16 (reason
    NOT_QUANTIZABLE). ``keep_bf16``: modules or weight tensors to leave in BF16
    (``keep_bf16=[model.lm_head]``). ``activations``: "int8" (default) or "bf16", how the
    quantized GEMMs with M >= 2 treat X, as in ``compile_linears``. Needs
    ``torch._inductor.config.freezing=True`` and
    ``torch.no_grad()``, like the BF16 routing. Bad values raise ValueError.

    Calling it again is a no-op, except that a new ``gate`` or ``weights`` replaces the old
    one. Raises CpuOverrideError if RVV_INDUCTOR_CPU claims features the CPU lacks. Returns
    a status dict (what was installed and why)."""
    with _lock:
        from .inductor import quant_lowering, routing  # lazy: Inductor; `import rvv_inductor` must not import it

        spec = None
        if weights is not None or group_size is not None or keep_bf16 is not None or activations is not None:
            spec = WeightSpec.parse("bf16" if weights is None else weights, group_size, keep_bf16,
                                    DEFAULT_ACTIVATIONS if activations is None else activations,
                                    caller="enable", keep_by=KEEP_BY_TENSOR)
        if gate is not None:
            routing.set_gate(gate)
        if spec is not None:
            quant_lowering.set_spec(spec)
        if _patches.active:
            _status["weights"] = quant_lowering.get_spec().format
            _status["activations"] = quant_lowering.get_spec().activations
            return dict(_status)
        info = cpu.effective()  # may raise CpuOverrideError: fail before patching anything
        routing.set_gate(gate or Gate.from_env())
        quant_lowering.set_spec(spec or WeightSpec())
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
    # lazy: torch and Inductor, and our modules that load them; `import rvv_inductor` must not import them
    import torch
    import torch._inductor.lowering as lowering  # before cpp_micro_gemm: import-order trap
    from torch._inductor import config as inductor_config
    from torch._inductor import cpu_vec_isa
    from torch._inductor.codegen import cpp_micro_gemm
    import torch.utils.cpp_extension as cpp_extension

    from . import ops, attention  # ops defines the rvv_inductor library, attention adds to it
    from .inductor import attention_lowering, micro_gemm, packed_lowering, quant_lowering, routing, vec_isa

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
        # Inductor's precompiled cpp_prefix.h stays on: without it every kernel compile parses
        # the ATen headers again (~3x the compile time under emulation). Our vector math
        # (inductor_vec_math.h) is therefore compiled only where no header is precompiled:
        # export turns both switches off for its one AOTI compile (see vec_isa.build_arch_flags).
        picked = cpu_vec_isa.pick_vec_isa()
        st["vec_isa"] = str(picked) if picked else None
    if inductor_config.post_grad_custom_post_pass is None:
        # Inductor's FX graph cache key does not see the gate or the weight format; this
        # no-op pass carries them (and the kernel headers' digest) into the key.
        _patches.set(inductor_config, "post_grad_custom_post_pass", _CacheKeyPass())
    else:
        log.warning("rvv_inductor: post_grad_custom_post_pass is set; changing the gate or weights= between "
                    "compiles may reuse a cached graph (clear TORCHINDUCTOR_CACHE_DIR)")
    st["weights"] = quant_lowering.get_spec().format
    st["activations"] = quant_lowering.get_spec().activations
    lowerings = dict(routing.LOWERINGS)
    lowerings[ops.linear_packed] = packed_lowering.linear_packed_lowering
    lowerings[attention.decode_attention] = attention_lowering.decode_attention_lowering
    for op, fn in lowerings.items():
        if op in lowering.user_lowerings:
            log.warning("rvv_inductor: replacing an existing user lowering for %s", op)
        _patches.set(lowering.user_lowerings, op, fn)
    return st


def _cache_key_pass_class():
    # lazy: Inductor; `import rvv_inductor` must not import it
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class CacheKeyPass(CustomGraphPass):
        """Does nothing to the graph; its uuid puts rvv_inductor's settings and the hashes of
        its kernel headers and Python sources in the key."""

        def __call__(self, graph) -> None:
            return None

        def uuid(self):
            # lazy: Inductor; `import rvv_inductor` must not import it
            from .inductor import quant_lowering, routing, template

            return (f"rvv_inductor:{routing.get_gate()}:{quant_lowering.get_spec().key()}:"
                    f"{paths.headers_digest()}:{paths.sources_digest()}:{template.blocking_key()}")

    return CacheKeyPass


def _CacheKeyPass():
    return _cache_key_pass_class()()


def on_disable(callback: Callable[[], None]) -> None:
    """Call ``callback`` at every ``disable()`` (after the patches are undone)."""
    with _lock:
        _on_disable.append(callback)


def disable() -> None:
    """Restore stock Inductor (every patch is undone, in reverse order)."""
    with _lock:
        _patches.restore()
        _status.clear()
        from .inductor import quant_lowering  # lazy: Inductor; `import rvv_inductor` must not import it

        quant_lowering.set_spec(WeightSpec())
        for callback in _on_disable:
            callback()


def is_enabled() -> bool:
    return _patches.active


def status() -> dict:
    return dict(_status)
