"""Whole-model ``torch.compile`` with weights quantized at freeze time.

``rvv_inductor.enable(weights="int8" | "int4", group_size=..., keep_bf16=...)`` sets the
``weight_spec.WeightSpec``. Then, for a GEMM that ``routing.py`` admitted (BF16, static shape,
gate passed, unit-stride activation) and whose weight is a frozen constant
(``V.graph.constants``, i.e. ``torch._inductor.config.freezing=True`` under
``torch.no_grad()``):

1. the constant is quantized and packed once, at compile time, with the same C ABI call
   and format as ``compile_linears(weights=...)`` (``quantized.quantize_pack``, FP16
   scales, no zero points, the detected block width), so both give the same bytes;
2. the packed bytes become a new graph constant and the BF16 one is pruned when nothing
   else reads it (as Inductor's GEMM template does with its blocked copy);
3. a ``QuantLinearTemplate`` kernel is generated: a thin shim that includes
   ``csrc/rvv_inductor/rvv/inductor_quant_linear.h`` and calls
   ``rvv_inductor::linear_quant_inductor``, which runs the kernel table's quantized GEMV
   (M == 1) or GEMM (M >= 2) over the N blocks, one contiguous range per OpenMP thread.
   Inductor compiles it with the detected ``-march``, so the ``.so`` holds the vector code
   and ``verify`` disassembles it. Its marker names format, group size and kernel.

A GGUF file exported in its own formats (``export FILE.gguf``, ``--weights file``) takes
step 1 from the file instead: :func:`file_weights` names, by the storage of each BF16
weight that stands for a quantized tensor in the traced model, the packed bytes that
``load_gguf`` made from the file's blocks (Q8_0/Q4_0 as INT8/INT4 g32, Q4_1, Q5_0, Q5_1
and the K-quants in their own block formats). Those bytes become the constant, each layer keeps
its own format and the file's bits per weight, and nothing is quantized again.

Shapes the user kept in BF16 (``keep_bf16``) or that cannot be quantized as asked (a group
size that does not divide K, a bias that is not a [N] vector, a non-finite weight) are recorded with a typed
``Policy`` reason (route "bf16") and continue on the BF16 path. Pointwise ops after the
kernel are not fused into it (``allow_epilogue_fusion = False``): they run as Inductor's own
loops on the kernel's output.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging

import torch
import torch._inductor.lowering  # noqa: F401  (must precede codegen.cpp_*: circular-import trap)
from torch._inductor import ir
from torch._inductor.codegen.cpp import get_export_declaration
from torch._inductor.codegen.cpp_template import CppTemplate
from torch._inductor.kernel.mm_common import realize_inputs
from torch._inductor.utils import parallel_num_threads
from torch._inductor.virtualized import V
from torch.utils._python_dispatch import _disable_current_modes

try:
    from torch._inductor.codegen.cpp_gemm_template import prune_tensors
except ImportError:  # a torch without it: the BF16 constants are kept (memory, not correctness)
    prune_tensors = None

from .. import _native, cpu, quantized
from ..paths import headers_digest
from ..policy import X8_GEMM_OPTION, resolve_activations, x8_applies
from ..reasons import Fallback, Policy, record_fallback, record_rvv
from ..weight_spec import WeightSpec
from . import kernel_marker

log = logging.getLogger("rvv_inductor")

SCALE_DTYPE = "f16"  # as compile_linears: FP16 scales


_spec = WeightSpec()


def set_spec(spec: WeightSpec) -> None:
    global _spec
    _spec = spec


def get_spec() -> WeightSpec:
    return _spec


@dataclasses.dataclass(frozen=True)
class FileWeight:
    """A Linear weight packed from a file's blocks: what the lowering uses instead of
    quantizing the BF16 constant that stands for it in the traced model."""

    fmt: str                        # weight-format name: int8, int4 (Q8_0, Q4_0 g32), q4_1, q4_k, ...
    layout: _native.PackedLayout    # quantized.layout_for(...) of [N, K]
    packed: torch.Tensor            # uint8 [layout.bytes]


_file_weights: dict[int, FileWeight] = {}


@contextlib.contextmanager
def file_weights(weights: dict[int, FileWeight]):
    """Within: a frozen BF16 weight whose storage (``data_ptr()``) is a key of ``weights``
    is lowered to its FileWeight's format and bytes, whatever ``enable(weights=...)`` says."""
    global _file_weights
    saved, _file_weights = _file_weights, dict(weights)
    try:
        yield
    finally:
        _file_weights = saved


def kernel_name(lay, m: int, info: cpu.CpuInfo, x8: bool = False) -> str:
    """The kernel-table name of what the generated code runs (rvv/inductor_quant_linear.h),
    as the dispatcher names it for the same layout and options on the variant the TU is
    compiled for: rvv_zvfh with Zvfh, else rvv. GEMV for M == 1, GEMM for M >= 2, with INT8
    activations the gemm_x8 kernel."""
    path = _native.RVV_PATH_RVV_ZVFH if info.has_zvfh else _native.RVV_PATH_RVV
    return _native.selected_kernel(m, lay, X8_GEMM_OPTION if x8 else 0, path, info.vlen // 8)


class QuantLinearTemplate(CppTemplate):
    """Y = X . W^T (+ bias) with W quantized and packed, as one generated C++ kernel."""

    HEADER = "rvv_inductor/rvv/inductor_quant_linear.h"

    def __init__(self, input_nodes, layout: ir.Layout, num_threads: int, *, lay, fmt: str, variant: str,
                 has_bias: bool, x8: bool = False) -> None:
        super().__init__("rvv_quant_linear", input_nodes, layout, num_threads)
        self.lay, self.fmt, self.variant, self.has_bias, self.x8 = lay, fmt, variant, has_bias, x8

    def render(self, kernel, template_buffer_node=None, flag_template_buffer_has_other_users=None,
               epilogue_nodes=None, **kwargs) -> str:
        if epilogue_nodes:
            raise NotImplementedError("rvv_inductor: the quantized Linear kernel takes no fused epilogue")
        nodes = template_buffer_node.inputs if template_buffer_node is not None else self.input_nodes
        x, w = nodes[0], nodes[1]
        b = nodes[2] if self.has_bias else None
        y = template_buffer_node if template_buffer_node is not None else self.output_node
        inputs = {"X": x, "W": w}
        if b is not None:
            inputs["B"] = b
        m, k = (int(s) for s in x.get_size())
        n = int(y.get_size()[1])
        ldx = int(x.get_stride()[0]) if m > 1 else k
        lay = self.lay
        decl = kernel.def_kernel(inputs=inputs, outputs={"Y": y})

        def ptr(node, name: str) -> str:
            # The kernel receives the base pointer of the underlying buffer; a view (a slice
            # of the activations, say) starts at its layout's offset.
            off = int(node.get_layout().offset)
            return f"{name} + {off}" if off else name

        bias = ptr(b, "B") if b is not None else "static_cast<const c10::BFloat16*>(nullptr)"
        return "\n".join([
            self.header().getvalue(),
            kernel_marker.line(self.variant, headers_digest()),
            f"// Y[{m}, {n}] = X[{m}, {k}] . W^T{' + B' if b is not None else ''}, W {self.fmt} packed "
            f"({lay.bytes} bytes, group {lay.group_size}, nb {lay.nb}); {self.num_threads} threads over N blocks"
            + ("; INT8 activations" if self.x8 else ""),
            f'#include "{self.HEADER}"',
            "",
            f'extern "C" {get_export_declaration()}',
            decl,
            "{",
            f"    rvv_inductor::linear_quant_inductor_or_throw<{lay.dtype}, "
            f"{'rvv_inductor::kQuantGemv' if m == 1 else 'rvv_inductor::kQuantGemmX8' if self.x8 else 'rvv_inductor::kQuantGemm'}>("
            f"{ptr(x, 'X')}, {ldx}, {m}, {n}, {k}, W, {lay.group_size}, {lay.scale_dtype}, {lay.zero_points}, {lay.nb}, "
            f"{lay.bytes}, {bias}, Y, {n}, {self.num_threads});",
            "}",
            "",
        ])


def _frozen_constant(mat2) -> tuple[str, torch.Tensor] | None:
    """(name, [K, N] view of the constant) when mat2 reads a frozen constant, else None."""
    try:
        name = mat2.get_name()
    except Exception:  # noqa: BLE001  (an unrealized view: not a plain constant)
        return None
    const = V.graph.constants.get(name)
    if const is None or const.dtype != torch.bfloat16 or const.device.type != "cpu":
        return None
    lay = mat2.get_layout()
    try:
        size, stride, offset = [int(s) for s in lay.size], [int(s) for s in lay.stride], int(lay.offset)
        with _real_tensors():
            view = torch.as_strided(const, size, stride, offset)
    except Exception:  # noqa: BLE001  (symbolic or odd layouts: not ours)
        return None
    return name, view


def _real_tensors():
    """Lowering may run under a fake-tensor mode; the constants are real tensors."""
    return _disable_current_modes()


def _quantize(name: str, w_nk: torch.Tensor, lay) -> torch.Tensor:
    """Packed bytes of the constant (once per graph, constant and layout)."""
    cache = getattr(V.graph, "_rvv_quant_cache", None)
    if cache is None:
        cache = {}
        V.graph._rvv_quant_cache = cache
    key = (name, lay.dtype, lay.group_size, lay.nb, tuple(w_nk.shape))
    if key not in cache:
        with _real_tensors():
            cache[key] = quantized.quantize_pack(w_nk.contiguous(), lay)
    return cache[key]


def _prune(mat2, packed_box) -> None:
    """Drop the BF16 constant when this GEMM was its only reader (memory)."""
    if prune_tensors is None:
        log.debug("rvv_inductor: could not prune the BF16 constant: this torch has no prune_tensors")
        return
    try:
        data = mat2.unwrap_view() if isinstance(mat2, ir.BaseView) else mat2
        if isinstance(data, ir.Buffer):
            data = ir.StorageBox(data)
        prune_tensors([data], [packed_box])
    except Exception as e:  # noqa: BLE001  (keeping the constant costs memory, not correctness)
        log.debug("rvv_inductor: could not prune the BF16 constant: %s", e)


def _file_weight(w_kn: torch.Tensor, n: int, k: int) -> FileWeight | None:
    """The FileWeight whose BF16 stand-in mat2 reads as a whole: [K, N] with strides (1, K)
    from the start of its storage, i.e. the [N, K] weight transposed (the frozen constant
    may be the weight or its folded permute view; a slice of it is not the file's layer)."""
    if not _file_weights:
        return None
    fw = _file_weights.get(w_kn.data_ptr())
    if fw is None or tuple(w_kn.shape) != (k, n) or tuple(w_kn.stride()) != (1, k) \
            or (fw.layout.n, fw.layout.k) != (n, k):
        return None
    return fw


def try_lower(op: str, m: int, n: int, k: int, layout, mat1, mat2, bias):
    """The quantized kernel node for a gated GEMM, or None to go on with the BF16 path.

    mat1, mat2: realized by mm_args; bias: the addmm input as it came (or None)."""
    spec = _spec
    if not spec.quantized and not _file_weights:
        return None
    found = _frozen_constant(mat2)
    if found is None:
        return None  # the BF16 path records why (Defect.NOT_FROZEN)
    name, w_kn = found
    fw = _file_weight(w_kn, n, k)
    if fw is None and not spec.quantized:
        return None  # a BF16 weight of the file: the BF16 path
    fmt = fw.fmt if fw is not None else spec.format
    if spec.keeps_tensor(w_kn.data_ptr(), V.graph.constants[name].data_ptr()):
        record_fallback(op, m, n, k, fmt, "bf16", Fallback(Policy.KEPT_BF16, name))
        return None
    info = cpu.effective()
    if fw is not None:
        lay, group_size = fw.layout, fw.layout.group_size
    else:
        group_size = spec.group_size
        if group_size and k % group_size:
            record_fallback(op, m, n, k, fmt, "bf16", Fallback(
                Policy.NOT_QUANTIZABLE, f"group_size={group_size} does not divide K={k}"))
            return None
        try:
            lay = quantized.layout(quantized.FORMAT_CODES[fmt], group_size, quantized.SCALE_DTYPES[SCALE_DTYPE], False,
                                   n, k, info.block_n)
        except quantized.QuantError as e:
            record_fallback(op, m, n, k, fmt, "bf16", Fallback(Policy.NOT_QUANTIZABLE, str(e)))
            return None
    b = None
    if bias is not None:
        if len(bias.get_size()) != 1 or int(bias.get_size()[0]) != n:
            record_fallback(op, m, n, k, fmt, "bf16", Fallback(
                Policy.NOT_QUANTIZABLE, f"bias of shape {list(bias.get_size())} is not a [{n}] vector"))
            return None
        b = ir.ExternKernel.require_contiguous(realize_inputs(bias))
    if not (isinstance(mat1.get_layout(), ir.FixedLayout) and mat1.get_stride()[-1] == 1):
        mat1 = ir.ExternKernel.require_contiguous(mat1)
    if fw is not None:
        packed = fw.packed
    else:
        with _real_tensors():
            w_nk = w_kn.t()
        try:
            packed = _quantize(name, w_nk, lay)
        except quantized.QuantError as e:  # e.g. an Inf or NaN in the weight
            record_fallback(op, m, n, k, fmt, "bf16", Fallback(Policy.NOT_QUANTIZABLE, str(e)))
            return None
    packed_box = V.graph.add_tensor_constant(packed, name=f"{name}_rvv_{fmt}")
    inputs = [mat1, packed_box] + ([b] if b is not None else [])
    x8 = (m > 1 and resolve_activations(fmt, spec.activations) == "int8" and x8_applies(fmt, group_size)
          if fw is not None else spec.x8(m))
    kernel = kernel_name(lay, m, info, x8)
    out_layout = ir.FixedLayout(mat1.get_device(), torch.bfloat16, [m, n])
    template = QuantLinearTemplate(inputs, out_layout, parallel_num_threads(), lay=lay, fmt=fmt,
                                   variant=kernel_marker.quant_variant(fmt, group_size, kernel),
                                   has_bias=b is not None, x8=x8)
    node = template.generate().output_node()
    buf = ir.InputsKernel.unwrap_storage_for_input(node)
    if isinstance(buf, ir.TemplateBuffer):
        buf.allow_epilogue_fusion = False
    _prune(mat2, packed_box)
    record_rvv(op, m, n, k, fmt, f"{kernel} g{group_size}" + (" act=int8" if x8 else "")
               + (" (the file's blocks)" if fw is not None else ""))
    return node
