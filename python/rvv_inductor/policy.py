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
# What programs reach on the board: fitted by demo/calibration.py to llama.cpp's published
# Qwen2.5-1.5B Q4_0 decode (3.83 tok/s); a test checks that the two agree.
K1_DRAM_ACHIEVED_BYTES_PER_S = 3.325e9
# The same parameter fitted to the published programs the estimate shows DRAM-bound (the
# BF16 decodes, calibration.DRAM_BOUND); a test checks that the two agree. Reported as a
# column beside the conservative one above, which stays the headline.
K1_DRAM_FIT_BYTES_PER_S = 4.249e9

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

# --- activations of INT8/INT4 Linear calls with M >= 2 (compile_linears / enable /
# load_gguf / serve / export: activations=...) -----------------------------------------
# "int8": quantized per row in blocks of 32 (dx = max|x| / 127, llama.cpp's Q8_0 blocks) and
#         multiplied in integers (csrc/rvv_inductor/quant_x8.h): the prompt and batched
#         decode at the int8 datapath. Decode (M == 1) is DRAM-bound and keeps the FP path.
# "bf16": the FP path everywhere: each product exact in fp32.
# "auto" (the default): "int8" for INT4 weights and the GGUF block formats (Q4_1, Q5_0, Q5_1,
#         Q4_K, Q5_K, Q6_K), "bf16" for INT8 weights. Measured (docs/kernels-and-formats.md, "INT8
#         activations"): with INT4 weights INT8 activations add ~7 % of the weights' own
#         logit error for ~2x on the prompt's GEMMs; with INT8 weights about two thirds of
#         it for ~1.1x (int8 x int8 runs at the FP32 rate). The block formats are what
#         llama.cpp runs with 8-bit activations (its Q8_K), and their FP GEMM decodes each
#         weight once per row tile, which the INT8 GEMM does once per row block.
ACTIVATIONS = ("auto", "int8", "bf16")
DEFAULT_ACTIVATIONS = "auto"
# The C ABI's option bit for "int8" (RVV_LINEAR_X_INT8_GEMM, csrc/rvv_inductor/capi.h).
X8_GEMM_OPTION = 2


def check_activations(activations, who: str) -> str:
    """``activations`` if it is one of ACTIVATIONS, else a ValueError naming the caller."""
    if not isinstance(activations, str) or activations not in ACTIVATIONS:
        raise ValueError(f"{who}: activations={activations!r} is not one of {', '.join(map(repr, ACTIVATIONS))}")
    return activations


def resolve_activations(fmt: str, activations: str) -> str:
    """What a layer of weight format ``fmt`` (bf16, int8, int4 or a GGUF block format such
    as q4_k) does at M >= 2: "int8" or "bf16"."""
    if fmt == "bf16":
        return "bf16"
    if activations == "auto":
        return "bf16" if fmt == "int8" else "int8"
    return activations


def x8_applies(fmt: str, group_size: int) -> bool:
    """The INT8-activation GEMM covers this weight format (quant_x8.h: groups of whole
    32-element blocks; 0 is per channel, INT8 only; every GGUF block format)."""
    if fmt not in WEIGHT_FORMATS:
        return True  # a block format (its sub-blocks are 32 or 16 rows)
    if fmt == "int4":
        return group_size > 0 and group_size % 32 == 0
    return fmt == "int8" and group_size % 32 == 0


# --- the prefill chunk of the AOTInductor package (export --prefill-chunk) ---------------
# A prefill call streams every weight once from DRAM and multiplies it with `chunk` prompt
# rows on K1_CORES threads. Its weights' DRAM time hides behind the multiply-adds when
#   chunk >= bytes per weight * K1_CORES * datapath MACs per cycle * clock / DRAM bandwidth,
# at the datapath floor of the path the GEMMs take (FP32: 4 MACs/cycle at DLEN 128; INT4
# weights with INT8 activations: 8; INT8 x INT8 fills int16 after two products: 4) and the
# calibrated bandwidth. The chunk is the smallest power of two at or above that, at least
# 16 (the lm_head and attention of every call are amortised over its rows) and at most 64:
# the row block of the quantized GEMMs (a longer call streams the weights once per 64
# rows anyway) and the M bucket the regional runtime compiles. A prompt shorter than a
# chunk is one padded call (rvv-generate), so the chunk does not cost short prompts a
# token-by-token prefill.
PREFILL_BYTES_PER_WEIGHT = {"bf16": 2.0, "int8": 1.0, "int4": 0.5 + 2 / DEFAULT_GROUP_SIZE["int4"]}
PREFILL_CHUNK_MIN, PREFILL_CHUNK_MAX = 16, 64


def prefill_floor_macs_per_cycle(weights: str, activations: str = DEFAULT_ACTIVATIONS) -> int:
    """Multiply-adds per cycle per core of the datapath the prefill GEMMs take at DLEN 128."""
    return 8 if weights == "int4" and resolve_activations(weights, activations) == "int8" else 4


def prefill_chunk(weights: str, activations: str = DEFAULT_ACTIVATIONS,
                  bandwidth: float = K1_DRAM_ACHIEVED_BYTES_PER_S) -> int:
    """The package's prefill chunk for this weight format (see above)."""
    return prefill_chunk_for(PREFILL_BYTES_PER_WEIGHT[weights], prefill_floor_macs_per_cycle(weights, activations),
                             bandwidth)


def prefill_chunk_for(bytes_per_weight: float, macs_per_cycle: int,
                      bandwidth: float = K1_DRAM_ACHIEVED_BYTES_PER_S) -> int:
    """The prefill chunk of weights of ``bytes_per_weight`` whose GEMMs run at
    ``macs_per_cycle`` per core (a GGUF file's formats: export takes the largest chunk over
    the formats it holds, so every GEMM hides its weights' DRAM time)."""
    need = bytes_per_weight * K1_CORES * macs_per_cycle * K1_CLOCK_HZ / bandwidth
    chunk = PREFILL_CHUNK_MIN
    while chunk < need and chunk < PREFILL_CHUNK_MAX:
        chunk *= 2
    return chunk

