"""One demo mode in its own process, so compile time and peak RSS belong to that mode
alone: build the model, prepare the mode, run every (batch, prompt) workload, save the
logits and the measurements.

The modes (``MODES``) are ``Mode`` subclasses: ``Eager`` (ATen), ``Regional``
(``compile_linears``) and ``Whole`` (whole-model ``torch.compile``); each supplies its
own compile, warm-up and measure steps, and ``run`` does the rest the same way for all.

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

# rvvcount region ids (csrc/rvv_inductor/markers.h) used by counting runs: one per kind
# and batch size; rvv_count_region takes ids 1..16, so at most four batch sizes are counted.
DECODE_REST, DECODE_LINEAR, PREFILL_REST, PREFILL_LINEAR = 1, 2, 3, 4
REGION_KINDS = 4
MAX_COUNTED_BATCHES = 16 // REGION_KINDS


def region_id(kind: int, batch_index: int) -> int:
    """The rvvcount region of ``kind`` (DECODE_REST, ...) for the batch_index-th batch size."""
    return kind + REGION_KINDS * batch_index


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


class Session:
    """The model of one worker process and how to generate with it: one StaticCache per
    batch size, the workloads' prompts, and eager's tokens for teacher forcing."""

    def __init__(self, mode_name: str, spec: dict, model, prog: Progress) -> None:
        import transformers

        self.mode_name, self.spec, self.model, self.prog = mode_name, spec, model, prog
        self.decode = model.forward  # a mode's compile step may replace it
        self.teacher = None
        max_len = max(spec["prompts"]) + spec["steps"] + 1
        self.caches = {b: transformers.StaticCache(config=model.config, max_cache_len=max_len)
                       for b in spec["batches"]}
        self.workloads = [(b, p) for b in spec["batches"] for p in spec["prompts"]]

    def generate(self, b: int, p: int, steps: int, forced: bool = True, counter=None):
        """_generate on workload (b, p), teacher-forced with eager's tokens when loaded."""
        teacher = self.teacher[(b, p)] if forced and self.teacher is not None else None
        bi = self.spec["batches"].index(b)
        return _generate(self.model, self.decode, self.caches[b], _workload_inputs(self.spec, b, p), steps,
                         teacher, counter, bi)


class Mode:
    """One way of running the model. ``run`` calls, in order: ``compile`` (make the model
    or its decode step fast), ``warm_up`` (trigger every compile before timing), the
    measured generation (the same for every mode), and ``measure`` (what only this mode
    reports)."""

    name = ""
    teacher_forced = True     # compares logits for eager's tokens (eager picks them greedily)
    linear_separable = True   # a counting run can charge Linear calls to their own region

    def compile(self, session: Session, res: dict) -> None:
        pass

    def warm_up(self, session: Session) -> dict:
        """(batch, prompt) -> (prefill s, first decode step s) of a pass that compiled;
        ``run`` subtracts the same work run warm to estimate the compile time."""
        return {}

    def measure(self, res: dict) -> None:
        pass


class Eager(Mode):
    """ATen, what users have today."""

    name = "eager"
    teacher_forced = False


class Regional(Mode):
    """rvv_inductor.compile_linears: only the Linear layers are compiled (RVV)."""

    name = "regional"

    def compile(self, session: Session, res: dict) -> None:
        from ..regional import compile_linears

        session.prog.stage("regional: packing the Linear weights")
        rep = compile_linears(session.model)
        res["packed_bytes"] = rep.packed_bytes
        res["packed_param_bytes"] = rep.param_bytes
        res["routing"] = {"rvv": [f"{n} (N={nn} K={k})" for n, nn, k in rep.taken],
                          "fallback": [f"{n}: {why}" for n, why in rep.fell_back]}

    def warm_up(self, session: Session) -> dict:
        # One step of every workload compiles every artifact (prefill and decode M buckets).
        warm = {}
        for i, (b, p) in enumerate(session.workloads):
            session.prog.stage(f"regional: compiling + first run, workload {i + 1}/{len(session.workloads)} "
                               f"(batch {b}, prompt {p})")
            _, _, t_pre, st = session.generate(b, p, 1)
            warm[(b, p)] = (t_pre, st[0])
        return warm

    def measure(self, res: dict) -> None:
        from ..runtime import artifact_keys

        res["artifacts"] = [list(k) for k in artifact_keys()]


class Whole(Mode):
    """torch.compile(model.forward, dynamic=False) with freezing and rvv_inductor enabled,
    as SGLang's CPU graph runner: the decode step is captured once per batch size;
    prefill runs the model without the graph."""

    name = "whole"
    linear_separable = False  # one graph: Linear and the rest cannot be told apart

    def compile(self, session: Session, res: dict) -> None:
        import torch
        import torch._inductor.config as icfg

        from ..integration import enable

        enable()
        icfg.freezing = True
        session.decode = torch.compile(session.model.forward, dynamic=False)

    def warm_up(self, session: Session) -> dict:
        # Only the decode step is compiled (once per batch size); prefill runs eagerly, so a
        # one-token prompt is enough to get there. The compile is charged to the first
        # workload of each batch size.
        warm = {}
        batches = session.spec["batches"]
        for i, b in enumerate(batches):
            session.prog.stage(f"whole: compiling the decode graph, batch size {i + 1}/{len(batches)} ({b})")
            _, _, _, st = session.generate(b, 1, 1, forced=False)
            warm[(b, session.spec["prompts"][0])] = (0.0, st[0])
        return warm

    def measure(self, res: dict) -> None:
        res["routing"] = _whole_routing()


MODES = {m.name: m for m in (Eager, Regional, Whole)}


def run(spec: dict, mode_name: str) -> dict:
    """Build the model, run ``mode_name``'s steps and every workload; return the results
    (and save logits, and eager's tokens, for the report)."""
    import torch

    mode = MODES[mode_name]()
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    res: dict = {"mode": mode.name, "torch": torch.__version__, "threads": torch.get_num_threads(),
                 "packed_bytes": 0, "routing": {"rvv": [], "fallback": []}}
    prog = Progress(f"{mode.name}: building the model", stream=sys.stdout)
    t0 = time.perf_counter()
    model = models.build(spec)
    res["build_s"] = time.perf_counter() - t0
    params = {id(p): p for p in model.parameters()}
    res["param_bytes"] = sum(p.numel() * p.element_size() for p in params.values())
    res["n_params"] = sum(p.numel() for p in params.values())
    res["rss_model_kib"] = _rss_kib("VmRSS")
    graphs0 = torch._dynamo.utils.counters["stats"]["unique_graphs"]

    session = Session(mode.name, spec, model, prog)
    t0 = time.perf_counter()
    mode.compile(session, res)
    res["prepare_s"] = time.perf_counter() - t0
    counting = bool(spec.get("count"))
    if mode.teacher_forced and not counting:
        # Counting runs compare no logits, so they decode greedily on their own and need
        # no eager run (their model may even be shallower, see --count-layers).
        session.teacher = torch.load(Path(spec["out"]) / "tokens-eager.pt")
    counter = RegionCounter(model, hook_linears=mode.linear_separable) if counting else None
    with torch.no_grad():
        t0 = time.perf_counter()
        warm = mode.warm_up(session)
        res["first_pass_s"] = time.perf_counter() - t0
        logits, tokens, res["workloads"], res["compile_pass_s"] = _measured_pass(session, warm, counter)
    prog.done()
    # Dynamo's own timer of every frame compile (tracing, Inductor, C++ build), wherever
    # it happened: a recompile during generation is counted too.
    timed = torch._dynamo.utils.compilation_time_metrics.get("_compile.compile_inner")
    res["compile_s"] = float(sum(timed)) if timed else res["compile_pass_s"]
    res["graphs"] = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs0
    mode.measure(res)
    res["rss_peak_kib"] = _rss_kib("VmHWM")
    if not counting:
        torch.save(logits, Path(spec["out"]) / f"logits-{mode.name}.pt")
        if mode.name == "eager":
            torch.save(tokens, Path(spec["out"]) / "tokens-eager.pt")
    return res


def _measured_pass(session: Session, warm: dict, counter):
    """Every workload with the configured decode steps. Returns logits and tokens per
    workload, the timings, and the compile time estimated from the warm-up pass: what it
    took beyond the same work run warm."""
    spec = session.spec
    logits, tokens, timings, compile_s = {}, {}, [], 0.0
    for i, (b, p) in enumerate(session.workloads):
        session.prog.stage(f"{session.mode_name}: generating, workload {i + 1}/{len(session.workloads)} "
                           f"(batch {b}, prompt {p}, {spec['steps']} decode steps)")
        lg, tk, t_pre, steps = session.generate(b, p, spec["steps"], counter=counter)
        logits[(b, p)], tokens[(b, p)] = lg, tk
        med = statistics.median(steps) if steps else 0.0
        if (b, p) in warm:
            compile_s += max(warm[(b, p)][0] - t_pre, 0.0) + max(warm[(b, p)][1] - med, 0.0)
        timings.append({"batch": b, "prompt": p, "prefill_s": t_pre, "decode_step_s": steps,
                        "decode_step_median_s": med})
    return logits, tokens, timings, compile_s


def _whole_routing() -> dict:
    """Summarise the GEMM routing decisions Inductor logged while compiling this process's
    graphs (the log is shared by every process using the same Inductor cache)."""
    import os

    from .. import reasons
    from ..inductor import paths

    rvv, fb = {}, {}
    for e in reasons.read_log(paths.state_dir() / reasons.LOG_NAME, pid=os.getpid()):
        key = f"{e.op} M={e.M} N={e.N} K={e.K}"
        if e.route == "rvv":
            rvv[key] = rvv.get(key, 0) + 1
        else:
            fb[f"{key}: {e.reason}"] = fb.get(f"{key}: {e.reason}", 0) + 1
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
        return models.EXIT_BAD_INPUT
    (Path(spec["out"]) / f"result-{mode}{'-count' if spec.get('count') else ''}.json").write_text(
        json.dumps(res, indent=1))
    return 0
