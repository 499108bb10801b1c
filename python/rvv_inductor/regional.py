"""Regional compile: compile only the Linear layers, with packed weights the module owns
and can still update.

``compile_linears(model)`` replaces every eligible ``nn.Linear`` by an ``RVVLinear`` that

* owns its weight packed once as ``[ceil(N/nb), K, nb]`` BF16 (the original is not kept;
  the only overhead is the zero padding of the last block, reported in bytes);
* runs ``rvv_inductor::linear_packed`` through the regional runtime (``runtime.py``): one
  compiled artifact per (N, K, M-bucket, bias), shared by every layer of that shape, the
  weight an *input* of the compiled graph, not a constant; M is padded to a bucket
  (``policy.M_BUCKETS``: 1, 2, 4, ..., 128), larger M split into chunks of 128 rows;
* keeps the usual module contract:
  - ``state_dict()`` returns ``weight`` in the original ``[N, K]`` layout (unpacked when
    asked), so checkpoints stay portable; ``load_state_dict`` repacks;
  - ``layer.weight`` materialises a temporary ``[N, K]`` copy. The module holds it until
    its next forward, and repacks from it if it was changed in place (its version counter
    moved), so ``layer.weight.copy_(w)`` / ``.mul_(2)`` are never silently lost;
  - assigning ``layer.weight = nn.Parameter(w)`` repacks at once; a different shape or
    dtype is a clear error;
  - inputs it cannot serve (not BF16, not on CPU) fall back to ``F.linear`` with the
    unpacked weight, with the same result as before.
"""
from __future__ import annotations

import dataclasses
import logging
import threading

import torch
import torch.nn.functional as F

from . import _native, cpu, functional_linear, heap, layer_regions, ops, packed, quantized
from .integration import enable
from .loaders import MetaLoader, meta_problems
from .policy import DEFAULT_ACTIVATIONS, X8_GEMM_OPTION, Gate, check_activations, resolve_activations, x8_applies
from .reasons import Fallback, Policy
from .runtime import run_packed
from .weight_spec import WeightSpec

log = logging.getLogger("rvv_inductor")
_BF16 = torch.bfloat16


class RVVLinear(torch.nn.Module):
    """A BF16 Linear whose weight lives packed; see the module docstring."""

    format = "bf16"
    _packed_dtype = torch.bfloat16

    def __init__(self, in_features: int, out_features: int, bias: torch.Tensor | None, nb: int) -> None:
        super().__init__()
        self.in_features, self.out_features, self.nb = in_features, out_features, nb
        self.register_buffer("packed_weight", torch.empty(0, dtype=torch.bfloat16), persistent=False)
        # Registered even when None, as nn.Linear does: forward reads it from _parameters.
        self.register_parameter("bias", torch.nn.Parameter(bias.detach().clone(), requires_grad=False)
                                if bias is not None else None)
        # The materialised [N, K] weight (see `weight`), kept in __dict__ (object.__setattr__):
        # a Parameter, but not one of the module's, and forward reads it without
        # nn.Module.__getattr__.
        object.__setattr__(self, "_materialized", None)
        self._materialized_version = 0
        self._lock = threading.Lock()

    # copy.deepcopy / pickle: the lock is not state; each copy gets its own.
    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_lock", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__["_lock"] = threading.Lock()

    @classmethod
    def from_linear(cls, lin: torch.nn.Linear, nb: int) -> RVVLinear:
        m = cls(lin.in_features, lin.out_features, lin.bias, nb)
        m._repack(lin.weight.detach())
        return m

    # -- the weight ---------------------------------------------------------------
    def _repack(self, w: torch.Tensor) -> None:
        expected = (self.out_features, self.in_features)
        if tuple(w.shape) != expected:
            raise ValueError(f"RVVLinear: weight of shape {tuple(w.shape)} does not fit this layer "
                             f"({expected}); build a new layer for a new shape")
        if w.dtype != torch.bfloat16:
            raise ValueError(f"RVVLinear: weight dtype {w.dtype}, expected torch.bfloat16")
        self.packed_weight = self._pack(w.detach().to("cpu"))

    def _pack(self, w: torch.Tensor) -> torch.Tensor:
        return packed.pack(w, self.nb)

    def _unpacked(self) -> torch.Tensor:
        """The [N, K] bf16 weight the layer multiplies with."""
        return packed.unpack(self.packed_weight, self.out_features)

    @property
    def packed_bytes(self) -> int:
        return self.packed_weight.numel() * self.packed_weight.element_size()

    @property
    def weight(self) -> torch.Tensor:
        """A materialised [N, K] copy; in-place changes to it reach the layer at its next
        forward (see the module docstring)."""
        with self._lock:
            if self._materialized is None:
                # A Parameter (not registered: the module's parameter is the packed buffer)
                # so that code asking for one (get_parameter, transformers' tie_weights) works.
                # Built outside inference mode even when asked inside it: an inference tensor
                # has no version counter, and in-place changes must still reach the layer.
                with torch.inference_mode(False):
                    mat = torch.nn.Parameter(self._unpacked(), requires_grad=False)
                object.__setattr__(self, "_materialized", mat)
                self._materialized_version = mat._version
            return self._materialized

    def __setattr__(self, name, value):
        if name == "weight":
            self._repack(value)
            self.__dict__["_materialized"] = None
            return
        super().__setattr__(name, value)

    def _sync_weight(self) -> None:
        with self._lock:
            mat = self._materialized
            if mat is not None:
                if mat._version != self._materialized_version:
                    self._repack(mat)
                object.__setattr__(self, "_materialized", None)

    # -- checkpoints ----------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        self._sync_weight()
        destination[prefix + "weight"] = self._unpacked()
        if self.bias is not None:
            destination[prefix + "bias"] = self.bias if keep_vars else self.bias.detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        key = prefix + "weight"
        if key in state_dict:
            try:
                self._repack(state_dict[key])
                object.__setattr__(self, "_materialized", None)
            except ValueError as e:
                error_msgs.append(str(e))
        elif strict:
            missing_keys.append(key)
        if self.bias is not None:
            bkey = prefix + "bias"
            if bkey in state_dict:
                with torch.no_grad():
                    self.bias.copy_(state_dict[bkey])
            elif strict:
                missing_keys.append(bkey)

    def _apply(self, fn, recurse=True):
        # .to(dtype) must not corrupt the packed layout: keep it BF16 (the round trip
        # through a wider float is exact). Inputs of another dtype then take the F.linear
        # fallback with the weight converted on the fly.
        super()._apply(fn, recurse)
        if self.packed_weight.dtype != self._packed_dtype:
            self.packed_weight = self.packed_weight.to(self._packed_dtype)
        return self

    # -- forward ----------------------------------------------------------------------
    # The decode path is counted (bench/call_overhead.sh): it reads the module's dicts
    # directly instead of through nn.Module.__getattr__, and the op does the rest in C++.
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.__dict__
        if d["_materialized"] is not None:
            self._sync_weight()
        bias = d["_parameters"]["bias"]
        if (x.dtype is not _BF16 or not x.is_cpu or x.shape[-1] != d["in_features"]
                or (bias is not None and bias.dtype is not _BF16)):
            w = self._unpacked().to(x.dtype)
            return F.linear(x, w, bias.to(x.dtype) if bias is not None else None)
        return self._run(x, d["_buffers"]["packed_weight"], bias)

    def _run(self, x: torch.Tensor, wp: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return run_packed(x, wp, self.out_features, self.in_features, bias)

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows ``ids`` of the [N, K] weight, ``[*ids.shape, K]`` bf16, read from the packed
        buffer (what a tied embedding looks up); the same values as ``self.weight[ids]``."""
        self._sync_weight()
        idx = _embedding_indices(ids, self.out_features)
        wp = self.packed_weight
        nb = wp.shape[2]
        return wp[idx // nb, :, idx % nb].reshape(*ids.shape, self.in_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"nb={self.nb}, format={self.format}")


class RVVQuantLinear(RVVLinear):
    """An RVVLinear whose weight is quantized (INT8 or INT4, per-group 16-bit scales) when it
    is set, and kept only packed (a flat uint8 buffer in the C ABI's layout).

    The module contract is RVVLinear's, with the dequantized weight standing for the weight:
    ``state_dict()`` and ``layer.weight`` give ``(q - z) * s`` rounded to bf16 ``[N, K]``;
    ``load_state_dict``, ``layer.weight = ...`` and in-place changes of ``layer.weight``
    re-quantize (at the next forward for in-place changes). ``quantized_tensors()`` gives
    the stored values, scales and zero points; ``dequantized()`` the exact FP32 weight the
    kernel multiplies with. Forward calls ``rvv_inductor::linear_packed_q`` (one custom op:
    eager it is the C++ kernel, inside a torch.compile graph one extern call).

    ``activations`` ("auto", "int8" or "bf16", ``policy.ACTIVATIONS``): how calls with
    M >= 2 treat X: quantized to INT8 per 32 values and multiplied in integers, or the FP
    path; "auto" is "int8" for INT4 weights and "bf16" for INT8 ones. It is a plain
    attribute: set it to switch a layer at any time."""

    _packed_dtype = torch.uint8

    def __init__(self, in_features: int, out_features: int, bias: torch.Tensor | None, nb: int, fmt: str,
                 group_size: int, scale_dtype: str = "f16", activations: str = DEFAULT_ACTIVATIONS) -> None:
        super().__init__(in_features, out_features, bias, nb)
        self.format, self.group_size, self.scale_dtype = fmt, group_size, scale_dtype
        self._layout = quantized.layout_for(fmt, group_size, scale_dtype, False, out_features, in_features, nb)
        self.activations = activations
        self.register_buffer("packed_weight", torch.empty(0, dtype=torch.uint8), persistent=False)

    @classmethod
    def from_linear(cls, lin: torch.nn.Linear, nb: int, fmt: str = "int8", group_size: int = 0,  # type: ignore[override]
                    scale_dtype: str = "f16", activations: str = DEFAULT_ACTIVATIONS) -> RVVQuantLinear:
        m = cls(lin.in_features, lin.out_features, lin.bias, nb, fmt, group_size, scale_dtype, activations)
        m._repack(lin.weight.detach())
        return m

    def _pack(self, w: torch.Tensor) -> torch.Tensor:
        if quantized.is_block_format(self.format):
            # No quantizer for the GGUF block formats: their layers hold a file's blocks.
            raise quantized.QuantError(f"a {self.format} layer holds a GGUF file's blocks; setting its weight would "
                                       "need a quantizer to that format, which this package does not have")
        return quantized.quantize_pack(w, self._layout)

    def dequantized(self) -> torch.Tensor:
        """The exact weight (q - z) * s of the kernel, FP32 [N, K]."""
        self._sync_weight()
        return quantized.dequantize(self.packed_weight, self._layout)

    def _unpacked(self) -> torch.Tensor:
        return quantized.dequantize(self.packed_weight, self._layout).to(torch.bfloat16)

    def quantized_tensors(self) -> dict:
        """The stored weight: ``values`` [N, K] int8 (INT4: 0..15), ``scales`` [N, groups]
        (float16 or bfloat16), ``zeros`` [N, groups] uint8 (8 for INT4, 0 for INT8: implicit),
        and ``format``/``group_size`` (0: one group per output channel)."""
        self._sync_weight()
        if quantized.is_block_format(self.format):
            raise quantized.QuantError(f"a {self.format} layer stores GGUF records, not values and scales; "
                                       "dequantized() gives its exact weight")
        out = quantized.unpack_quantized(self.packed_weight, self._layout)
        out.update(format=self.format, group_size=self.group_size)
        return out

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows ``ids`` of the dequantized weight (q - z) * s rounded to bf16, exactly the
        rows of ``self.weight`` / ``state_dict()`` (``rvv_dequantize_rows``, no [N, K] copy)."""
        self._sync_weight()
        idx = _embedding_indices(ids, self.out_features)
        out = quantized.dequantize_rows(self.packed_weight, self._layout, idx).to(torch.bfloat16)
        return out.reshape(*ids.shape, self.in_features)

    @property
    def activations(self) -> str:
        return self.__dict__["_activations"]

    @activations.setter
    def activations(self, value: str) -> None:
        # Checked and turned into the op's arguments here, once, not at every call.
        self.__dict__["_activations"] = check_activations(value, "RVVQuantLinear")
        lay = self._layout
        self.__dict__["_op_args"] = (self.out_features, lay.dtype, lay.group_size, lay.scale_dtype,
                                     lay.zero_points, lay.nb, self._options())

    def _run(self, x: torch.Tensor, wp: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return ops.linear_packed_q(x, wp, bias, *self.__dict__["_op_args"])

    def _options(self) -> int:
        return X8_GEMM_OPTION if resolve_activations(self.format, self.activations) == "int8" else 0

    @property
    def activations_used(self) -> str:
        """What calls with M >= 2 really do: "int8" only where the kernels cover the format."""
        return ("int8" if resolve_activations(self.format, self.activations) == "int8"
                and x8_applies(self.format, self.group_size) else "bf16")

    def extra_repr(self) -> str:
        return (super().extra_repr() + f", group_size={self.group_size}, scales={self.scale_dtype}, "
                f"activations={self.activations}")


def _embedding_indices(ids: torch.Tensor, n: int) -> torch.Tensor:
    """ids as a flat int64 tensor, with nn.Embedding's errors for bad ones."""
    if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {getattr(ids, 'dtype', type(ids))} instead")
    idx = ids.reshape(-1).to(device="cpu", dtype=torch.int64)
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= n):
        raise IndexError(f"index out of range in self (indices must be in [0, {n}))")
    return idx


class RVVTiedEmbedding(torch.nn.Module):
    """An nn.Embedding whose table is tied to a Linear that ``compile_linears`` packed (the
    usual ``tie_word_embeddings`` lm_head): it keeps no table of its own and looks rows up
    in that layer's packed weight, so the model holds the vocabulary matrix once.

    The rows are exactly the Linear's weight: the BF16 values for an RVVLinear; for an
    RVVQuantLinear the dequantized (q - z) * s rounded to bf16, the same numbers
    ``lm_head.weight`` and ``state_dict()`` give (as llama.cpp reads a tied quantized
    token_embd). The two stay one tensor: ``state_dict()`` gives ``weight`` ([N, K]);
    ``load_state_dict``, ``emb.weight = w`` and in-place changes of ``emb.weight`` (which is
    the Linear's materialised ``weight``) update the Linear, and updating the Linear
    updates the lookups. ``padding_idx`` is kept (it only matters for gradients, which
    packed weights do not have); ``max_norm`` embeddings are never tied (they rewrite the
    table)."""

    def __init__(self, emb: torch.nn.Embedding, linear: RVVLinear) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = emb.num_embeddings, emb.embedding_dim
        self.padding_idx = emb.padding_idx
        object.__setattr__(self, "_linear", linear)  # not a submodule: lm_head stays where it is
        self._dtype = emb.weight.dtype

    @property
    def linear(self) -> RVVLinear:
        return self.__dict__["_linear"]

    @property
    def weight(self) -> torch.Tensor:
        return self.linear.weight

    def __setattr__(self, name, value):
        if name == "weight":
            self.linear.weight = value  # repacks the shared buffer: both stay tied
            return
        super().__setattr__(name, value)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = self.linear.rows(ids)
        return out if out.dtype == self._dtype else out.to(self._dtype)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        self.linear._sync_weight()
        destination[prefix + "weight"] = self.linear._unpacked()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        key = prefix + "weight"
        if key in state_dict:
            try:
                self.linear._repack(state_dict[key])
                object.__setattr__(self.linear, "_materialized", None)
            except ValueError as e:
                error_msgs.append(str(e))
        elif strict:
            missing_keys.append(key)

    def _apply(self, fn, recurse=True):
        # The table is the Linear's (converted with it, kept packed); follow a dtype change
        # for the rows handed out, as nn.Embedding would.
        probe = fn(torch.empty(0, dtype=self._dtype))
        if isinstance(probe, torch.Tensor) and probe.is_floating_point():
            self._dtype = probe.dtype
        return self

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, tied to the packed {self.linear.format} Linear"


def _tieable(emb: torch.nn.Module) -> bool:
    return (type(emb) is torch.nn.Embedding and emb.max_norm is None and not emb.sparse)


@dataclasses.dataclass
class LinearReport:
    """What ``compile_linears`` did: the layers it took, those it kept (with the reason),
    and the bytes of the packed weights."""

    taken: list[tuple[str, int, int]] = dataclasses.field(default_factory=list)
    fell_back: list[tuple[str, Fallback]] = dataclasses.field(default_factory=list)
    # Layers that are not nn.Linear but own 2-D BF16 weights: their F.linear calls on those
    # weights are routed at call time (functional_linear.py); (name, N, K) per weight.
    functional: list[tuple[str, int, int]] = dataclasses.field(default_factory=list)
    # Per taken layer: (name, format, packed bytes, BF16 bytes of its [N, K] weight).
    formats: list[tuple[str, str, int, int]] = dataclasses.field(default_factory=list)
    param_bytes: int = 0      # BF16 bytes of the weights that were packed
    packed_bytes: int = 0     # bytes of their packed buffers (incl. padding)
    # Packed copies of the `functional` weights, built at their first call; unlike
    # packed_bytes these come on top of the originals, which the module's forward reads.
    functional_packed_bytes: int = 0
    # Embeddings tied to a packed Linear (embedding name, Linear name): they now read the
    # Linear's packed weight and keep no table of their own (RVVTiedEmbedding).
    tied: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    # With compile_linears(load=...): bytes of tensors read from the loader.
    loaded_bytes: int = 0
    # compile_linears(activations=...): how INT8/INT4 layers treat X at M >= 2, and the
    # quantized layers that really quantize it (the others run the FP path).
    activations: str = DEFAULT_ACTIVATIONS
    int8_activation_layers: list[str] = dataclasses.field(default_factory=list)
    # compile_linears(compile_layers=True): the blocks compiled as regions, and whether
    # attention was switched to the RVV op (layer_regions.py).
    compiled_layers: list[str] = dataclasses.field(default_factory=list)
    rvv_attention: bool = False

    @property
    def packed_overhead(self) -> float:
        return self.packed_bytes / self.param_bytes - 1 if self.param_bytes else 0.0

    def __str__(self) -> str:
        lines = [f"rvv_inductor.compile_linears: {len(self.taken)} Linear layers on RVV, "
                 f"{len(self.fell_back)} kept as they were; packed {self.packed_bytes / 2**20:.1f} MiB for "
                 f"{self.param_bytes / 2**20:.1f} MiB of BF16 weights "
                 + (f"({100 * self.packed_bytes / self.param_bytes:.1f}% of BF16: quantized)"
                    if any(f != "bf16" for _, f, _, _ in self.formats) else f"(+{100 * self.packed_overhead:.2f}%)")]
        if any(f != "bf16" for _, f, _, _ in self.formats):
            lines.append(f"  activations of INT8/INT4 layers at M >= 2: {self.activations}: "
                         f"{len(self.int8_activation_layers)} layers quantize X to INT8 per 32 values, "
                         "the others take the FP path")
        fmt = {name: (f, pb, bb) for name, f, pb, bb in self.formats}
        for name, n, k in self.taken:
            f, pb, bb = fmt.get(name, ("bf16", 0, 0))
            lines.append(f"  RVV   {name}  N={n} K={k}  {f}  {pb / 2**20:.2f} MiB packed / {bb / 2**20:.2f} MiB bf16"
                         if bb else f"  RVV   {name}  N={n} K={k}")
        if self.functional:
            lines.append(f"  + {self.functional_packed_bytes / 2**20:.1f} MiB of packed copies for F.linear weights "
                         "(built at first call, in addition to the originals)")
        lines += [f"  RVV   {name}  N={n} K={k} (F.linear in a custom forward; original weight kept, packed "
                  "copy extra)" for name, n, k in self.functional]
        lines += [f"  kept  {name}  ({why})" for name, why in self.fell_back]
        lines += [f"  tied  {emb} reads the packed {lin} (no table of its own)" for emb, lin in self.tied]
        if self.compiled_layers:
            lines.append(f"  {len(self.compiled_layers)} layers compiled as regions "
                         f"({self.compiled_layers[0]} .. {self.compiled_layers[-1]})"
                         + ("; attention through the RVV kernel" if self.rvv_attention else ""))
        return "\n".join(lines)


def _refusal(lin: torch.nn.Linear, info: cpu.CpuInfo, gate: Gate) -> Fallback | None:
    """Why ``lin`` stays an nn.Linear, or None when it becomes an RVVLinear. A weight on the
    meta device counts as a CPU one: compile_linears(load=...) materialises it on the CPU."""
    w = lin.weight
    if not info.has_v:
        return Fallback(Policy.NO_V)
    if w.dtype != torch.bfloat16:
        return Fallback(Policy.NOT_BF16, f"weight dtype {w.dtype}")
    if w.device.type not in ("cpu", "meta"):
        return Fallback(Policy.NOT_CPU, f"device {w.device}")
    if lin.bias is not None and lin.bias.dtype != torch.bfloat16:
        return Fallback(Policy.BIAS_DTYPE, str(lin.bias.dtype))
    refused = gate.check(1, *w.shape)
    return Fallback(Policy.GATE, refused) if refused else None


def _admitted(model: torch.nn.Module, info: cpu.CpuInfo, gate: Gate, report: LinearReport):
    """(parent, child name, full name, nn.Linear) of each admitted layer; refusals go to the report."""
    out = []
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, RVVLinear) or not isinstance(child, torch.nn.Linear):
                continue
            name = f"{parent_name}.{child_name}" if parent_name else child_name
            refusal = _refusal(child, info, gate)
            if refusal:
                report.fell_back.append((name, refusal))
                continue
            out.append((parent, child_name, name, child))
    return out


def _check_quantizable(layers, spec: WeightSpec, nb: int) -> None:
    """ValueError for the first layer its format cannot hold, before anything is packed."""
    for _, _, name, lin in layers:
        fmt = spec.format_for(name)
        if fmt == "bf16":
            continue
        k = lin.in_features
        if spec.group_size and k % spec.group_size:
            raise ValueError(f"compile_linears: group_size={spec.group_size} does not divide K={k} of {name} "
                             f"(keep it in BF16 with keep_bf16={name!r}, or choose another group size)")
        try:
            quantized.layout(quantized.FORMAT_CODES[fmt], spec.group_size, _native.RVV_DTYPE_F16, False,
                             lin.out_features, k, nb)
        except quantized.QuantError as e:
            raise ValueError(f"compile_linears: {name} cannot be {fmt} with group_size={spec.group_size}: {e}") from None


def _swap_linears(model: torch.nn.Module, info: cpu.CpuInfo, gate: Gate, report: LinearReport,
                  spec: WeightSpec = WeightSpec(), loader: MetaLoader | None = None) -> None:
    """Replace each admitted nn.Linear by an RVVLinear (or RVVQuantLinear), in place, and an
    nn.Embedding tied to one of them by an RVVTiedEmbedding.

    Largest first, one at a time, dropping every reference to the original as soon as its
    packed copy is in the model: the original weight is freed then (unless something else
    holds it), so packing never holds more than one extra layer. With a loader, a weight on
    the meta device is read just before it is packed and dropped after."""
    layers = _admitted(model, info, gate, report)
    _check_quantizable(layers, spec, info.block_n)
    tied = {}  # id(weight) -> (parent, child name, full name, nn.Embedding)
    for parent_name, parent in model.named_modules():
        for child_name, child in parent.named_children():
            if _tieable(child):
                name = f"{parent_name}.{child_name}" if parent_name else child_name
                tied.setdefault(id(child.weight), (parent, child_name, name, child))
    # Largest first: with a loader, the biggest transient comes while little is resident.
    layers.sort(key=lambda e: e[3].in_features * e[3].out_features)
    while layers:
        parent, child_name, name, child = layers.pop()
        fmt = spec.format_for(name)
        n, k = child.out_features, child.in_features
        w, bias = child.weight, child.bias
        if loader is not None:
            w = loader.tensor(w, report)
            bias = loader.tensor(bias, report) if bias is not None else None
        if fmt == "bf16":
            new = RVVLinear(k, n, bias, info.block_n)
        else:
            new = RVVQuantLinear(k, n, bias, info.block_n, fmt, spec.group_size, activations=spec.activations)
            if new.activations_used == "int8":
                report.int8_activation_layers.append(name)
        new._repack(w)
        del w, bias
        setattr(parent, child_name, new)
        emb = tied.pop(id(child.weight), None)
        if emb is not None and tuple(emb[3].weight.shape) == (n, k):
            eparent, ename, efull, embedding = emb
            setattr(eparent, ename, RVVTiedEmbedding(embedding, new))
            report.tied.append((efull, name))
            del embedding
        del emb, child
        report.taken.append((name, n, k))
        report.formats.append((name, fmt, new.packed_bytes, n * k * 2))
        report.param_bytes += n * k * 2
        report.packed_bytes += new.packed_bytes
        del new
        # The original is freed now; without this its heap block stays resident as a hole
        # under the packed copy (heap.py), ~2 GiB over a 1.5B BF16 model.
        heap.release_freed()
    order = {n: i for i, (n, _) in enumerate(model.named_modules())}
    report.taken.sort(key=lambda e: order.get(e[0], len(order)))
    report.formats.sort(key=lambda e: order.get(e[0], len(order)))


def _route_functional(model: torch.nn.Module, info: cpu.CpuInfo, gate: Gate, report: LinearReport) -> None:
    """Route the F.linear calls of other modules on their own admitted 2-D BF16 weights."""
    for name, mod in list(model.named_modules()):
        if isinstance(mod, RVVLinear):
            continue
        admitted = []
        for pname in functional_linear.candidate_weights(mod):
            n, k = getattr(mod, pname).shape
            full = f"{name}.{pname}" if name else pname
            refused = gate.check(1, n, k)
            if refused:
                report.fell_back.append((full, Fallback(Policy.GATE, f"{refused} (F.linear weight)")))
                continue
            admitted.append(pname)
            report.functional.append((full, n, k))
            report.functional_packed_bytes += packed.packed_bytes(n, k, info.block_n)
        if admitted:
            functional_linear.install(mod, admitted, info.block_n, gate)


def compile_linears(model: torch.nn.Module, *, gate: Gate | None = None, weights: str = "bf16",
                    group_size: int | None = None, keep_bf16: str | list[str] | tuple[str, ...] = (),
                    load=None, activations: str = DEFAULT_ACTIVATIONS, compile_layers: bool = False) -> LinearReport:
    """Replace every eligible nn.Linear of ``model`` (in place) by an RVVLinear, and route
    the F.linear calls of other modules on their own 2-D BF16 weights (functional_linear);
    return a report of what was taken, what was kept, and why.

    ``weights``: "bf16" (default: packed as they are), "int8" or "int4": each admitted
    Linear is quantized at load (round to nearest, FP16 scales) into an RVVQuantLinear.
    ``group_size``: K rows per scale (``policy.GROUP_SIZES``; default
    ``policy.DEFAULT_GROUP_SIZE``: INT8 0 = per output channel, INT4 64). ``keep_bf16``:
    fnmatch pattern(s) of layers kept in BF16 (matched against the full name and its last
    part, e.g. "lm_head"). A format, group size or K that does not fit is a ValueError
    raised before any layer is changed. F.linear weights of custom modules stay BF16.

    ``activations`` (INT8/INT4 weights only): "int8" quantizes X of every call with M >= 2
    (prompt, batched decode) per row in blocks of 32, as llama.cpp's Q8_0 activations, and
    multiplies in integers (csrc/rvv_inductor/quant_x8.h; error at most
    sum|w| * max|x_block| / 254 per output); "bf16" keeps the FP path, each product exact in
    fp32; "auto" (default) is "int8" for INT4 layers and "bf16" for INT8 ones (docs/kernels-and-formats.md, "INT8
    activations", has the measurements). Decode (M == 1) takes the FP path either way. ``report.activations`` and
    ``report.int8_activation_layers`` say what was chosen; each layer's ``activations``
    attribute can be changed later.

    Memory. Layers are packed largest first, one at a time, and the original weight is
    dropped as soon as its packed copy is in the model (freed unless the caller holds it).
    An nn.Embedding that shares its weight with a packed Linear (``tie_word_embeddings``)
    becomes an RVVTiedEmbedding reading that Linear's packed weight: one vocabulary matrix,
    not two (``report.tied``).

    ``load``: for a model built on the meta device (``with torch.device("meta"): model =
    Qwen2ForCausalLM(config)``), where the weights come from: a safetensors file or a
    directory of them (read tensor by tensor, without mmap), or a callable ``load(name,
    meta_tensor) -> tensor`` (CPU, the meta tensor's shape, any dtype: converted to the
    model's; raise KeyError for a name it does not have: a tied weight is asked for under
    each of its names). Each Linear weight is read just before it is packed (quantized)
    and dropped right after, so the whole BF16 model never exists: the peak is the packed
    model plus one layer. Every other meta parameter and buffer is read afterwards.
    Non-persistent buffers (rotary ``inv_freq``) are not in checkpoints: build those modules
    on the CPU first, or let the callable compute them. A model with meta tensors and no
    ``load`` is a ValueError, raised before anything changes.

    ``compile_layers=True``: each repeated block (the decoder layers) then runs as one
    compiled region around its packed Linear layers: norms, RoPE, the cache update and the
    residual adds as generated code, attention through the RVV kernel
    (``layer_regions.py``). Decode does a fraction of eager's work between the Linear
    kernels; the price is each layer's compile at its first prompt and first decode step
    (``report.compiled_layers`` names them).

    ``gate`` decides which weight shapes are worth a compiled region: by default
    ``Gate.regional()`` (N, K >= 128), with the keys set in ``RVV_INDUCTOR_REGIONAL_GATE``
    ("min_n=256,min_k=256") on top. It is not the whole-graph gate of ``enable()``, which
    stays as it was."""
    spec = WeightSpec.parse(weights, group_size, keep_bf16, activations, caller="compile_linears")
    problem = meta_problems(model, load)
    if problem:
        raise ValueError(f"compile_linears: {problem}")
    loader = MetaLoader(load, model) if load is not None else None
    gate = gate or Gate.from_env("RVV_INDUCTOR_REGIONAL_GATE", Gate.regional())
    enable()  # installs the linear_packed lowering the compiled regions use
    info = cpu.effective()
    report = LinearReport(activations=spec.activations)
    _swap_linears(model, info, gate, report, spec, loader)
    if loader is not None:
        loader.materialize_rest(model, report, skip=(RVVTiedEmbedding,))
    if info.has_v:
        _route_functional(model, info, gate, report)
    if not isinstance(compile_layers, bool):
        raise ValueError(f"compile_linears: compile_layers must be True or False, got {compile_layers!r}")
    if compile_layers:
        report.compiled_layers, report.rvv_attention = layer_regions.compile_layers(model, (RVVLinear,))
    log.info("%s", report)
    return report
