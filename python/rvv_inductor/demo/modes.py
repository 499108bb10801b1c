"""What the demo's driver (``__init__.py``), its report and its workers (``worker.py``)
share, torch-free: the modes and their traits, the rvvcount region ids of the counting
runs, the thread counts a C++ driver is counted at, and how rvv-generate's summary reads.
``worker.py`` runs the modes (with torch); the driver and the report, on the host too,
need only these tables.
"""
from __future__ import annotations

import dataclasses

from ..policy import K1_CORES

# rvvcount region ids (csrc/rvv_inductor/markers.h) used by counting runs: one per kind
# and batch size; rvv_count_region takes ids 1..16: three batch sizes, and the last two ids
# for the long prompt (spec "count_prefill", batch 1: what a user's time to first token is).
DECODE_REST, DECODE_LINEAR, PREFILL_REST, PREFILL_LINEAR = 1, 2, 3, 4
REGION_KINDS = 4
MAX_COUNTED_BATCHES = 3
PROMPT_REST, PROMPT_LINEAR = 13, 14


def region_id(kind: int, batch_index: int) -> int:
    """The rvvcount region of ``kind`` (DECODE_REST, ...) for the batch_index-th batch size."""
    return kind + REGION_KINDS * batch_index


@dataclasses.dataclass(frozen=True)
class ModeTraits:
    """One torch mode as the driver and the report see it (``worker.py`` runs it)."""

    name: str
    teacher_forced: bool = True    # compares logits for eager's tokens (eager picks them greedily)
    lazy: bool = False             # the mode's compile step materialises a meta-device model
    asserted: bool = True          # agreement with eager within the BF16 tolerance is required
    linear_separable: bool = True  # a counting run can charge Linear calls to their own region
    weights: str | None = None     # compile_linears(weights=...): "int8"/"int4"; None: BF16 as built
    compile_layers: bool = False   # compile_linears(compile_layers=True): each decoder layer one region


# The torch modes (worker.py's Mode classes of these names), eager first: the other modes
# compare with its results.
MODES = {t.name: t for t in (
    ModeTraits("eager", teacher_forced=False),  # ATen, what users have today: it picks the tokens
    # Built on the meta device: compile_linears(load=...) packs (quantizes) layer by layer.
    ModeTraits("regional", lazy=True),
    # Other weights than eager's: the distance is reported, not asserted.
    ModeTraits("regional-int8", lazy=True, asserted=False, weights="int8"),
    ModeTraits("regional-int4", lazy=True, asserted=False, weights="int4"),
    # The Linear calls run inside the compiled layer regions, where no hook can mark them.
    ModeTraits("layers-int4", lazy=True, asserted=False, weights="int4", linear_separable=False,
               compile_layers=True),
    # One graph: Linear and the rest cannot be told apart.
    ModeTraits("whole", linear_separable=False),
)}
# llama.cpp on the same weights, written as GGUF in these formats (llamacpp.FORMATS;
# q4_k_m: the BF16 file quantized by llama-quantize, llama.cpp's own Q4_K/Q6_K mix).
LLAMACPP_MODES = {"llama.cpp-q8_0": "q8_0", "llama.cpp-q4_0": "q4_0", "llama.cpp-bf16": "bf16",
                  "llama.cpp-q4_k_m": "q4_k_m"}
# The AOTInductor package (python3 -m rvv_inductor export), run by rvv-generate, in these
# weight formats; a GGUF mix (GGUF_PACKAGE_MIXES) is the same llama-quantize file as the
# llama.cpp mode's, exported with each layer in the file's format (export --weights file).
PACKAGE_MODES = {"package": "bf16", "package-int4": "int4", "package-q4_k_m": "q4_k_m"}
GGUF_PACKAGE_MIXES = ("q4_k_m",)
# Modes run by an external program rather than this worker's torch: each is counted as a
# whole (no Linear/rest split): its decode steps by one run at full depth, its long prompt
# at full depth or, with --count-layers, on files of the two depths.
DRIVER_MODES = {**LLAMACPP_MODES, **PACKAGE_MODES}
EMPTY = "empty"  # the baseline worker: torch and transformers imported, nothing built
LLAMACPP_REGION = region_id(DECODE_REST, 0)  # a driver's decode tokens: not separable, like "whole"


def count_threads(spec: dict, mode: str = "") -> list[int]:
    """The thread counts a C++ driver is counted at: the K1's cores, which our torch modes
    are counted at, and, for llama.cpp, 4, the count llama.cpp + IME boards run (IME
    exists on one 4-core cluster). Every side-by-side row then compares equal thread
    counts. The package is counted at the cores only: its RVV calls are partitioned when it
    is exported (export --threads) and run on the library's own pool, so rvv-generate
    --threads 4 still runs them on 8 (counted: 8 threads active in its prompt either way)."""
    cores = spec.get("count_threads") or K1_CORES
    return [cores] if mode in PACKAGE_MODES else sorted({cores, 4}, reverse=True)


def runner_times(stdout: str) -> dict:
    """rvv-generate's summary lines -> {"tokens": [...], "load_s", "prefill_s", "ttft_s", "decode_s_per_token"}."""
    out = {}
    for line in stdout.splitlines():
        key, _, val = line.partition(": ")
        if key == "tokens":
            out["tokens"] = [int(t) for t in val.split(",") if t]
        elif key in ("load_s", "prefill_s", "ttft_s") and val:
            out[key] = float(val.split()[0])
        elif key == "decode_s" and "s/token" in val:  # "1.234 (3 steps, 0.411 s/token)"
            out["decode_s_per_token"] = float(val.rsplit(",", 1)[1].split()[0])
    return out
