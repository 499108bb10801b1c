"""Lowering of ``rvv_inductor::decode_attention`` (python/rvv_inductor/attention.py) to one
generated C++ kernel that calls ``rvv_inductor::attention_bf16`` from
``csrc/rvv_inductor/attention.h``: a thin shim, as the quantized Linear's; the kernel is
the header's. Compiled with the detected ``-march`` like every Inductor kernel, so an
AOTInductor package holds the vector code and needs no custom op at run time.

Sizes, strides and offsets may be symbolic (a compile with dynamic shapes: a decoder
layer compiled once for every prompt length, as `compile_layers=True` gets after its second
prompt length): they are then the kernel's size arguments, not constants. Without that a
dynamic prompt fell back to the op's eager kernel, FP32 torch math on one thread (~10 M
instructions per prompt token and layer at 1.5B dimensions, counted).

Returns None (the op's eager kernel then runs as an extern call) when the CPU has no V,
a dtype is not BF16 (mask: bool), or an operand's last dimension is not unit-stride after
realization.
"""
from __future__ import annotations

import logging

import torch
import torch._inductor.lowering  # noqa: F401  (must precede codegen.cpp_*: circular-import trap)
from torch._inductor import ir
from torch._inductor.codegen.cpp import get_export_declaration
from torch._inductor.codegen.cpp_template import CppTemplate
from torch._inductor.utils import parallel_num_threads
from torch._inductor.virtualized import V
from torch._inductor.codegen.cpp_utils import cexpr_index

from .. import cpu
from ..paths import headers_digest

log = logging.getLogger("rvv_inductor")

MARKER = "// rvv_inductor decode attention (kernel headers {digest})"


class AttentionTemplate(CppTemplate):
    HEADER = "rvv_inductor/attention.h"

    def __init__(self, input_nodes, layout: ir.Layout, num_threads: int, *, scale: float, has_mask: bool) -> None:
        super().__init__("rvv_decode_attention", input_nodes, layout, num_threads)
        self.scale, self.has_mask = scale, has_mask

    def render(self, kernel, template_buffer_node=None, flag_template_buffer_has_other_users=None,
               epilogue_nodes=None, **kwargs) -> str:
        if epilogue_nodes:
            raise NotImplementedError("rvv_inductor: the attention kernel takes no fused epilogue")
        nodes = template_buffer_node.inputs if template_buffer_node is not None else self.input_nodes
        y = template_buffer_node if template_buffer_node is not None else self.output_node
        names = ["Q", "K", "V"] + (["M"] if self.has_mask else [])
        decl = kernel.def_kernel(inputs=dict(zip(names, nodes)), outputs={"Y": y})
        q, k, v = nodes[:3]
        # C++ expressions: constants, or the kernel's size arguments when symbolic.
        B, H, T, D = (kernel.size(q, i) for i in range(4))
        Hkv, L = kernel.size(k, 1), kernel.size(k, 2)

        def base(node, name: str, ctype: str) -> str:
            off = node.get_layout().offset
            off = "" if V.graph.sizevars.statically_known_equals(off, 0) else f" + {cexpr_index(kernel.rename_indexing(off))}"
            return f"reinterpret_cast<const {ctype}*>({name}{off})"

        def strides(node) -> list[str]:
            return [kernel.stride(node, i) for i in range(len(node.get_stride()))]

        qs, ks, vs = strides(q), strides(k), strides(v)
        lines = [
            self.header().getvalue(),
            MARKER.format(digest=headers_digest()),
            f"// out[{B}, {T}, {H}, {D}] = softmax(q . k^T * {self.scale!r}, mask) . v; "
            f"{H} query heads over {Hkv} kv heads, cache {L}; {self.num_threads} threads",
            f'#include "{self.HEADER}"',
            "#include <new>",
            "",
            f'extern "C" {get_export_declaration()}',
            decl,
            "{",
            "    rvv_inductor::AttentionArgs a;",
            f"    a.q = {base(q, 'Q', 'uint16_t')}; a.q_sb = {qs[0]}; a.q_sh = {qs[1]}; a.q_st = {qs[2]};",
            f"    a.k = {base(k, 'K', 'uint16_t')}; a.k_sb = {ks[0]}; a.k_sh = {ks[1]}; a.k_sl = {ks[2]};",
            f"    a.v = {base(v, 'V', 'uint16_t')}; a.v_sb = {vs[0]}; a.v_sh = {vs[1]}; a.v_sl = {vs[2]};",
        ]
        if self.has_mask:
            m = nodes[3]
            # A broadcast dimension of size 1 is read at index 0 whatever its stride.
            ms = ["0" if V.graph.sizevars.statically_known_equals(sz, 1) else st
                  for st, sz in zip(strides(m), m.get_size())]
            lines.append(f"    a.mask = {base(m, 'M', 'bool')}; a.m_sb = {ms[0]}; a.m_sh = {ms[1]}; "
                         f"a.m_st = {ms[2]}; a.m_sl = {ms[3]};")
        lines += [
            "    a.out = reinterpret_cast<uint16_t*>(Y);",
            f"    a.B = {B}; a.H = {H}; a.Hkv = {Hkv}; a.T = {T}; a.L = {L}; a.D = {D}; a.scale = {float(self.scale)!r}f;",
            f"    if (!rvv_inductor::attention_bf16(a, {self.num_threads})) throw std::bad_alloc();",
            "}",
            "",
        ]
        return "\n".join(lines)


def _unit_stride(node) -> ir.IRNode:
    node = ir.ExternKernel.realize_input(node)
    if not isinstance(node.get_layout(), ir.FixedLayout) or node.get_stride()[-1] != 1:
        node = ir.ExternKernel.require_contiguous(node)
    return node


def decode_attention_lowering(q, k, v, mask, scale):
    try:
        return _lower(q, k, v, mask, scale)
    except Exception as e:  # noqa: BLE001  (the op's eager kernel is always correct)
        log.warning("rvv_inductor: decode_attention lowering failed (%s: %s); using the eager kernel",
                    type(e).__name__, e)
        return None


def _lower(q, k, v, mask, scale):
    if not cpu.effective().has_v:
        return None
    if any(t.get_dtype() != torch.bfloat16 for t in (q, k, v)) or (mask is not None and mask.get_dtype() != torch.bool):
        log.info("rvv_inductor: decode_attention keeps its eager kernel (dtypes)")
        return None
    q, k, v = (_unit_stride(t) for t in (q, k, v))
    if mask is not None:
        mask = _unit_stride(mask)
    if any(not V.graph.sizevars.statically_known_equals(t.get_stride()[-1], 1)
           for t in [q, k, v] + ([mask] if mask is not None else [])):
        log.info("rvv_inductor: decode_attention keeps its eager kernel (last dimension not unit-stride)")
        return None
    B, H, T, D = q.get_size()
    layout = ir.FixedLayout(q.get_device(), torch.bfloat16, [B, T, H, D])
    inputs = [q, k, v] + ([mask] if mask is not None else [])
    tmpl = AttentionTemplate(inputs, layout, parallel_num_threads(), scale=float(scale), has_mask=mask is not None)
    node = tmpl.generate().output_node()
    buf = ir.InputsKernel.unwrap_storage_for_input(node)
    if isinstance(buf, ir.TemplateBuffer):
        buf.allow_epilogue_fusion = False
    return node
