"""The DRAM bandwidth a K1 program actually reaches, fitted to published board numbers.

The K1's one LPDDR4X channel peaks at 10.66 GB/s (``policy.K1_DRAM_BYTES_PER_S``), but
every decode program measured on the board for these models streams its weights at
~3.3-4.4 GB/s. An estimate at the peak is a ceiling, not a prediction. This module keeps
the published numbers, fits the one free parameter of the estimate -- the achieved DRAM
bandwidth -- to one of them, and states how well that single number reproduces the
others.

The model is the decode-time part of ``demo/estimate.py`` at batch 1: a token takes at
least ``weight bytes / bandwidth``. Every published program below is memory-bound at batch
1 on the K1 (its compute, on 4-8 cores, is a fraction of the streaming time; for our own
kernels that is counted, see ``bench/results/``), so the fit is

    bandwidth = weight bytes per token x published tokens/s          (the reference)
    predicted tokens/s = bandwidth / weight bytes per token           (every other row)

Torch-free: the demo report, ``bench/`` and the host tests read it.
"""
from __future__ import annotations

from dataclasses import dataclass

from .policy import K1_DRAM_ACHIEVED_BYTES_PER_S

# Largest relative error of the fitted model on the other published numbers that we still
# call a calibration (issue "benchmark truth").
TOLERANCE = 0.30


@dataclass(frozen=True)
class BoardNumber:
    key: str               # short id
    program: str
    model: str
    fmt: str
    tok_s: float           # published single-stream decode speed on a K1 board
    weight_bytes: float    # weight bytes streamed per decoded token (how: see `bytes_from`)
    bytes_from: str
    source: str


def _linear_params(hidden: int, inter: int, layers: int, heads: int, kv_heads: int, head_dim: int,
                   vocab: int) -> int:
    """Weights of every Linear a decode token reads (q, k, v, o, gate, up, down per layer,
    plus lm_head; a tied embedding is only gathered, one row per token)."""
    per_layer = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2 + 3 * hidden * inter
    return layers * per_layer + vocab * hidden


# Parameters of the Qwen2.5 models (their config.json): hidden, intermediate, layers,
# heads, KV heads, head dim, vocab.
QWEN25_1_5B = _linear_params(1536, 8960, 28, 12, 2, 128, 151936)   # 1.544e9
QWEN25_0_5B = _linear_params(896, 4864, 24, 14, 2, 64, 151936)     # 0.475e9
BF16_BYTES = 2.0
Q8_BYTES = 34 / 32      # Q8_0 block: 32 int8 + an FP16 scale
Q4_0_BYTES = 18 / 32    # Q4_0 block: 32 nibbles + an FP16 scale

PUBLISHED = (
    BoardNumber("llamacpp-q4_0-1.5b", "llama.cpp + SpacemiT IME, 4 threads", "Qwen2.5-1.5B", "Q4_0", 3.83,
                QWEN25_1_5B * Q4_0_BYTES, "config dims, every Linear and lm_head in Q4_0",
                "SpacemiT llama.cpp IME backend (seed brief, 'Numbers to beat')"),
    BoardNumber("llamacpp-q4_0-0.5b", "llama.cpp + SpacemiT IME, 4 threads", "Qwen2.5-0.5B", "Q4_0", 10.03,
                QWEN25_0_5B * Q4_0_BYTES, "config dims, every Linear and lm_head in Q4_0",
                "SpacemiT llama.cpp IME backend (seed brief, 'Numbers to beat')"),
    BoardNumber("seed-regional-bf16", "seed prototype, regional Linear compile", "Qwen2.5-1.5B", "BF16", 1.320,
                QWEN25_1_5B * BF16_BYTES, "config dims, BF16", "seed write-up (../shared/seed)"),
    BoardNumber("seed-whole-bf16", "seed prototype, whole-model graph", "Qwen2.5-1.5B", "BF16", 1.405,
                QWEN25_1_5B * BF16_BYTES, "config dims, BF16", "seed write-up (../shared/seed)"),
    BoardNumber("sgl-bf16", "sgl-kernel hand-written RVV (711.34 ms/token)", "Qwen2.5-1.5B", "BF16",
                1000 / 711.34, QWEN25_1_5B * BF16_BYTES, "config dims, BF16", "SGLang PR #22193"),
    BoardNumber("sgl-w8a8", "sgl-kernel hand-written RVV W8A8 (483.16 ms/token)", "Qwen2.5-1.5B", "W8A8",
                1000 / 483.16, QWEN25_1_5B * 1.0, "config dims, int8 (per-channel scales ignored)",
                "SGLang PR #22193"),
    BoardNumber("llamacpp-q4_0-qwen3-0.6b", "llama.cpp + SpacemiT IME, 4 threads", "Qwen3-0.6B", "Q4_0", 11.73,
                0.36e9, "k1-numbers-and-peers.md table (~0.36 GB)", "SpacemiT llama.cpp IME backend"),
    BoardNumber("llamacpp-q4_1-qwen3.5-2b", "llama.cpp + SpacemiT IME, 4 threads", "Qwen3.5-2B", "Q4_1", 3.07,
                1.28e9, "k1-numbers-and-peers.md table (~1.28 GB)", "SpacemiT llama.cpp IME backend"),
)

# The reference the constant in policy.py is fitted to: the first choice, llama.cpp
# on the same model dimensions (Qwen2.5-1.5B) in the format our INT4 path competes with.
REFERENCE = "llamacpp-q4_0-1.5b"


def by_key(key: str) -> BoardNumber:
    for b in PUBLISHED:
        if b.key == key:
            return b
    raise KeyError(f"no published board number {key!r}; known: {', '.join(b.key for b in PUBLISHED)}")


def fit_bandwidth(reference: str = REFERENCE) -> float:
    """Achieved DRAM bytes/s that makes the model reproduce ``reference`` exactly."""
    b = by_key(reference)
    return b.weight_bytes * b.tok_s


def predict_tok_s(weight_bytes: float, bandwidth: float) -> float:
    return bandwidth / weight_bytes


def errors(bandwidth: float) -> list[dict]:
    """Every published number with the model's prediction at ``bandwidth`` and the relative
    error (prediction / published - 1)."""
    out = []
    for b in PUBLISHED:
        pred = predict_tok_s(b.weight_bytes, bandwidth)
        out.append({"key": b.key, "program": b.program, "model": b.model, "format": b.fmt,
                    "published_tok_s": b.tok_s, "weight_bytes": b.weight_bytes,
                    "implied_bytes_per_s": b.weight_bytes * b.tok_s,
                    "predicted_tok_s": pred, "error": pred / b.tok_s - 1})
    return out


def summary(bandwidth: float = K1_DRAM_ACHIEVED_BYTES_PER_S, reference: str = REFERENCE) -> dict:
    rows = errors(bandwidth)
    others = [r for r in rows if r["key"] != reference]
    worst = max(others, key=lambda r: abs(r["error"]))
    return {"bandwidth": bandwidth, "reference": reference, "rows": rows,
            "max_abs_error": abs(worst["error"]), "worst": worst["key"],
            "within_tolerance": abs(worst["error"]) <= TOLERANCE, "tolerance": TOLERANCE}


def markdown(s: dict | None = None) -> str:
    s = s or summary()
    lines = [f"Achieved DRAM bandwidth fitted to `{s['reference']}`: **{s['bandwidth'] / 1e9:.2f} GB/s** "
             f"(peak 10.66 GB/s). Worst error on the other published numbers: "
             f"{s['max_abs_error']:+.0%} ({s['worst']}); "
             + ("within" if s["within_tolerance"] else "OUTSIDE") + f" the +-{s['tolerance']:.0%} the model claims.",
             "", "| program | model | format | published tok/s | weight GB/token | implied GB/s | model tok/s | error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in s["rows"]:
        ref = " (reference)" if r["key"] == s["reference"] else ""
        lines.append(f"| {r['program']}{ref} | {r['model']} | {r['format']} | {r['published_tok_s']:.2f} | "
                     f"{r['weight_bytes'] / 1e9:.3f} | {r['implied_bytes_per_s'] / 1e9:.2f} | "
                     f"{r['predicted_tok_s']:.2f} | {r['error']:+.0%} |")
    return "\n".join(lines)
