"""One demo mode in its own process, so compile time and peak RSS belong to that mode
alone: build the model, prepare the mode, run every (batch, prompt) workload, save the
logits and the measurements.

Modes:
  eager     ATen, what users have today.
  regional  rvv_inductor.compile_linears: only the Linear layers are compiled (RVV).
  whole     torch.compile(model.forward, dynamic=False) with freezing and rvv_inductor
            enabled, as SGLang's CPU graph runner: the decode step is captured once per
            batch size; prefill runs the model without the graph.

Generation uses a transformers StaticCache (one per batch size, reset per workload), the
same in every mode. Greedy decoding in eager mode picks the tokens; the other modes are
teacher-forced with eager's tokens, so every step compares logits for the same input.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from . import models
from .progress import Progress

# rvvcount region ids (csrc/rvv_inductor/markers.h) used by counting runs: four per
# batch size (at most four batch sizes; rvv_count_region takes ids 1..16).
DECODE_REST, DECODE_LINEAR, PREFILL_REST, PREFILL_LINEAR = 1, 2, 3, 4
MAX_COUNTED_BATCHES = 4


def region_id(kind: int, batch_index: int) -> int:
    return kind + 4 * batch_index


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class RegionCounter:
    """Charges Linear calls and everything else to separate rvvcount regions. The plugin
    allows no nesting, so a Linear call ends the "rest" region and begins its own."""

    def __init__(self, model, hook_linears: bool) -> None:
        from .. import _native

        self._mark = _native.lib().rvv_count_region
        self.rest = self.linear = 0
        if hook_linears:
            import torch

            from ..regional import RVVLinear

            for m in model.modules():
                if isinstance(m, (torch.nn.Linear, RVVLinear)):
                    m.register_forward_pre_hook(self._enter_linear)
                    m.register_forward_hook(self._leave_linear)

    def begin(self, rest: int, linear: int) -> None:
        self.rest, self.linear = rest, linear
        self._mark(rest, 1)

    def end(self) -> None:
        self._mark(self.rest, 0)
        self.rest = self.linear = 0

    def _enter_linear(self, *_):
        if self.rest:
            self._mark(self.rest, 0)
            self._mark(self.linear, 1)

    def _leave_linear(self, *_):
        if self.rest:
            self._mark(self.linear, 0)
            self._mark(self.rest, 1)


def _workload_inputs(spec, b: int, p: int):
    import torch

    g = torch.Generator().manual_seed(spec["seed"] * 1000003 + b * 1009 + p)
    return torch.randint(0, spec["vocab_size"], (b, p), generator=g)


def _generate(model, decode, cache, prompt, steps, teacher, counter=None, bi=0):
    """Prefill, then `steps` decode steps. Returns logits [B, steps+1, V] (BF16), the
    tokens fed/chosen [B, steps+1], and wall times."""
    import torch

    b, p = prompt.shape
    cache.reset()
    t0 = time.perf_counter()
    if counter:
        counter.begin(region_id(PREFILL_REST, bi), region_id(PREFILL_LINEAR, bi))
    out = model(input_ids=prompt, past_key_values=cache, cache_position=torch.arange(p),
                use_cache=True, logits_to_keep=1)
    logits = [out.logits[:, -1]]
    if counter:
        counter.end()
    t_prefill = time.perf_counter() - t0
    tokens = [teacher[:, 0] if teacher is not None else logits[-1].argmax(-1)]
    step_times = []
    for i in range(steps):
        t0 = time.perf_counter()
        if counter:
            counter.begin(region_id(DECODE_REST, bi), region_id(DECODE_LINEAR, bi))
        # A fresh [B, 1] tensor: a column sliced from the teacher tokens has other strides
        # than an argmax result, and the whole-model graph (dynamic=False) guards on strides.
        ids = torch.empty(b, 1, dtype=torch.long)
        ids[:, 0] = tokens[-1]
        out = decode(input_ids=ids, past_key_values=cache,
                     cache_position=torch.tensor([p + i]), use_cache=True, logits_to_keep=1)
        logits.append(out.logits[:, -1])
        if counter:
            counter.end()
        step_times.append(time.perf_counter() - t0)
        tokens.append(teacher[:, i + 1] if teacher is not None else logits[-1].argmax(-1))
    return torch.stack(logits, 1), torch.stack(tokens, 1), t_prefill, step_times


def run(spec: dict, mode: str) -> dict:
    import torch
    import transformers

    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    out_dir = Path(spec["out"])
    res: dict = {"mode": mode, "torch": torch.__version__, "threads": torch.get_num_threads()}
    prog = Progress(f"{mode}: building the model", stream=sys.stdout)
    t0 = time.perf_counter()
    model = models.build(spec)
    res["build_s"] = time.perf_counter() - t0
    params = {id(p): p for p in model.parameters()}
    res["param_bytes"] = sum(p.numel() * p.element_size() for p in params.values())
    res["n_params"] = sum(p.numel() for p in params.values())
    res["rss_model_kib"] = _rss_kib("VmRSS")
    graphs0 = torch._dynamo.utils.counters["stats"]["unique_graphs"]

    decode = model.forward
    res["packed_bytes"] = 0
    res["routing"] = {"rvv": [], "fallback": []}
    t0 = time.perf_counter()
    if mode == "regional":
        prog.stage("regional: packing the Linear weights")
        from ..regional import compile_linears

        rep = compile_linears(model)
        res["packed_bytes"] = rep.packed_bytes
        res["packed_param_bytes"] = rep.param_bytes
        res["routing"] = {"rvv": [f"{n} (N={nn} K={k})" for n, nn, k in rep.taken],
                          "fallback": [f"{n}: {why}" for n, why in rep.fell_back]}
    elif mode == "whole":
        import rvv_inductor
        import torch._inductor.config as icfg

        rvv_inductor.enable()
        icfg.freezing = True
        decode = torch.compile(model.forward, dynamic=False)
    elif mode != "eager":
        raise ValueError(f"unknown mode {mode!r}")
    res["prepare_s"] = time.perf_counter() - t0

    teacher = None
    if mode != "eager" and not spec.get("count"):
        # Counting runs compare no logits, so they decode greedily on their own and need
        # no eager run (their model may even be shallower, see --count-layers).
        teacher = torch.load(out_dir / "tokens-eager.pt")
    counter = RegionCounter(model, hook_linears=mode != "whole") if spec.get("count") else None

    max_len = max(spec["prompts"]) + spec["steps"] + 1
    caches = {b: transformers.StaticCache(config=model.config, max_cache_len=max_len) for b in spec["batches"]}
    work = [(b, p) for b in spec["batches"] for p in spec["prompts"]]
    res["workloads"] = []
    logits_all, tokens_all = {}, {}
    with torch.no_grad():
        first_pass_s = 0.0
        warm: dict = {}  # workload or batch -> (prefill s, first decode step s) of pass 1
        if mode == "regional":
            # Pass 1 triggers every compile (prefill and decode M buckets), so no compile
            # is timed or counted as a step.
            for i, (b, p) in enumerate(work):
                prog.stage(f"{mode}: compiling + first run, workload {i + 1}/{len(work)} (batch {b}, prompt {p})")
                tch = teacher[(b, p)] if teacher is not None else None
                t0 = time.perf_counter()
                _, _, t_pre, st = _generate(model, decode, caches[b], _workload_inputs(spec, b, p), 1, tch)
                first_pass_s += time.perf_counter() - t0
                warm[(b, p)] = (t_pre, st[0])
        elif mode == "whole":
            # Only the decode step is compiled (once per batch size); prefill runs eagerly,
            # so a one-token prompt is enough to get there.
            for i, b in enumerate(spec["batches"]):
                prog.stage(f"{mode}: compiling the decode graph, batch size {i + 1}/{len(spec['batches'])} ({b})")
                t0 = time.perf_counter()
                _, _, t_pre, st = _generate(model, decode, caches[b], _workload_inputs(spec, b, 1), 1, None)
                first_pass_s += time.perf_counter() - t0
                warm[b] = (0.0, st[0])
        compile_s = 0.0
        for i, (b, p) in enumerate(work):
            prog.stage(f"{mode}: generating, workload {i + 1}/{len(work)} (batch {b}, prompt {p}, "
                       f"{spec['steps']} decode steps)")
            tch = teacher[(b, p)] if teacher is not None else None
            lg, tk, t_pre, steps = _generate(model, decode, caches[b], _workload_inputs(spec, b, p),
                                            spec["steps"], tch, counter, spec["batches"].index(b))
            logits_all[(b, p)], tokens_all[(b, p)] = lg, tk
            med = statistics.median(steps) if steps else 0.0
            # Compile wall time: what pass 1 took beyond the same work run warm.
            if (b, p) in warm:
                compile_s += max(warm[(b, p)][0] - t_pre, 0.0) + max(warm[(b, p)][1] - med, 0.0)
            elif b in warm:
                compile_s += max(warm.pop(b)[1] - med, 0.0)
            res["workloads"].append({"batch": b, "prompt": p, "prefill_s": t_pre, "decode_step_s": steps,
                                     "decode_step_median_s": med})
    prog.done()
    res["first_pass_s"] = first_pass_s
    res["compile_pass_s"] = compile_s
    # Dynamo's own timer of every frame compile (tracing, Inductor, C++ build), wherever
    # it happened: a recompile during generation is counted too.
    timed = torch._dynamo.utils.compilation_time_metrics.get("_compile.compile_inner")
    res["compile_s"] = float(sum(timed)) if timed else compile_s
    res["graphs"] = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs0
    if mode == "regional":
        from ..regional import artifact_keys

        res["artifacts"] = [list(k) for k in artifact_keys()]
    res["rss_peak_kib"] = _rss_kib("VmHWM")
    if mode == "whole":
        res["routing"] = _whole_routing()
    if not spec.get("count"):
        torch.save(logits_all, out_dir / f"logits-{mode}.pt")
        if mode == "eager":
            torch.save(tokens_all, out_dir / "tokens-eager.pt")
    return res


def _whole_routing() -> dict:
    """Summarise the GEMM routing decisions Inductor logged while compiling this process's
    graphs (the log is shared by every process using the same Inductor cache)."""
    import os

    from ..inductor import paths

    rvv, fb = {}, {}
    log = paths.state_dir() / "routing.jsonl"
    if log.is_file():
        for line in log.read_text().splitlines():
            e = json.loads(line)
            if e.get("pid") != os.getpid():
                continue
            key = f"{e['op']} M={e['M']} N={e['N']} K={e['K']}"
            if e["route"] == "rvv":
                rvv[key] = rvv.get(key, 0) + 1
            else:
                fb[f"{key}: {e['reason']}"] = fb.get(f"{key}: {e['reason']}", 0) + 1
    return {"rvv": [f"{k} (x{n})" for k, n in sorted(rvv.items())],
            "fallback": [f"{k} (x{n})" for k, n in sorted(fb.items())]}


def main(argv: list[str]) -> int:
    """python3 -m rvv_inductor demo --worker MODE SPEC.json"""
    mode, spec_path = argv
    spec = json.loads(Path(spec_path).read_text())
    try:
        res = run(spec, mode)
    except models.DemoInputError as e:
        print(f"rvv_inductor demo: {e}", file=sys.stderr)
        return 3
    (Path(spec["out"]) / f"result-{mode}{'-count' if spec.get('count') else ''}.json").write_text(
        json.dumps(res, indent=1))
    return 0
