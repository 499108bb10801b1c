"""P3: send profitable static BF16 mm/addmm to the C++ GEMM template, without max-autotune.

Upstream routes a GEMM to ``CppGemmTemplate`` only under max-autotune, and then benchmarks
it against ATen (minutes per shape on the board). We register ``user_lowerings`` for
``aten.mm`` and ``aten.addmm`` (``F.linear`` lowers to these) that:

1. apply the shape gate (BF16 x BF16, static M/N/K, M <= 128, N >= 1024, K >= 1024,
   M*N*K >= 1e6 by default; configurable);
2. keep upstream's own eligibility test, ``use_cpp_gemm_template``, evaluated under a
   local ``config.patch`` that turns on only what it asks for (CPP GEMM backend,
   ``weight_prepack``). Its remaining conditions stay in force: static N and K, a
   unit-stride activation, and a weight that is a frozen constant (``freezing=True``);
3. require that the micro-GEMM Inductor would use is one of ours (never the naive
   ``CppMicroGemmRef``);
4. add the template as the *only* choice, so ``autotune_select_algorithm`` returns it
   without benchmarking.

Anything else returns None, and Inductor's normal lowering (ATen ``extern_kernels.mm`` /
``addmm``) runs: no graph break, no change in behaviour. Every decision is logged
(``TORCH_LOGS=rvv_inductor``) and appended to ``<inductor cache>/rvv_inductor/routing.jsonl``
for ``python3 -m rvv_inductor verify``.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import time

import torch
import torch._inductor.lowering  # noqa: F401  (must precede codegen.cpp_*: circular-import trap)
from torch._inductor import config as inductor_config
from torch._inductor import ir
from torch._inductor.codegen.cpp_gemm_template import CppGemmTemplate
from torch._inductor.codegen.cpp_micro_gemm import create_micro_gemm
from torch._inductor.kernel.mm_common import mm_args
from torch._inductor.select_algorithm import autotune_select_algorithm
from torch._inductor.utils import has_free_symbols, parallel_num_threads, use_cpp_gemm_template

from .. import cpu
from . import paths
from .micro_gemm import RVV_MICRO_GEMM_CLASSES

log = logging.getLogger("rvv_inductor")
aten = torch.ops.aten


@dataclasses.dataclass(frozen=True)
class Gate:
    """Which GEMMs are worth the RVV template. Override with ``enable(gate=Gate(...))`` or
    ``RVV_INDUCTOR_GATE="min_mnk=1e6,max_m=128,min_n=1024,min_k=1024"``."""

    min_mnk: float = 1e6
    max_m: int = 128
    min_n: int = 1024
    min_k: int = 1024

    @classmethod
    def regional(cls) -> Gate:
        """The default for ``compile_linears``. The seed's N, K >= 1024 gate is about a
        whole-graph compile, where every admitted shape costs a template compile and
        autotuning in the seed; in the regional runtime one artifact per shape serves
        every layer, so the only question is whether a call beats ATen. ATen's BF16
        linear executes ~20 instructions per multiply-add here (bench/results: 60.4M for
        1536x2048), the packed kernel ~0.11, and a compiled region adds a fixed Python /
        guard / wrapper cost of the order of 1e5 instructions per call (estimated, not
        measured per shape). That breaks even near N*K = 64*64 and wins clearly from
        128*128, which admits every projection of Qwen2.5-0.5B/1.5B, GQA k/v included.
        M is not limited: regional calls split M > 128 into chunks."""
        return cls(min_mnk=0, max_m=1 << 62, min_n=128, min_k=128)

    @classmethod
    def from_env(cls, var: str = "RVV_INDUCTOR_GATE", default: Gate | None = None) -> Gate:
        """``default`` (the seed's gate when None) with the keys set in ``$var``."""
        base = default or cls()
        raw = os.environ.get(var, "").strip()
        if not raw:
            return base
        kwargs = {}
        for item in raw.split(","):
            key, _, value = item.partition("=")
            key = key.strip()
            if key not in {f.name for f in dataclasses.fields(cls)}:
                raise ValueError(f"{var}: unknown key {key!r} (min_mnk, max_m, min_n, min_k)")
            try:
                num = float(value)
            except ValueError:
                raise ValueError(f"{var}: {key}={value!r} is not a number") from None
            if num < 0:
                raise ValueError(f"{var}: {key} must be >= 0")
            kwargs[key] = num if key == "min_mnk" else int(num)
        return dataclasses.replace(base, **kwargs)

    def check(self, m: int, n: int, k: int) -> str | None:
        """None when the shape passes, else the reason it does not."""
        if m > self.max_m:
            return f"M={m} > {self.max_m}"
        if n < self.min_n:
            return f"N={n} < {self.min_n}"
        if k < self.min_k:
            return f"K={k} < {self.min_k}"
        if m * n * k < self.min_mnk:
            return f"M*N*K={m * n * k} < {self.min_mnk:g}"
        return None


_gate = Gate()


def set_gate(gate: Gate) -> None:
    global _gate
    _gate = gate


def get_gate() -> Gate:
    return _gate


def _record(op: str, m, n, k, dtype, route: str, reason: str) -> None:
    entry = {"op": op, "M": _as_int(m), "N": _as_int(n), "K": _as_int(k), "dtype": str(dtype),
             "route": route, "reason": reason, "time": time.time(), "pid": os.getpid()}
    log.info("rvv_inductor: %s M=%s N=%s K=%s %s -> %s (%s)", op, entry["M"], entry["N"],
             entry["K"], dtype, route, reason)
    try:
        with open(paths.state_dir() / "routing.jsonl", "a") as f:
            f.write(json.dumps(entry) + "\n")
    except OSError:  # a read-only cache must not break compilation
        pass


def _as_int(x):
    try:
        return int(x)
    except (TypeError, ValueError):  # symbolic sizes are reported as their expression
        return str(x)


def _template_conditions():
    # Exactly what use_cpp_gemm_template() asks for, and nothing global.
    return inductor_config.patch(
        {"max_autotune_gemm": True, "max_autotune_gemm_backends": "CPP", "cpp.weight_prepack": True}
    )


def _try_template(op: str, mat1, mat2, bias=None, layout=None, alpha=1, beta=1):
    """Returns the lowered template node, or None to fall back to Inductor's lowering."""
    if mat1.get_device() is None or mat1.get_device().type != "cpu":
        return None
    dtype = (mat1.get_dtype(), mat2.get_dtype())
    # Sizes as Inductor knows them before realizing anything, for the log.
    m0, k0 = mat1.get_size()[-2:]
    n0 = mat2.get_size()[-1]
    if not cpu.effective().has_v:
        _record(op, m0, n0, k0, dtype[0], "aten", "cpu: no V extension, ATen is the right kernel")
        return None
    if dtype != (torch.bfloat16, torch.bfloat16):
        _record(op, m0, n0, k0, "x".join(str(d).removeprefix("torch.") for d in dtype), "aten",
                "not BF16 x BF16")
        return None
    if bias is not None and bias.get_dtype() != torch.bfloat16:
        _record(op, m0, n0, k0, torch.bfloat16, "aten", f"bias dtype {bias.get_dtype()}")
        return None
    if alpha != 1 or beta != 1:
        _record(op, m0, n0, k0, torch.bfloat16, "aten", f"alpha={alpha}, beta={beta}")
        return None
    others = (bias,) if bias is not None else ()
    m, n, k, layout, mat1, mat2, *rest = mm_args(mat1, mat2, *others, layout=layout)
    if has_free_symbols((m, n, k)):
        _record(op, m, n, k, torch.bfloat16, "aten", "dynamic shape")
        return None
    m, n, k = int(m), int(n), int(k)
    reason = _gate.check(m, n, k)
    if reason:
        _record(op, m, n, k, torch.bfloat16, "aten", f"gate: {reason}")
        return None
    if not _unit_stride_k(mat1):
        # Upstream's template needs X[m, k] contiguous along K; a transposed activation
        # would need a copy, which ATen's mm does as well as we could.
        _record(op, m, n, k, torch.bfloat16, "aten", "layout: activation not unit-stride along K")
        return None
    with _template_conditions():
        if not use_cpp_gemm_template(layout, mat1, mat2):
            w = mat2.unwrap_view() if isinstance(mat2, ir.BaseView) else mat2
            why = ("weight is not a frozen constant (use torch._inductor.config.freezing=True "
                   "under torch.no_grad())" if isinstance(w, ir.StorageBox) and not w.is_module_buffer()
                   else "the GEMM template declined it")
            _record(op, m, n, k, torch.bfloat16, "aten", why)
            return None
        micro = create_micro_gemm("micro_gemm", m, n, k, input_dtype=torch.bfloat16,
                                  input2_dtype=torch.bfloat16, output_dtype=torch.float,
                                  num_threads=parallel_num_threads(), use_ref=True)
        if not isinstance(micro, RVV_MICRO_GEMM_CLASSES):
            _record(op, m, n, k, torch.bfloat16, "aten",
                    f"no RVV micro-GEMM ({type(micro).__name__}); is the RVV ISA active?")
            return None
        choices: list = []
        if bias is None:
            CppGemmTemplate.add_choices(choices, layout, [mat1, mat2])
        else:
            CppGemmTemplate.add_choices(choices, layout, [rest[0], mat1, mat2], alpha=alpha,
                                        beta=beta, has_bias=True)
        if len(choices) != 1:
            _record(op, m, n, k, torch.bfloat16, "aten", f"template offered {len(choices)} choices")
            return None
        inputs = [mat1, mat2] if bias is None else [rest[0], mat1, mat2]
        node, _ = autotune_select_algorithm(f"rvv_{op}", choices, inputs, layout)
    _record(op, m, n, k, torch.bfloat16, "rvv", type(micro).__name__)
    return node


def _unit_stride_k(x) -> bool:
    try:
        x.freeze_layout()
        return x.get_stride()[-1] == 1
    except Exception:  # views without a fixed layout: let the template decide
        return True


def mm_lowering(mat1, mat2, *, layout=None, **kwargs):
    if kwargs.get("out_dtype") is not None:
        return None
    try:
        return _try_template("mm", mat1, mat2, layout=layout)
    except Exception as e:  # never let routing break a compile: ATen is always correct
        log.warning("rvv_inductor: mm routing failed (%s: %s); using ATen", type(e).__name__, e)
        return None


def addmm_lowering(inp, mat1, mat2, *, beta=1, alpha=1, layout=None, **kwargs):
    try:
        return _try_template("addmm", mat1, mat2, bias=inp, layout=layout, alpha=alpha, beta=beta)
    except Exception as e:
        log.warning("rvv_inductor: addmm routing failed (%s: %s); using ATen", type(e).__name__, e)
        return None


LOWERINGS = {aten.mm.default: mm_lowering, aten.addmm.default: addmm_lowering}
