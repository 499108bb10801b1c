"""ESTIMATED SpacemiT K1 (BPI-F3) throughput from counted work. Not a measurement.

Inputs are the rvvcount plugin's per-region counters for one decode step or one
prefill (executed riscv64 instructions, vector datapath beats at the K1's DLEN, bytes, and
DRAM traffic from its two-level cache model), divided per token, with every thread of the
process counted (the plugin charges a region with all threads' work and reports each
thread). The model, with the K1's numbers from ``rvv_inductor.policy``:

* compute: every instruction that is not a vector datapath operation takes CPI_SCALAR
  cycles, every vector instruction its beats, max(1, EMUL x VLEN / DLEN), no overlap
  (the X60 is in-order) -- the same model as bench/report.py -- evaluated per thread;
* a region counted on several threads is split into a serial part and a parallel part.
  The serial part is what the opening thread (the one that opened the region: Python, the
  per-call work of each Linear, graph building in llama.cpp) executes beyond the median of
  the other active threads (``serial_cycles``); the parallel part is the busiest other
  thread's cycles (``parallel_cycles``; the counting runs use K1_CORES threads, so this is
  the measured split, not total / 8). A region counted on one thread only (older counts)
  falls back to: Linear split evenly over K1_CORES cores (total / 8, labelled "assumed"),
  everything else on one core, all of it serial;
* DRAM traffic of all threads shares one channel at ``bandwidth`` bytes/s and overlaps the
  parallel part only: while the opening thread runs its serial work between kernel calls,
  no weight streams. A region takes serial time + max(parallel time, memory time).

The bandwidth is a parameter. Two values are reported: the LPDDR4X peak
(``policy.K1_DRAM_BYTES_PER_S``, 10.66 GB/s: a ceiling no board program has been shown to
reach) and the bandwidth fitted to published board numbers
(``policy.K1_DRAM_ACHIEVED_BYTES_PER_S``, 3.33 GB/s, ``calibration.py``, with its error on
the other published numbers): the calibrated one is the headline.

What it ignores: dual issue, cache effects beyond the modelled L1/L2 (private per thread
in the plugin: activations all threads read are charged once per thread; the K1 shares
an L2 per 4-core cluster), DRAM latency, thread start/stop beyond what was counted, and
that the "rest" region's Python overhead on the board may differ from the count under
QEMU (same instructions, different CPI). Board numbers to compare with are in
BOARD_NUMBERS.
"""
from __future__ import annotations

import statistics

from ..policy import (CPI_SCALAR, K1_CLOCK_HZ, K1_CORES, K1_DRAM_ACHIEVED_BYTES_PER_S, K1_DRAM_BYTES_PER_S,
                      K1_DRAM_FIT_BYTES_PER_S)

# The bandwidths every estimate is given at: the peak (a ceiling), the fit to the published
# programs the model shows DRAM-bound (calibration.py), and the fit to llama.cpp + IME's
# decode (the conservative one, which flatters our estimates least: the headline).
# (key, label, bytes/s)
PEAK = ("ceiling", f"K1 ceiling ({K1_DRAM_BYTES_PER_S / 1e9:.2f} GB/s peak)", K1_DRAM_BYTES_PER_S)
DRAM_FIT = ("dram_fit", f"K1, DRAM-bound fit ({K1_DRAM_FIT_BYTES_PER_S / 1e9:.2f} GB/s)", K1_DRAM_FIT_BYTES_PER_S)
ACHIEVED = ("achieved", f"K1 as achieved (calibrated {K1_DRAM_ACHIEVED_BYTES_PER_S / 1e9:.2f} GB/s)",
            K1_DRAM_ACHIEVED_BYTES_PER_S)
BANDWIDTHS = (PEAK, DRAM_FIT, ACHIEVED)
HEADLINE = ACHIEVED[0]

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


def compute_cycles(c: dict) -> float:
    """In-order cycles of one thread's (or a total's) counters."""
    g = lambda k: c.get(k, 0)  # noqa: E731  (a counter the plugin did not report is 0)
    return (g("insns") - g("vector_insns") + g("vsetvl")) * CPI_SCALAR + g("vbeats")


def thread_view(region: dict) -> dict:
    """From one raw plugin region: the busiest thread's cycles, the number of threads that
    executed anything, and the split into serial and parallel cycles (module docstring).
    Per-thread counters (``threads.<vcpu>``, plugin with thread counting) give the cycles
    of each thread exactly; without them (older counts) the region is one thread: its
    totals, all serial."""
    ts = {k: compute_cycles(t) for k, t in (region.get("threads") or {}).items() if t.get("insns", 0) > 0}
    if not ts:
        c = compute_cycles(region) if "insns" in region else 0.0
        return {"max_thread_cycles": c, "threads_active": 1 if region.get("insns") else 0,
                "serial_cycles": 0.0, "parallel_cycles": c}
    owner = str(region.get("owner_vcpu", ""))
    others = [c for k, c in ts.items() if k != owner]
    if owner not in ts or not others:
        # One thread did everything: nothing ran beside it, and its own DRAM traffic overlaps
        # its own work, as a parallel region's does (or the owner is unknown: older counts).
        serial, parallel = 0.0, max(ts.values())
    else:
        serial = max(0.0, ts[owner] - statistics.median(others))
        parallel = max(others)
    return {"max_thread_cycles": max(ts.values()), "threads_active": len(ts), "serial_cycles": serial,
            "parallel_cycles": parallel}


def region_seconds(c: dict, cores: int, bandwidth: float = K1_DRAM_ACHIEVED_BYTES_PER_S) -> dict:
    """Estimated K1 seconds for one region's counters. ``cores``: how many cores a region
    counted on ONE thread is assumed to split over evenly (Linear: K1_CORES; the rest: 1).
    A region counted on several threads takes its busiest thread's cycles instead."""
    dram = c.get("dram_read_bytes", 0) + c.get("dram_write_bytes", 0)
    if c.get("threads_active", 1) > 1 and c.get("max_thread_cycles"):
        # An extrapolated serial part can come out slightly negative (it is a difference of
        # two counts, each a difference of threads): there is no negative time.
        serial = max(0.0, c.get("serial_cycles", 0.0))
        parallel = c.get("parallel_cycles", c["max_thread_cycles"])
        split = f"measured: serial on the opening thread + the busiest of {c['threads_active']:.0f} threads"
    elif cores > 1:  # counted on one thread: assumed to split evenly, nothing serial
        serial, parallel = 0.0, compute_cycles(c) / cores
        split = f"assumed even over {cores} cores (counted on one thread)"
    else:
        serial, parallel, split = 0.0, compute_cycles(c), "one thread"
    serial_s, compute_s = serial / K1_CLOCK_HZ, parallel / K1_CLOCK_HZ
    memory_s = dram / bandwidth
    return {"serial_s": serial_s, "compute_s": compute_s, "memory_s": memory_s,
            "s": serial_s + max(compute_s, memory_s),
            "bound": "memory" if memory_s >= compute_s else "compute", "split": split}


def step_estimate(linear: dict | None, rest: dict, tokens: int,
                  bandwidth: float = K1_DRAM_ACHIEVED_BYTES_PER_S) -> dict:
    """K1 estimate for one step (a decode step of `tokens` sequences, or a prefill of
    `tokens` tokens) at DRAM ``bandwidth`` bytes/s. `linear` is None when Linear is not
    separable (whole-model graph, llama.cpp): then the whole step is one region, taken at
    its busiest thread when counted with threads, else on one core (a lower bound on its
    speed)."""
    r = region_seconds(rest, 1, bandwidth)
    l = region_seconds(linear, K1_CORES, bandwidth) if linear else {"s": 0.0, "serial_s": 0.0, "bound": "-",
                                                                    "split": "-"}
    s = r["s"] + l["s"]
    return {"step_s": s, "linear_s": l["s"], "rest_s": r["s"], "serial_s": r["serial_s"] + l["serial_s"],
            "linear_bound": l["bound"], "linear_split": l["split"], "rest_split": r["split"], "bandwidth": bandwidth,
            "tok_s": tokens / s if s > 0 else 0.0}


def estimates(linear: dict | None, rest: dict, tokens: int) -> dict:
    """step_estimate at every bandwidth of BANDWIDTHS (by key)."""
    return {key: step_estimate(linear, rest, tokens, bw) for key, _, bw in BANDWIDTHS}


def bandwidth_bound_tok_s(weight_bytes_per_step: float, batch: int,
                          bandwidth: float = K1_DRAM_BYTES_PER_S) -> float:
    """Decode ceiling if every weight byte streams from DRAM once per step."""
    return batch * bandwidth / weight_bytes_per_step
