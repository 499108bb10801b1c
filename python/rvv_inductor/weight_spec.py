"""``WeightSpec``: what the user asked the Linear layers to become, the one spec both entry
points parse: ``compile_linears(weights=..., group_size=..., keep_bf16=..., activations=...)``
(regional) and ``enable(...)`` (whole-model freezing, ``inductor/quant_lowering.py``).

The formats a BF16 weight can be quantized to are ``policy.WEIGHT_FORMATS`` (bf16, int8,
int4: the reference quantizer's). The GGUF block formats (q4_1, q5_0, q5_1, iq4_nl, iq4_xs, q2_k, q3_k, q4_k,
q5_k, q6_k, the
library's ``weight_formats.inl``) are not targets: they come only from files, packed from
their blocks (``load_gguf``), and ``WeightSpec`` says so when asked for one.

``keep_bf16`` is the one thing the two callers identify differently: compile_linears by
module name (fnmatch patterns), a whole-model compile by weight storage (it does not see
module names), so the caller passes the modules or tensors (``keep_bf16=[model.lm_head]``).
"""
from __future__ import annotations

import dataclasses
import fnmatch
from typing import Any

from .policy import (DEFAULT_ACTIVATIONS, DEFAULT_GROUP_SIZE, GROUP_SIZES, WEIGHT_FORMATS, check_activations,
                     resolve_activations, x8_applies)

# The GGUF block formats' names (weight_formats.inl), for the hint that they come from files.
BLOCK_FORMAT_NAMES = ("q4_1", "q5_0", "q5_1", "iq4_nl", "iq4_xs", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k")
# How keep_bf16 names weights: module-name patterns, or the weights' storage.
KEEP_BY_NAME, KEEP_BY_TENSOR = "name", "tensor"


@dataclasses.dataclass(frozen=True)
class WeightSpec:
    format: str = "bf16"
    group_size: int = 0
    keep_bf16: tuple = ()  # patterns (str) or weight data_ptrs (int), by the caller's kind
    activations: str = DEFAULT_ACTIVATIONS  # INT8/INT4 GEMMs with M >= 2: "auto", "int8" or "bf16"

    @classmethod
    def parse(cls, weights: Any, group_size: Any = None, keep_bf16: Any = (), activations: Any = DEFAULT_ACTIVATIONS,
              *, caller: str = "compile_linears", keep_by: str = KEEP_BY_NAME) -> WeightSpec:
        """ValueError naming ``caller`` and the bad argument (None included: a caller whose
        argument may be unset passes the default); else the spec."""
        activations = check_activations(activations, caller)
        if not isinstance(weights, str) or weights not in WEIGHT_FORMATS:
            hint = ""
            if isinstance(weights, str) and weights.lower() in BLOCK_FORMAT_NAMES:
                hint = (f" ({weights} is a GGUF block format: it comes from a file's blocks, load_gguf(path), "
                        "there is no quantizer to it)")
            raise ValueError(f"{caller}: weights={weights!r} is not one of {', '.join(map(repr, WEIGHT_FORMATS))}"
                             + hint)
        keep = _keep(keep_bf16, caller, keep_by)
        if weights == "bf16":
            if group_size not in (None, 0):
                raise ValueError(f"{caller}: group_size applies to weights='int8' or 'int4', not 'bf16'")
            if keep and keep_by == KEEP_BY_TENSOR:
                raise ValueError(f"{caller}: keep_bf16 applies to weights='int8' or 'int4'")
            return cls("bf16", 0, keep if keep_by == KEEP_BY_NAME else (), activations)
        g = DEFAULT_GROUP_SIZE[weights] if group_size is None else group_size
        if isinstance(g, bool) or not isinstance(g, int) or g not in GROUP_SIZES[weights]:
            extra = " (0, one scale per output channel, is INT8 only)" if weights == "int4" and g == 0 else ""
            raise ValueError(f"{caller}: group_size={g!r} is not supported for {weights}{extra}; "
                             f"use one of {', '.join(str(x) for x in GROUP_SIZES[weights])}")
        return cls(weights, g, keep, activations)

    @property
    def quantized(self) -> bool:
        return self.format != "bf16"

    def key(self) -> str:
        """A string that changes with every setting (part of Inductor's FX cache key)."""
        return f"{self.format}:g{self.group_size}:keep{sorted(self.keep_bf16)}:act-{self.activations}"

    def x8(self, m: int) -> bool:
        """A GEMM of m rows runs the INT8-activation kernel."""
        return (self.quantized and m > 1 and resolve_activations(self.format, self.activations) == "int8"
                and x8_applies(self.format, self.group_size))

    def keeps_bf16(self, name: str) -> bool:
        """``name`` matches a keep_bf16 pattern (fnmatch, against the full name or its last part)."""
        last = name.rsplit(".", 1)[-1]
        return any(isinstance(p, str) and (fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(last, p))
                   for p in self.keep_bf16)

    def keeps_tensor(self, *ptrs: int) -> bool:
        """One of these weight storages was passed in keep_bf16 (a whole-model compile)."""
        return any(p in self.keep_bf16 for p in ptrs)

    def format_for(self, name: str) -> str:
        return "bf16" if self.format == "bf16" or self.keeps_bf16(name) else self.format


def _keep(keep: Any, caller: str, keep_by: str) -> tuple:
    if keep_by == KEEP_BY_NAME:
        if isinstance(keep, str):
            keep = (keep,)
        keep = tuple(keep or ())
        if not all(isinstance(p, str) for p in keep):
            raise ValueError(f"{caller}: keep_bf16 must be a pattern or a list of patterns, got {keep!r}")
        return keep
    return _weight_ptrs(keep, caller)


def _weight_ptrs(keep: Any, caller: str) -> tuple[int, ...]:
    import torch  # lazy: torch; this module must import without it (integration: `import rvv_inductor`)

    if keep is None:
        return ()
    if isinstance(keep, (torch.nn.Module, torch.Tensor)):
        keep = (keep,)
    if isinstance(keep, str) or not hasattr(keep, "__iter__"):
        raise ValueError(f"{caller}: keep_bf16 takes modules or weight tensors (e.g. keep_bf16=[model.lm_head]): a "
                         f"whole-model compile does not see module names; got {keep!r}")
    ptrs = []
    for item in keep:
        if isinstance(item, torch.nn.Module):
            w = getattr(item, "weight", None)
            if not isinstance(w, torch.Tensor):
                raise ValueError(f"{caller}: keep_bf16 module {type(item).__name__} has no weight tensor")
            ptrs.append(w.data_ptr())
        elif isinstance(item, torch.Tensor):
            ptrs.append(item.data_ptr())
        else:
            raise ValueError(f"{caller}: keep_bf16 takes modules or weight tensors (e.g. keep_bf16=[model.lm_head]); "
                             f"got {item!r}")
    return tuple(ptrs)
