"""Lowering of ``rvv_inductor::linear_packed`` to the C++ GEMM template, weight in place.

Upstream's template blocks the weight itself: at compile time for a frozen constant, or
with a pad + permute copy on *every call* for a graph input. Our weight is already in the
template's blocked layout ``[N/Nr, K, Nr]``, so ``PrepackedGemmTemplate.block_weight``
hands the packed input through unchanged. The template needs a 2-D ``[K, N]`` weight only
to read M/N/K; we give it a view of the packed buffer with that size, which no generated
code ever indexes (``block_weight`` replaces it before rendering).

Falls back (returns None: the op then runs its eager C++ kernel as an extern call) when
the RVV ISA is not active, the block width differs from the micro-GEMM's Nr, or a shape
is dynamic.
"""
from __future__ import annotations

import logging

import torch
import torch._inductor.lowering  # noqa: F401  (must precede codegen.cpp_*: circular-import trap)
from torch._inductor import ir
from torch._inductor import lowering as L
from torch._inductor.codegen.cpp_gemm_template import CppGemmTemplate
from torch._inductor.kernel.mm_common import realize_inputs
from torch._inductor.select_algorithm import autotune_select_algorithm
from torch._inductor.utils import has_free_symbols

from .. import cpu
from ..reasons import Defect, Fallback, Policy, Reason, record_fallback, record_rvv
from . import template

log = logging.getLogger("rvv_inductor")

# name of the 2-D stand-in view -> the packed weight node it stands for; filled during
# lowering, read by block_weight in the same lowering call.
_STAND_INS: dict[str, ir.IRNode] = {}


class PrepackedGemmTemplate(CppGemmTemplate):
    @classmethod
    def block_weight(cls, W, new_size, padding):
        packed = _STAND_INS.get(W.get_name()) if isinstance(W, ir.IRNode) else None
        if packed is not None:
            if list(packed.get_size()) != list(new_size):
                raise AssertionError(f"packed weight {packed.get_size()} != template blocking {new_size}")
            return packed
        return super().block_weight(W, new_size, padding)


def _eager(m, n, k, reason: Reason, detail: str = "") -> None:
    """Record that the op keeps its eager C++ kernel, and why; returns None."""
    record_fallback("linear_packed", m, n, k, torch.bfloat16, "eager", Fallback(reason, detail))
    return None


def linear_packed_lowering(x, wp, bias, n):
    try:
        return _lower(x, wp, bias, n)
    except Exception as e:  # noqa: BLE001  (the extern eager kernel is always correct)
        log.warning("rvv_inductor: linear_packed lowering failed (%s: %s); using the eager kernel",
                    type(e).__name__, e)
        return _eager("?", n, "?", Defect.LOWERING_FAILED, f"{type(e).__name__}: {e}")


def _lower(x, wp, bias, n):
    x, wp = realize_inputs(x, wp)
    sizes = list(x.get_size()) + list(wp.get_size())
    if len(x.get_size()) != 2:
        return _eager("?", n, "?", Policy.LAYOUT, f"x is {len(x.get_size())}-D (the template takes [M, K])")
    if has_free_symbols(sizes):
        return _eager("?", n, "?", Policy.DYNAMIC, "symbolic sizes")
    m, k = (int(s) for s in x.get_size())
    if not cpu.effective().has_v:
        return _eager(m, n, k, Policy.NO_V)
    nr = int(wp.get_size()[-1])
    micro = template.micro_gemm_for(m, n, k)
    if not template.is_rvv(micro, block_n=nr):
        return _eager(m, n, k, Defect.NO_RVV_MICRO_GEMM, f"none with Nr={nr} ({type(micro).__name__})")
    if x.get_stride()[-1] != 1:
        return _eager(m, n, k, Policy.LAYOUT, "activation not unit-stride along K")
    if bias is not None:
        # As mm_args does for addmm: the template's epilogue reads an [M, N] view.
        bias = realize_inputs(L.expand(bias, [m, n]))
    storage = wp.data.data if isinstance(wp, ir.TensorBox) else wp
    stand_in = ir.ReinterpretView(data=storage, layout=ir.FixedLayout(
        x.get_device(), torch.bfloat16, [k, n], [1, k], 0))
    _STAND_INS[stand_in.get_name()] = wp
    layout = ir.FixedLayout(x.get_device(), torch.bfloat16, [m, n])
    inputs = [x, stand_in] if bias is None else [bias, x, stand_in]
    choices: list = []
    try:
        with template.conditions():
            if bias is None:
                PrepackedGemmTemplate.add_choices(choices, layout, inputs)
            else:
                # The template adds a [N] bias broadcast over rows in its epilogue.
                PrepackedGemmTemplate.add_choices(choices, layout, inputs, has_bias=True)
            node, _ = autotune_select_algorithm("rvv_linear_packed", choices, inputs, layout)
    finally:
        _STAND_INS.pop(stand_in.get_name(), None)
    record_rvv("linear_packed", m, n, k, torch.bfloat16, type(micro).__name__)
    return node
