"""Why a Linear did not run an RVV kernel, as a type: written where the decision is made
(the Inductor lowerings, ``compile_linears``), read by ``verify`` and the demo.

A ``Reason`` is a member of one of two enums, and its class is its ``Kind``:

* ``Policy``: ATen (or the eager C++ kernel) is the right answer by design: the CPU has
  no V, the dtype is not BF16, the gate refused the shape, ...;
* ``Defect``: the shape should have reached an RVV kernel and did not (the weight is not
  a frozen constant, the template declined, no RVV micro-GEMM was picked, the lowering
  raised). ``python3 -m rvv_inductor verify`` fails on these.

The Inductor lowerings append one JSON line per decision to
``<inductor cache>/rvv_inductor/routing.jsonl`` (``record_rvv``, ``record_fallback``);
``read_log`` reads them back with their ``Reason``.
"""
from __future__ import annotations

import dataclasses
import enum
import json
import logging
import os
import time
from pathlib import Path
from typing import Union

from . import paths

log = logging.getLogger("rvv_inductor")

LOG_NAME = "routing.jsonl"  # in paths.state_dir()


class Kind(enum.Enum):
    POLICY = "policy"
    DEFECT = "defect"


class Policy(enum.Enum):
    """Reasons for which ATen (or the op's eager C++ kernel) is the right kernel, by design."""

    NO_V = "cpu: no V extension"
    NOT_BF16 = "not BF16"
    BIAS_DTYPE = "bias dtype"
    NOT_CPU = "not on the CPU"
    SCALED = "alpha/beta other than 1"
    DYNAMIC = "dynamic shape"
    GATE = "gate"
    LAYOUT = "layout"
    KEPT_BF16 = "kept in BF16 (keep_bf16)"
    NOT_QUANTIZABLE = "cannot be quantized as asked"


class Defect(enum.Enum):
    """Reasons for which a shape that should have reached an RVV kernel did not."""

    NOT_FROZEN = "weight is not a frozen constant"
    TEMPLATE_DECLINED = "the GEMM template declined it"
    NO_RVV_MICRO_GEMM = "no RVV micro-GEMM"
    TEMPLATE_CHOICES = "the GEMM template did not offer exactly one choice"
    LOWERING_FAILED = "the lowering raised"


Reason = Union[Policy, Defect]
_KINDS = {Policy: Kind.POLICY, Defect: Kind.DEFECT}


def kind_of(reason: Reason) -> Kind:
    return _KINDS[type(reason)]


def reason_named(code: str) -> Reason:
    """The Policy or Defect member called ``code`` (KeyError if there is none)."""
    for cls in (Policy, Defect):
        if code in cls.__members__:
            return cls[code]
    raise KeyError(code)


@dataclasses.dataclass(frozen=True)
class Fallback:
    """A decision not to use RVV: the reason and what was found ("N=256 < 1024")."""

    reason: Reason
    detail: str = ""

    @property
    def kind(self) -> Kind:
        return kind_of(self.reason)

    def __str__(self) -> str:
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


def _as_int(x):
    try:
        return int(x)
    except (TypeError, ValueError):  # symbolic sizes are reported as their expression
        return str(x)


def _append(op: str, m, n, k, dtype, route: str, text: str, code: str | None) -> None:
    entry = {"op": op, "M": _as_int(m), "N": _as_int(n), "K": _as_int(k), "dtype": str(dtype),
             "route": route, "reason": text, "code": code, "time": time.time(), "pid": os.getpid()}
    log.info("rvv_inductor: %s M=%s N=%s K=%s %s -> %s (%s)", op, entry["M"], entry["N"], entry["K"],
             entry["dtype"], route, text)
    try:
        with open(_log_path(), "a") as f:
            f.write(json.dumps(entry) + "\n")
    except OSError:  # a read-only cache must not break compilation
        pass


def _log_path() -> Path:
    return paths.state_dir() / LOG_NAME


def record_rvv(op: str, m, n, k, dtype, kernel: str) -> None:
    """The GEMM became an RVV kernel (``kernel``: the micro-GEMM class)."""
    _append(op, m, n, k, dtype, "rvv", kernel, None)


def record_fallback(op: str, m, n, k, dtype, route: str, fallback: Fallback) -> None:
    """The GEMM went to ``route`` ("aten", or "eager" for the op's own C++ kernel)."""
    _append(op, m, n, k, dtype, route, str(fallback), fallback.reason.name)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One routing decision read back from the log."""

    op: str
    M: int | str
    N: int | str
    K: int | str
    dtype: str
    route: str
    reason: str                # the text shown to people
    code: Reason | None        # None for route "rvv"
    pid: int | None = None

    @property
    def is_defect(self) -> bool:
        return isinstance(self.code, Defect)


class UnknownReason(ValueError):
    """A log line whose reason this version does not know (written by another version)."""


def read_log(path: Path, pid: int | None = None) -> list[Entry]:
    """The decisions in ``path`` (optionally only those of process ``pid``), in order.
    Raises UnknownReason for a fallback without a known reason code."""
    out = []
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue
        if pid is not None and e.get("pid") != pid:
            continue
        code = None
        if e["route"] != "rvv":
            try:
                code = reason_named(e.get("code") or "")
            except KeyError:
                raise UnknownReason(f"{path}: routing entry {e.get('op')} M={e.get('M')} N={e.get('N')} "
                                    f"K={e.get('K')} has no known reason code ({e.get('code')!r}): written by "
                                    "another version of rvv_inductor; clear the Inductor cache") from None
        out.append(Entry(e["op"], e["M"], e["N"], e["K"], e["dtype"], e["route"], e["reason"], code, e.get("pid")))
    return out
