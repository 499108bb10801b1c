"""Layers that end in ``F.linear`` without being ``nn.Linear`` (fused projections, custom
attention modules, quantisation wrappers that dequantise to BF16, ...).

``compile_linears`` cannot swap such a module for an RVVLinear: its forward is the user's
code. Instead it wraps the module's forward in a TorchFunctionMode that sees every
``F.linear`` call the forward makes; a call whose weight *is* one of the module's own 2-D
BF16 parameters, with a BF16 CPU activation and a shape the gate admits, runs through the
same compiled artifacts as RVVLinear (one per (N, K, M-bucket, bias), shared). Every
other call goes to ATen unchanged.

Weight ownership differs from RVVLinear: the forward reads ``self.weight`` itself, so the
original parameter stays and the packed copy is extra memory (reported). The packed copy
is rebuilt when the parameter object, its storage or its version counter changes, which
covers ``load_state_dict``, ``weight.copy_()`` / ``mul_()`` under no_grad, and assigning a
new Parameter. Writes through ``weight.data`` bypass the version counter and are not seen
(the same rule as for any cached derivative of a tensor in PyTorch).
"""
from __future__ import annotations

import threading
import weakref

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from . import packed
from .policy import Gate
from .runtime import run_packed

# Module types whose 2-D weight is never an F.linear weight.
_NOT_LINEAR = (torch.nn.Embedding, torch.nn.EmbeddingBag, torch.nn.modules.conv._ConvNd)


def candidate_weights(module: torch.nn.Module) -> list[str]:
    """Names of the module's own (not its children's) 2-D BF16 CPU parameters."""
    if isinstance(module, (torch.nn.Linear,) + _NOT_LINEAR):
        return []
    return [name for name, p in module.named_parameters(recurse=False)
            if p.dim() == 2 and p.dtype == torch.bfloat16 and p.device.type == "cpu"]


class _Router(TorchFunctionMode):
    def __init__(self, state: FunctionalLinearState) -> None:
        super().__init__()
        self.state = state

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            y = self.state.try_linear(*args, **kwargs)
            if y is not None:
                return y
        return func(*args, **kwargs)


class FunctionalLinearState:
    """Per-module packed copies and routing counters; installed by ``install``."""

    def __init__(self, module: torch.nn.Module, names: list[str], nb: int, gate: Gate) -> None:
        self._module = weakref.ref(module)
        self.names, self.nb, self.gate = names, nb, gate
        self._packed: dict[str, tuple] = {}  # name -> (param id, data_ptr, version, shape, packed)
        self._lock = threading.Lock()
        self.calls_rvv = 0
        self.calls_aten = 0

    def packed_bytes(self) -> int:
        return sum(e[4].numel() * 2 for e in self._packed.values())

    def _weight_name(self, w) -> str | None:
        m = self._module()
        if m is None:
            return None
        for name in self.names:
            if getattr(m, name, None) is w:
                return name
        return None

    def _packed_for(self, name: str, w: torch.Tensor) -> torch.Tensor:
        key = (id(w), w.data_ptr(), w._version, tuple(w.shape))
        with self._lock:
            e = self._packed.get(name)
            if e is None or e[:4] != key:
                e = key + (packed.pack(w.detach(), self.nb),)
                self._packed[name] = e
            return e[4]

    def try_linear(self, x, weight, bias=None):
        """The RVV result, or None to let ATen run the call."""
        name = self._weight_name(weight)
        if name is None:
            return None
        ok = (isinstance(x, torch.Tensor) and x.dtype == torch.bfloat16 and x.device.type == "cpu"
              and weight.dim() == 2 and x.dim() >= 1 and x.shape[-1] == weight.shape[1]
              and (bias is None or (bias.dtype == torch.bfloat16 and bias.shape == (weight.shape[0],)))
              and not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad
                                                    or (bias is not None and bias.requires_grad))))
        n, k = weight.shape
        if not ok or self.gate.check(1, n, k):
            self.calls_aten += 1
            return None
        self.calls_rvv += 1
        return run_packed(x, self._packed_for(name, weight), n, k, bias)


def install(module: torch.nn.Module, names: list[str], nb: int, gate: Gate) -> FunctionalLinearState:
    """Wrap module.forward so its F.linear calls on `names` are routed; idempotent."""
    state = getattr(module, "_rvv_functional_linear", None)
    if state is not None:
        return state
    state = FunctionalLinearState(module, names, nb, gate)
    inner = module.forward

    def forward(*args, **kwargs):
        with _Router(state):
            return inner(*args, **kwargs)

    module.forward = forward
    object.__setattr__(module, "_rvv_functional_linear", state)
    return state
