"""Policy values that more than one part of the project reads, each defined once.

Plain Python, importable without torch or the C++ core (bench/report.py imports it with
the host's python3). The block width ``nb`` is not here: it belongs to the kernels, so
the C ABI defines it (``rvv_nb_for_vlenb``, read through ``rvv_inductor._native``).

* ``Gate``: which Linear shapes are worth an RVV kernel.
* ``M_BUCKETS`` / ``m_bucket``: the row counts the regional runtime compiles for.
* ``K1_*``: the SpacemiT K1 (BPI-F3), the board this project targets: the fallback cache
  sizes Inductor's GEMM template is given, and the inputs of the throughput estimates.
"""
from __future__ import annotations

import dataclasses
import os

# --- the SpacemiT K1 (8 X60 cores in two clusters of 4) --------------------------------
K1_CLOCK_HZ = 1.6e9          # core clock
K1_CORES = 8
K1_CLUSTER_CORES = 4         # cores sharing one L2
K1_VLEN_BITS = 256           # vector register length
K1_DLEN_BITS = 128           # vector datapath width: an LMUL=1 operation takes VLEN/DLEN beats
K1_L1D_BYTES = 32 * 1024     # per core, 8-way
K1_L1D_WAYS = 8
K1_L2_BYTES = 512 * 1024     # per cluster, 16-way
K1_L2_WAYS = 16
K1_CACHE_LINE_BYTES = 64
K1_DRAM_BYTES_PER_S = 10.66e9  # peak of its one 32-bit LPDDR4X-2666 channel: the ceiling
# What programs reach on the board: fitted by calibration.py to llama.cpp's published
# Qwen2.5-1.5B Q4_0 decode (3.83 tok/s); a test checks that the two agree.
K1_DRAM_ACHIEVED_BYTES_PER_S = 3.325e9

# The in-order cycle model of the estimates: every instruction that is not a vector
# datapath operation costs this many cycles (dual issue is ignored).
CPI_SCALAR = 1.0

# --- which shapes go to RVV ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Gate:
    """Which GEMMs (M rows, N outputs, K inputs) are worth an RVV kernel.

    The defaults are the gate of ``rvv_inductor.enable()`` for whole-graph
    ``torch.compile``: every admitted shape costs a C++ GEMM template of its own, compiled
    once per graph, so only large GEMMs (N, K >= 1024, M*N*K >= 1e6, M <= 128) take it.
    ``Gate.regional()`` is the gate of ``compile_linears``. Override either with
    ``enable(gate=Gate(...))`` / ``compile_linears(model, gate=Gate(...))``, or the keys of
    ``RVV_INDUCTOR_GATE`` / ``RVV_INDUCTOR_REGIONAL_GATE`` ("min_n=256,min_k=256")."""

    min_mnk: float = 1e6
    max_m: int = 128
    min_n: int = 1024
    min_k: int = 1024

    @classmethod
    def regional(cls) -> Gate:
        """The gate of ``compile_linears``: N, K >= 128, any M.

        In the regional runtime one compiled artifact per shape serves every layer of
        that shape, so the only question is whether a call beats ATen. ATen's BF16 linear
        executes ~20 instructions per multiply-add on RISC-V (bench/results: 60.4M for
        1536x2048), the packed kernel ~0.11, and a compiled region adds a fixed Python,
        guard and wrapper cost of the order of 1e5 instructions per call (estimated). That
        breaks even near N*K = 64*64 and wins clearly from 128*128, which admits every
        projection of Qwen2.5-0.5B and 1.5B, GQA k/v included. M is not limited: the
        runtime splits M > 128 into chunks."""
        return cls(min_mnk=0, max_m=1 << 62, min_n=128, min_k=128)

    @classmethod
    def from_env(cls, var: str = "RVV_INDUCTOR_GATE", default: Gate | None = None) -> Gate:
        """``default`` (``Gate()`` when None) with the keys set in the environment
        variable ``var`` replaced; a bad key or value is a ValueError naming ``var``."""
        base = default or cls()
        raw = os.environ.get(var, "").strip()
        if not raw:
            return base
        names = [f.name for f in dataclasses.fields(cls)]
        kwargs = {}
        for item in raw.split(","):
            key, _, value = item.partition("=")
            key = key.strip()
            if key not in names:
                raise ValueError(f"{var}: unknown key {key!r} ({', '.join(names)})")
            try:
                num = float(value)
            except ValueError:
                raise ValueError(f"{var}: {key}={value!r} is not a number") from None
            if num < 0:
                raise ValueError(f"{var}: {key} must be >= 0")
            kwargs[key] = num if key == "min_mnk" else int(num)
        return dataclasses.replace(base, **kwargs)

    def check(self, m: int, n: int, k: int) -> str | None:
        """None when the shape passes, else why it does not (e.g. "N=256 < 1024")."""
        if m > self.max_m:
            return f"M={m} > {self.max_m}"
        if n < self.min_n:
            return f"N={n} < {self.min_n}"
        if k < self.min_k:
            return f"K={k} < {self.min_k}"
        if m * n * k < self.min_mnk:
            return f"M*N*K={m * n * k} < {self.min_mnk:g}"
        return None


# --- the regional runtime's row buckets ------------------------------------------------

# A call with M rows runs the artifact compiled for the smallest bucket >= M, its rows
# zero-padded; M above the last bucket is split into chunks of that many rows. Small
# steps for decode (M = batch size), coarse ones for prefill.
M_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


def m_bucket(m: int) -> int:
    """The bucket a call of ``m`` rows (at most ``M_BUCKETS[-1]``, else a chunk) runs in."""
    for b in M_BUCKETS:
        if m <= b:
            return b
    return M_BUCKETS[-1]


# --- weight formats of compile_linears(weights=...) ------------------------------------
WEIGHT_FORMATS = ("bf16", "int8", "int4")
# K rows per scale group, per format (0: one scale per output channel). INT8 defaults to
# per channel (the measured decode path, 1.04 bytes read per packed byte); INT4 to 64:
# half the scale bytes of llama.cpp's 32 (4.25 instead of 4.5 bits per weight, which is
# what decode streams) with a finer grid than 128, and the size the kernels were measured at.
DEFAULT_GROUP_SIZE = {"int8": 0, "int4": 64}
GROUP_SIZES = {"int8": (0, 32, 64, 128, 256), "int4": (32, 64, 128)}
