#!/usr/bin/env python3
"""Peak memory (VmHWM) of a Qwen2 decoder per mode, each mode in its own process.

    scripts/rv64 env PYTHONPATH=$PWD/python RVV_INDUCTOR_LIB=$PWD/build/rv64/csrc/librvv_inductor_core.so \\
        python3 bench/memory.py --config 1.5b --out bench/results/memory

Modes (each: build the model with seeded random weights, prefill 2 tokens, one decode step,
then read VmHWM from /proc/self/status):

  empty              python3 + import torch, transformers, rvv_inductor: the baseline
                     (under QEMU it includes QEMU's own memory)
  eager              the BF16 model, plain PyTorch
  regional-bf16      the BF16 model built in memory, then compile_linears(model)
  regional-bf16-load the model built on the meta device, compile_linears(model, load=fill)
  regional-int8      meta model, compile_linears(model, weights="int8", load=fill)
  regional-int4      meta model, compile_linears(model, weights="int4", load=fill)
  regional-int4-keep-lm-head   the same with keep_bf16="lm_head"

The weights: every matrix and bias is a window, at an offset derived from the seed and the
tensor's name, of one prime-sized pool of N(0, 0.02) values, written in place in
pool-sized pieces (no transient copy); norm weights are 1. The eager and the loader modes
therefore hold the same numbers. The table reports VmHWM minus the empty run's.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import zlib
from pathlib import Path

CONFIGS = {
    # Qwen2.5-1.5B: hidden 1536, intermediate 8960, 28 layers, 12 heads, 2 kv heads, tied.
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "small": dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=2, vocab_size=32768, tie_word_embeddings=True),
    "tiny": dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=4096, tie_word_embeddings=True),
}
COMMON = dict(rope_theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=4096, hidden_act="silu")
MODES = ["empty", "eager", "regional-bf16", "regional-bf16-load", "regional-int8", "regional-int4",
         "regional-int4-keep-lm-head"]
POOL = 1048573  # prime


def status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {key}")


class Filler:
    """load(name, meta) -> a new CPU tensor of the seeded random weights (see the module doc)."""

    def __init__(self, seed: int) -> None:
        import torch

        g = torch.Generator().manual_seed(seed)
        self.pool = (torch.randn(POOL, generator=g) * 0.02).to(torch.bfloat16)
        self.seed = seed

    def __call__(self, name: str, meta):
        import torch

        t = torch.empty(meta.shape, dtype=torch.bfloat16)
        if name.rsplit(".", 1)[0].endswith("norm"):
            return t.fill_(1.0)
        flat, n = t.view(-1), t.numel()
        off = zlib.crc32(f"{self.seed}:{name}".encode()) % POOL
        i = 0
        while i < n:
            take = min(n - i, POOL - off)
            flat[i:i + take].copy_(self.pool[off:off + take])
            i += take
            off = 0
        return t


def meta_model(cfg):
    import torch
    import transformers

    with torch.device("meta"):
        model = transformers.Qwen2ForCausalLM(cfg)
    model.model.rotary_emb = type(model.model.rotary_emb)(config=cfg)  # inv_freq: computed, on the CPU
    model = model.to(torch.bfloat16).eval()
    model.requires_grad_(False)
    if cfg.tie_word_embeddings:
        assert model.lm_head.weight is model.model.embed_tokens.weight
    return model


def materialize(model, fill) -> None:
    """Every meta parameter from fill, tied ones kept tied: the plain BF16 model."""
    import torch

    names = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), name)
    memo = {}
    for mod in model.modules():
        for pname, p in list(mod._parameters.items()):
            if p is not None and p.is_meta:
                if id(p) not in memo:
                    memo[id(p)] = torch.nn.Parameter(fill(names[id(p)], p), requires_grad=False)
                mod._parameters[pname] = memo[id(p)]


def run_one(mode: str, config: str, seed: int) -> dict:
    t0 = time.time()
    import torch
    import transformers

    import rvv_inductor

    out = {"mode": mode, "config": config}
    if mode != "empty":
        cfg = transformers.Qwen2Config(**CONFIGS[config], **COMMON)
        fill = Filler(seed)
        model = meta_model(cfg)
        if mode in ("eager", "regional-bf16"):
            materialize(model, fill)
        out["rss_after_build_kib"] = status_kib("VmRSS")
        if mode.startswith("regional"):
            weights = "bf16" if "bf16" in mode else mode.split("-")[1]
            kwargs = dict(weights=weights)
            if mode.endswith("keep-lm-head"):
                kwargs["keep_bf16"] = "lm_head"
            if mode != "regional-bf16":
                kwargs["load"] = fill
            report = rvv_inductor.compile_linears(model, **kwargs)
            out["tied"] = report.tied
            out["packed_bytes"] = report.packed_bytes
            out["param_bytes"] = report.param_bytes
        out["rss_after_compile_kib"] = status_kib("VmRSS")
        out["model_bytes"] = sum(t.untyped_storage().nbytes() for t in
                                 {id(t): t for t in list(model.parameters()) + list(model.buffers())}.values())
        ids = torch.tensor([[151 % cfg.vocab_size, 2024 % cfg.vocab_size]])
        t1 = time.time()
        with torch.no_grad():
            r = model(ids, use_cache=True)
            nxt = r.logits[:, -1].argmax(-1, keepdim=True)
            r = model(nxt, past_key_values=r.past_key_values, use_cache=True)
        out["decode_seconds"] = time.time() - t1
        out["next_token"] = int(r.logits[0, -1].argmax())
    out["vmhwm_kib"] = status_kib("VmHWM")
    out["seconds"] = time.time() - t0
    return out


def table(results: list[dict]) -> str:
    by = {r["mode"]: r for r in results}
    base = by.get("empty", {}).get("vmhwm_kib", 0)
    eager = by.get("eager", {}).get("vmhwm_kib")
    lines = ["| mode | VmHWM (GiB) | minus empty (GiB) | / eager's (differences) | model tensors (GiB) | "
             "decode s | next token |", "|---|---|---|---|---|---|---|"]
    for r in results:
        d = r["vmhwm_kib"] - base
        ratio = f"{d / (eager - base):.3f}" if eager and r["mode"] != "empty" else ""
        lines.append(f"| {r['mode']} | {r['vmhwm_kib'] / 2**20:.2f} | {d / 2**20:.2f} | {ratio} | "
                     f"{r.get('model_bytes', 0) / 2**30:.2f} | {r.get('decode_seconds', 0):.0f} | "
                     f"{r.get('next_token', '')} |")
    return "\n".join(lines)


def write(a, results) -> None:
    a.out.mkdir(parents=True, exist_ok=True)
    cmd = ("scripts/rv64 env PYTHONPATH=$PWD/python RVV_INDUCTOR_LIB=$PWD/build/rv64/csrc/librvv_inductor_core.so "
           f"python3 bench/memory.py --config {a.config} --modes {a.modes} --seed {a.seed} --out {a.out}")
    (a.out / f"memory-{a.config}.json").write_text(json.dumps({"command": cmd, "results": results}, indent=1))
    (a.out / f"memory-{a.config}.md").write_text(
        f"Peak RSS per mode, config {a.config} ({CONFIGS[a.config]}), each mode in its own process, "
        f"under QEMU user mode (VmHWM includes QEMU's own memory: compare the differences).\n\n"
        f"Regenerate: `{cmd}`\n\n{table(results)}\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="small")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="directory for memory.json and memory.md")
    ap.add_argument("--resume", action="store_true",
                    help="keep the modes already in --out's JSON (same config and seed) and run only the others")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(run_one(a.one, a.config, a.seed)))
        return 0
    modes = a.modes.split(",")
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode(s) {bad}; choose from {MODES}")
    results = []
    if a.resume:
        if not a.out:
            ap.error("--resume needs --out")
        old = a.out / f"memory-{a.config}.json"
        if old.exists():
            # a mode's seed is part of its command line; only results from the same seed carry over
            prev = json.loads(old.read_text())
            if f"--seed {a.seed} " in prev["command"]:
                results = [r for r in prev["results"] if r["mode"] in modes]
    done = {r["mode"] for r in results}
    for mode in modes:
        if mode in done:
            print(f"{mode}: kept from {a.out}", flush=True)
            continue
        t = time.time()
        p = subprocess.run([sys.executable, __file__, "--one", mode, "--config", a.config, "--seed", str(a.seed)],
                           capture_output=True, text=True)
        if p.returncode:
            sys.stderr.write(p.stderr[-4000:])
            raise SystemExit(f"bench/memory.py: mode {mode} failed ({p.returncode})")
        r = json.loads(p.stdout.strip().splitlines()[-1])
        r["wall_seconds"] = time.time() - t
        results.append(r)
        results.sort(key=lambda x: modes.index(x["mode"]))
        print(f"{mode}: VmHWM {r['vmhwm_kib'] / 2**20:.2f} GiB ({time.time() - t:.0f} s)", flush=True)
        if a.out:  # after every mode: a long run keeps what it measured
            write(a, results)
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
