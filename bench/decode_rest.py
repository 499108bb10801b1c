#!/usr/bin/env python3
"""Instructions per decode token outside the Linear kernels, regional path (guest side of
bench/decode_rest.sh; runs in the riscv64 root filesystem under the rvvcount plugin).

A Qwen2 model with the dimensions of --config (default Qwen2.5-1.5B) and --layers layers,
random weights (the demo's builder), goes through ``compile_linears(weights=...)`` with or
without ``compile_layers=True``; a --prompt-token prompt fills a StaticCache, then --steps
decode steps run, the last --counted of them each in marker region 1. Every thread's
instructions are counted; bench/decode_rest.sh takes the Linear kernels' share from the
profile (librvv_inductor_core.so) and extrapolates from the layer counts to the model's.
"""
from __future__ import annotations

import argparse
import json
import time

import torch
import transformers

import rvv_inductor
from rvv_inductor import _native
from rvv_inductor.demo import models


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="qwen2.5-1.5b")
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--weights", default="int4", choices=("bf16", "int8", "int4"))
    ap.add_argument("--compile-layers", action="store_true")
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--counted", type=int, default=3)
    ap.add_argument("--cache", type=int, default=128)
    ap.add_argument("--threads", type=int, default=8)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = models.build({"seed": 0, "config": models.config_dict(a.config, a.layers)})
    t0 = time.perf_counter()
    report = rvv_inductor.compile_linears(model, weights=a.weights, compile_layers=a.compile_layers)
    mark = _native.lib().rvv_count_region
    cache = transformers.StaticCache(config=model.config, max_batch_size=1, max_cache_len=a.cache)
    prompt = torch.randint(0, model.config.vocab_size, (1, a.prompt), generator=torch.Generator().manual_seed(1))
    tokens = []
    with torch.inference_mode():
        out = model(input_ids=prompt, past_key_values=cache, cache_position=torch.arange(a.prompt), use_cache=True,
                    logits_to_keep=1)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        for i in range(a.steps):
            counted = i >= a.steps - a.counted
            pos = torch.tensor([a.prompt + i])
            if counted:
                mark(1, 1)
            out = model(input_ids=tok, past_key_values=cache, cache_position=pos, use_cache=True)
            if counted:
                mark(1, 0)
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            tokens.append(int(tok))
    print(json.dumps({"config": a.config, "layers": a.layers, "weights": a.weights,
                      "compile_layers": a.compile_layers, "compiled_layers": len(report.compiled_layers),
                      "rvv_attention": report.rvv_attention, "counted": a.counted, "threads": a.threads,
                      "prompt": a.prompt, "cache": a.cache, "tokens": tokens,
                      "seconds_to_last_token": time.perf_counter() - t0,
                      "graphs": torch._dynamo.utils.counters["stats"]["unique_graphs"]}), flush=True)


if __name__ == "__main__":
    main()
