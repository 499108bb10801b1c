"""ESTIMATED SpacemiT K1 (BPI-F3) throughput from counted work. Not a measurement.

Inputs are the rvvcount plugin's per-region counters for one decode step or one
prefill (executed riscv64 instructions, vector datapath beats at the K1's DLEN, bytes, and
DRAM traffic from its two-level cache model), divided per token. The model, with the
K1's numbers from ``rvv_inductor.policy``:

* compute: every instruction that is not a vector datapath operation takes CPI_SCALAR
  cycles, every vector instruction its beats, max(1, EMUL x VLEN / DLEN), no overlap
  (the X60 is in-order) -- the same model as bench/report.py;
* Linear layers run on K1_CORES cores (the kernels split N across threads); everything
  else (Python, the dispatcher, attention, norms) on one core;
* DRAM traffic streams at K1_DRAM_BYTES_PER_S and overlaps compute: a region takes
  max(compute time, memory time).

What it ignores: dual issue, cache effects beyond the modelled L1/L2, DRAM latency,
thread start/stop, and that the "rest" region's Python overhead on the board may differ
from the count under QEMU (same instructions, different CPI). Board numbers to compare
with are in BOARD_NUMBERS.
"""
from __future__ import annotations

from ..policy import CPI_SCALAR, K1_CLOCK_HZ, K1_CORES, K1_DRAM_BYTES_PER_S

# Qwen2.5-1.5B decode throughput measured on a BPI-F3 board and published by the authors
# of each program: the seed prototype this project started from (its regional and its
# whole-graph compile), sgl-kernel's hand-written RVV kernels (SGLang PR #22193) and
# llama.cpp with SpacemiT's IME matrix extension (4-bit weights).
BOARD_NUMBERS = [
    ("seed, regional Linear compile (BF16)", 1.320),
    ("seed, whole-model CPU graph (BF16)", 1.405),
    ("sgl-kernel hand-written RVV, BF16 (711.34 ms/token)", 1000 / 711.34),
    ("llama.cpp + SpacemiT IME, Q4_0, 4 threads", 3.83),
]


def region_seconds(c: dict, cores: int) -> dict:
    """Estimated K1 seconds for one region's counters."""
    scalar_like = c["insns"] - c["vector_insns"] + c["vsetvl"]
    compute_cycles = scalar_like * CPI_SCALAR + c["vbeats"]
    dram = c.get("dram_read_bytes", 0) + c.get("dram_write_bytes", 0)
    compute_s = compute_cycles / (K1_CLOCK_HZ * cores)
    memory_s = dram / K1_DRAM_BYTES_PER_S
    return {"compute_s": compute_s, "memory_s": memory_s, "s": max(compute_s, memory_s),
            "bound": "memory" if memory_s >= compute_s else "compute"}


def step_estimate(linear: dict | None, rest: dict, tokens: int) -> dict:
    """K1 estimate for one step (a decode step of `tokens` sequences, or a prefill of
    `tokens` tokens). `linear` is None when Linear is not separable (whole-model graph):
    then the whole step is modelled on one core -- a lower bound on its speed."""
    r = region_seconds(rest, 1)
    l = region_seconds(linear, K1_CORES) if linear else {"s": 0.0, "bound": "-"}
    s = r["s"] + l["s"]
    return {"step_s": s, "linear_s": l["s"], "rest_s": r["s"], "linear_bound": l["bound"],
            "tok_s": tokens / s if s > 0 else 0.0}


def bandwidth_bound_tok_s(weight_bytes_per_step: float, batch: int) -> float:
    """Decode ceiling if every weight byte streams from DRAM once per step."""
    return batch * K1_DRAM_BYTES_PER_S / weight_bytes_per_step
