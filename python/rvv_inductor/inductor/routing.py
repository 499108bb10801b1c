"""Send profitable static BF16 mm/addmm to the C++ GEMM template, without max-autotune.

Upstream routes a GEMM to ``CppGemmTemplate`` only under max-autotune, and then benchmarks
it against ATen (minutes per shape on the board). We register ``user_lowerings`` for
``aten.mm`` and ``aten.addmm`` (``F.linear`` lowers to these) that:

1. apply the shape gate (BF16 x BF16, static M/N/K, then ``policy.Gate``: M <= 128,
   N >= 1024, K >= 1024, M*N*K >= 1e6 by default; configurable);
2. keep upstream's own eligibility test, ``use_cpp_gemm_template``, evaluated under a
   local ``config.patch`` that turns on only what it asks for (CPP GEMM backend,
   ``weight_prepack``). Its remaining conditions stay in force: static N and K, a
   unit-stride activation, and a weight that is a frozen constant (``freezing=True``);
3. require that the micro-GEMM Inductor would use is one of ours (never the naive
   ``CppMicroGemmRef``);
4. add the template as the *only* choice, so ``autotune_select_algorithm`` returns it
   without benchmarking.

When ``enable(weights="int8" | "int4")`` asked for quantized weights, a GEMM that passed
the checks of 1. (and has a unit-stride activation) and whose weight is a frozen constant
goes to ``quant_lowering.try_lower`` first: the constant is quantized at compile time and a
quantized kernel generated instead of the BF16 template.

Anything else returns None, and Inductor's normal lowering (ATen ``extern_kernels.mm`` /
``addmm``) runs: no graph break, no change in behaviour. Every decision is logged
(``TORCH_LOGS=rvv_inductor``) and recorded with its reason (``reasons.Policy`` or ``reasons.Defect``) for
``python3 -m rvv_inductor verify``.
"""
from __future__ import annotations

import logging

import torch
import torch._inductor.lowering  # noqa: F401  (must precede codegen.cpp_*: circular-import trap)
from torch._inductor import ir
from torch._inductor.codegen.cpp_gemm_template import CppGemmTemplate
from torch._inductor.kernel.mm_common import mm_args
from torch._inductor.select_algorithm import autotune_select_algorithm
from torch._inductor.utils import has_free_symbols, use_cpp_gemm_template

from .. import cpu
from ..policy import Gate
from ..reasons import Defect, Fallback, Policy, Reason, record_fallback, record_rvv
from . import quant_lowering, template

log = logging.getLogger("rvv_inductor")
aten = torch.ops.aten


_gate = Gate()


def set_gate(gate: Gate) -> None:
    """The gate the lowerings apply from now on (``enable(gate=...)``)."""
    global _gate
    _gate = gate


def get_gate() -> Gate:
    return _gate


def _aten(op: str, m, n, k, dtype, reason: Reason, detail: str = "") -> None:
    """Record that this GEMM stays on ATen, and why; returns None (Inductor's lowering)."""
    record_fallback(op, m, n, k, dtype, "aten", Fallback(reason, detail))
    return None


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _try_template(op: str, mat1, mat2, bias=None, layout=None, alpha=1, beta=1):
    """The lowered template node, or None to fall back to Inductor's lowering."""
    if mat1.get_device() is None or mat1.get_device().type != "cpu":
        return None
    dtypes = (mat1.get_dtype(), mat2.get_dtype())
    # Sizes as Inductor knows them before realizing anything, for the log.
    m0, k0 = mat1.get_size()[-2:]
    n0 = mat2.get_size()[-1]
    if not cpu.effective().has_v:
        return _aten(op, m0, n0, k0, dtypes[0], Policy.NO_V, "ATen is the right kernel")
    if dtypes != (torch.bfloat16, torch.bfloat16):
        names = " x ".join(_dtype_name(d) for d in dtypes)
        return _aten(op, m0, n0, k0, names.replace(" ", ""), Policy.NOT_BF16, names)
    if bias is not None and bias.get_dtype() != torch.bfloat16:
        return _aten(op, m0, n0, k0, torch.bfloat16, Policy.BIAS_DTYPE, _dtype_name(bias.get_dtype()))
    if alpha != 1 or beta != 1:
        return _aten(op, m0, n0, k0, torch.bfloat16, Policy.SCALED, f"alpha={alpha}, beta={beta}")
    others = (bias,) if bias is not None else ()
    m, n, k, layout, mat1, mat2, *rest = mm_args(mat1, mat2, *others, layout=layout)
    if has_free_symbols((m, n, k)):
        return _aten(op, m, n, k, torch.bfloat16, Policy.DYNAMIC)
    m, n, k = int(m), int(n), int(k)
    refused = _gate.check(m, n, k)
    if refused:
        return _aten(op, m, n, k, torch.bfloat16, Policy.GATE, refused)
    if not _unit_stride_k(mat1):
        # Upstream's template needs X[m, k] contiguous along K; a transposed activation
        # would need a copy, which ATen's mm does as well as we could.
        return _aten(op, m, n, k, torch.bfloat16, Policy.LAYOUT, "activation not unit-stride along K")
    quantized = quant_lowering.try_lower(op, m, n, k, layout, mat1, mat2, bias)
    if quantized is not None:
        return quantized
    inputs = [mat1, mat2] if bias is None else [rest[0], mat1, mat2]
    with template.conditions():
        return _lower_to_template(op, m, n, k, layout, inputs, alpha, beta)


def _lower_to_template(op: str, m: int, n: int, k: int, layout, inputs: list, alpha, beta):
    """The template node for a GEMM that passed every check of ours, if upstream's own
    ``use_cpp_gemm_template`` agrees and an RVV micro-GEMM is picked; else None."""
    has_bias = len(inputs) == 3
    mat1, mat2 = inputs[-2:]
    if not use_cpp_gemm_template(layout, mat1, mat2):
        w = mat2.unwrap_view() if isinstance(mat2, ir.BaseView) else mat2
        if isinstance(w, ir.StorageBox) and not w.is_module_buffer():
            return _aten(op, m, n, k, torch.bfloat16, Defect.NOT_FROZEN,
                         "use torch._inductor.config.freezing=True under torch.no_grad()")
        return _aten(op, m, n, k, torch.bfloat16, Defect.TEMPLATE_DECLINED)
    micro = template.micro_gemm_for(m, n, k)
    if not template.is_rvv(micro):
        return _aten(op, m, n, k, torch.bfloat16, Defect.NO_RVV_MICRO_GEMM,
                     f"{type(micro).__name__}; is the RVV ISA active?")
    choices: list = []
    if has_bias:
        CppGemmTemplate.add_choices(choices, layout, inputs, alpha=alpha, beta=beta, has_bias=True)
    else:
        CppGemmTemplate.add_choices(choices, layout, inputs)
    if len(choices) != 1:
        return _aten(op, m, n, k, torch.bfloat16, Defect.TEMPLATE_CHOICES, f"{len(choices)} choices")
    node, _ = autotune_select_algorithm(f"rvv_{op}", choices, inputs, layout)
    record_rvv(op, m, n, k, torch.bfloat16, type(micro).__name__)
    return node


def _unit_stride_k(x) -> bool:
    try:
        x.freeze_layout()
        return x.get_stride()[-1] == 1
    except Exception:  # views without a fixed layout: let the template decide
        return True


def _guarded(op: str, mat1, mat2, **kwargs):
    """_try_template, except that an exception means ATen: routing never breaks a
    compile (ATen is always correct), and verify reports the failure."""
    try:
        return _try_template(op, mat1, mat2, **kwargs)
    except Exception as e:  # noqa: BLE001
        log.warning("rvv_inductor: %s routing failed (%s: %s); using ATen", op, type(e).__name__, e)
        try:
            (m, k), n = mat1.get_size()[-2:], mat2.get_size()[-1]
        except Exception:  # noqa: BLE001
            m = n = k = "?"
        return _aten(op, m, n, k, "?", Defect.LOWERING_FAILED, f"{type(e).__name__}: {e}")


def mm_lowering(mat1, mat2, *, layout=None, **kwargs):
    if kwargs.get("out_dtype") is not None:
        return None
    return _guarded("mm", mat1, mat2, layout=layout)


def addmm_lowering(inp, mat1, mat2, *, beta=1, alpha=1, layout=None, **kwargs):
    return _guarded("addmm", mat1, mat2, bias=inp, layout=layout, alpha=alpha, beta=beta)


LOWERINGS = {aten.mm.default: mm_lowering, aten.addmm.default: addmm_lowering}
