"""The regional runtime: ``y = x @ W^T + bias`` for a weight packed once, through compiled
artifacts shared by every layer of the same shape.

``run_packed`` pads the rows of a call to an M bucket (``policy.M_BUCKETS``), splits more
rows than the largest bucket into chunks, and runs the artifact compiled for
(N, K, bucket, bias); a call with one row runs the operator's C++ kernel directly. An artifact is ``torch.compile`` of one ``rvv_inductor::linear_packed``
call: the packed weight is a graph *input*, so one artifact serves every layer of its
shape and weight updates never recompile. Compiling it lowers the op to the RVV GEMM
template when ``rvv_inductor.enable()`` is active (``inductor/packed_lowering.py``);
this module needs none of Inductor's code generation itself.

Used by ``RVVLinear`` (``regional.py``) and by the F.linear router
(``functional_linear.py``).
"""
from __future__ import annotations

import threading

import torch
import torch.nn.functional as F

from . import integration, ops
from .policy import M_BUCKETS, m_bucket


class _ArtifactCache:
    """One torch.compile'd callable per (N, K, bucket, has_bias), each with its own code
    object, so Dynamo's per-code recompile limit never merges shapes and a compiled graph
    is shared by every layer of that shape."""

    def __init__(self) -> None:
        self._fns: dict[tuple, object] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple):
        with self._lock:
            fn = self._fns.get(key)
            if fn is None:
                n, k, b, has_bias = key
                src = ("def region(x, wp, bias):\n"
                       f"    return linear_packed(x, wp, bias, {n})\n")
                scope = {"linear_packed": ops.linear_packed}
                exec(compile(src, f"<rvv_linear N={n} K={k} M={b} bias={has_bias}>", "exec"), scope)
                fn = torch.compile(scope["region"], dynamic=False, fullgraph=True)
                self._fns[key] = fn
            return fn

    def keys(self) -> list[tuple]:
        with self._lock:
            return sorted(self._fns)

    def clear(self) -> None:
        with self._lock:
            self._fns.clear()


ARTIFACTS = _ArtifactCache()
# Regions compiled while rvv_inductor was enabled were lowered with the RVV template: after
# disable() they are forgotten, so regions compiled from then on follow the current
# configuration (a layer keeps working: its op then runs its eager C++ kernel).
integration.on_disable(ARTIFACTS.clear)


def artifact_keys() -> list[tuple]:
    """(N, K, M-bucket, has_bias) of every compiled region so far."""
    return ARTIFACTS.keys()


# (N, K, 1, has_bias) of the one-row calls that ran the operator directly: with
# artifact_keys(), every shape and bucket that ran (a set add per call: cheap).
_DIRECT: set[tuple] = set()


def direct_keys() -> list[tuple]:
    """(N, K, 1, has_bias) of every one-row call so far, run by the operator's kernel
    without a compiled artifact."""
    return sorted(_DIRECT)


def run_packed(x: torch.Tensor, wp: torch.Tensor, n: int, k: int, bias: torch.Tensor | None) -> torch.Tensor:
    """y = x @ W^T + bias for a BF16 CPU x[..., k] and W packed in wp, through the shared
    compiled artifacts: M rows padded to a bucket, more than the largest bucket split.

    One row (a decode step) calls the operator's eager kernel instead: the same csrc GEMV
    the template would include, without the compiled graph's wrappers around it (their
    per-call cost exceeds the work at decode; bench/call_overhead.sh counts both)."""
    if x.numel() == k:
        _DIRECT.add((n, k, 1, bias is not None))
        return ops.linear_packed(x, wp, bias, n)
    if torch.compiler.is_compiling():
        # Traced into the caller's graph (a compiled layer or model): the op is one node of
        # it, lowered to the RVV template there (which takes a 2-D x); no artifact of our own.
        return ops.linear_packed(x.reshape(-1, k), wp, bias, n).reshape(*x.shape[:-1], n)
    lead = x.shape[:-1]
    x2 = x.reshape(-1, k)
    # Row-strided activations (e.g. the last position of a prefill, sliced for lm_head)
    # are copied: the compiled graphs are specialised to dense rows, and a second
    # stride pattern would cost a Dynamo recompile per shape.
    if not x2.is_contiguous():
        x2 = x2.contiguous()
    m = x2.shape[0]
    step = M_BUCKETS[-1]
    outs = [_run_bucket(x2[i:i + step], wp, n, k, bias) for i in range(0, max(m, 1), step)]
    y = outs[0] if len(outs) == 1 else torch.cat(outs)
    return y.reshape(*lead, n)


def _run_bucket(x2: torch.Tensor, wp: torch.Tensor, n: int, k: int, bias: torch.Tensor | None) -> torch.Tensor:
    m = x2.shape[0]
    b = m_bucket(m)
    if m != b:
        x2 = F.pad(x2, (0, 0, 0, b - m))
    y = ARTIFACTS.get((n, k, b, bias is not None))(x2, wp, bias)
    return y[:m] if m != b else y
