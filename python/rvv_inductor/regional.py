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
import fnmatch
import logging
import threading

import torch
import torch.nn.functional as F

from . import _native, cpu, functional_linear, ops, packed, quantized
from .integration import enable
from .policy import DEFAULT_GROUP_SIZE, GROUP_SIZES, WEIGHT_FORMATS, Gate
from .reasons import Fallback, Policy
from .runtime import run_packed

log = logging.getLogger("rvv_inductor")


class RVVLinear(torch.nn.Module):
    """A BF16 Linear whose weight lives packed; see the module docstring."""

    format = "bf16"
    _packed_dtype = torch.bfloat16

    def __init__(self, in_features: int, out_features: int, bias: torch.Tensor | None, nb: int) -> None:
        super().__init__()
        self.in_features, self.out_features, self.nb = in_features, out_features, nb
        self.register_buffer("packed_weight", torch.empty(0, dtype=torch.bfloat16), persistent=False)
        self.bias = torch.nn.Parameter(bias.detach().clone(), requires_grad=False) if bias is not None else None
        self._materialized: torch.Tensor | None = None
        self._materialized_version = 0
        self._lock = threading.Lock()

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
                self._materialized = self._unpacked()
                self._materialized_version = self._materialized._version
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
                self._materialized = None

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
                self._materialized = None
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
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._sync_weight()
        bias_ok = self.bias is None or self.bias.dtype == torch.bfloat16
        if (x.dtype != torch.bfloat16 or not bias_ok or x.device.type != "cpu"
                or x.shape[-1] != self.in_features):
            w = self._unpacked().to(x.dtype)
            return F.linear(x, w, self.bias.to(x.dtype) if self.bias is not None else None)
        return self._run(x)

    def _run(self, x: torch.Tensor) -> torch.Tensor:
        return run_packed(x, self.packed_weight, self.out_features, self.in_features, self.bias)

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
    eager it is the C++ kernel, inside a torch.compile graph one extern call)."""

    _packed_dtype = torch.uint8

    def __init__(self, in_features: int, out_features: int, bias: torch.Tensor | None, nb: int, fmt: str,
                 group_size: int, scale_dtype: str = "f16") -> None:
        super().__init__(in_features, out_features, bias, nb)
        self.format, self.group_size, self.scale_dtype = fmt, group_size, scale_dtype
        self._layout = quantized.layout(quantized.FORMAT_CODES[fmt], group_size, quantized.SCALE_DTYPES[scale_dtype],
                                        False, out_features, in_features, nb)
        self.register_buffer("packed_weight", torch.empty(0, dtype=torch.uint8), persistent=False)

    @classmethod
    def from_linear(cls, lin: torch.nn.Linear, nb: int, fmt: str = "int8", group_size: int = 0,  # type: ignore[override]
                    scale_dtype: str = "f16") -> RVVQuantLinear:
        m = cls(lin.in_features, lin.out_features, lin.bias, nb, fmt, group_size, scale_dtype)
        m._repack(lin.weight.detach())
        return m

    def _pack(self, w: torch.Tensor) -> torch.Tensor:
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
        out = quantized.unpack_quantized(self.packed_weight, self._layout)
        out.update(format=self.format, group_size=self.group_size)
        return out

    def _run(self, x: torch.Tensor) -> torch.Tensor:
        lay = self._layout
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        y = ops.linear_packed_q(x2, self.packed_weight, self.bias, self.out_features, lay.dtype, lay.group_size,
                                lay.scale_dtype, lay.zero_points, lay.nb)
        return y.reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", group_size={self.group_size}, scales={self.scale_dtype}"


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

    @property
    def packed_overhead(self) -> float:
        return self.packed_bytes / self.param_bytes - 1 if self.param_bytes else 0.0

    def __str__(self) -> str:
        lines = [f"rvv_inductor.compile_linears: {len(self.taken)} Linear layers on RVV, "
                 f"{len(self.fell_back)} kept as they were; packed {self.packed_bytes / 2**20:.1f} MiB for "
                 f"{self.param_bytes / 2**20:.1f} MiB of BF16 weights "
                 + (f"({100 * self.packed_bytes / self.param_bytes:.1f}% of BF16: quantized)"
                    if any(f != "bf16" for _, f, _, _ in self.formats) else f"(+{100 * self.packed_overhead:.2f}%)")]
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
        return "\n".join(lines)


def _refusal(lin: torch.nn.Linear, info: cpu.CpuInfo, gate: Gate) -> Fallback | None:
    """Why ``lin`` stays an nn.Linear, or None when it becomes an RVVLinear."""
    w = lin.weight
    if not info.has_v:
        return Fallback(Policy.NO_V)
    if w.dtype != torch.bfloat16:
        return Fallback(Policy.NOT_BF16, f"weight dtype {w.dtype}")
    if w.device.type != "cpu":
        return Fallback(Policy.NOT_CPU, f"device {w.device}")
    if lin.bias is not None and lin.bias.dtype != torch.bfloat16:
        return Fallback(Policy.BIAS_DTYPE, str(lin.bias.dtype))
    refused = gate.check(1, *w.shape)
    return Fallback(Policy.GATE, refused) if refused else None


@dataclasses.dataclass(frozen=True)
class WeightSpec:
    """What ``compile_linears(weights=..., group_size=..., keep_bf16=...)`` asked for."""

    format: str = "bf16"
    group_size: int = 0
    keep_bf16: tuple[str, ...] = ()

    @classmethod
    def parse(cls, weights: str, group_size: int | None, keep_bf16) -> WeightSpec:
        if weights not in WEIGHT_FORMATS:
            raise ValueError(f"compile_linears: weights={weights!r} is not one of {', '.join(WEIGHT_FORMATS)}")
        if isinstance(keep_bf16, str):
            keep_bf16 = (keep_bf16,)
        keep = tuple(keep_bf16 or ())
        if not all(isinstance(p, str) for p in keep):
            raise ValueError(f"compile_linears: keep_bf16 must be a pattern or a list of patterns, got {keep_bf16!r}")
        if weights == "bf16":
            if group_size not in (None, 0):
                raise ValueError("compile_linears: group_size applies to weights='int8' or 'int4', not 'bf16'")
            return cls("bf16", 0, keep)
        g = DEFAULT_GROUP_SIZE[weights] if group_size is None else group_size
        if g not in GROUP_SIZES[weights]:
            allowed = ", ".join(str(x) for x in GROUP_SIZES[weights])
            extra = " (0, one scale per output channel, is INT8 only)" if weights == "int4" and g == 0 else ""
            raise ValueError(f"compile_linears: group_size={g!r} is not supported for {weights}{extra}; "
                             f"use one of {allowed}")
        return cls(weights, g, keep)

    def keeps_bf16(self, name: str) -> bool:
        """``name`` matches a keep_bf16 pattern (fnmatch, against the full name or its last part)."""
        last = name.rsplit(".", 1)[-1]
        return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(last, p) for p in self.keep_bf16)

    def format_for(self, name: str) -> str:
        return "bf16" if self.format == "bf16" or self.keeps_bf16(name) else self.format


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
                  spec: WeightSpec = WeightSpec()) -> None:
    """Replace each admitted nn.Linear by an RVVLinear (or RVVQuantLinear), in place."""
    layers = _admitted(model, info, gate, report)
    _check_quantizable(layers, spec, info.block_n)
    for parent, child_name, name, child in layers:
        fmt = spec.format_for(name)
        if fmt == "bf16":
            new = RVVLinear.from_linear(child, info.block_n)
        else:
            new = RVVQuantLinear.from_linear(child, info.block_n, fmt, spec.group_size)
        setattr(parent, child_name, new)
        n, k = child.weight.shape
        report.taken.append((name, n, k))
        report.formats.append((name, fmt, new.packed_bytes, n * k * 2))
        report.param_bytes += child.weight.numel() * 2
        report.packed_bytes += new.packed_bytes


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
                    group_size: int | None = None, keep_bf16: str | list[str] | tuple[str, ...] = ()) -> LinearReport:
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

    ``gate`` decides which weight shapes are worth a compiled region: by default
    ``Gate.regional()`` (N, K >= 128), with the keys set in ``RVV_INDUCTOR_REGIONAL_GATE``
    ("min_n=256,min_k=256") on top. It is not the whole-graph gate of ``enable()``, which
    stays as it was."""
    spec = WeightSpec.parse(weights, group_size, keep_bf16)
    gate = gate or Gate.from_env("RVV_INDUCTOR_REGIONAL_GATE", Gate.regional())
    enable()  # installs the linear_packed lowering the compiled regions use
    info = cpu.effective()
    report = LinearReport()
    _swap_linears(model, info, gate, report, spec)
    if info.has_v:
        _route_functional(model, info, gate, report)
    log.info("%s", report)
    return report
