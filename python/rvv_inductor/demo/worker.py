"""One demo mode in its own process, so compile time and peak RSS belong to that mode
alone: build the model, prepare the mode, run every (batch, prompt) workload, save the
logits and the measurements.

The modes (``MODES``) are ``Mode`` subclasses: ``Eager`` (ATen), ``Regional``
(``compile_linears``, BF16), ``RegionalInt8``/``RegionalInt4`` (``compile_linears(weights=
"int8"/"int4")``, the default group size), ``LayersInt4`` (INT4 with ``compile_layers=True``:
each decoder layer one compiled region) and ``Whole`` (whole-model ``torch.compile``);
each supplies its own compile, warm-up and measure steps, and ``run`` does the rest the
same way for all. The llama.cpp modes (``LLAMACPP_MODES``) write the same weights as GGUF
and run llama.cpp's decode driver (``llamacpp.py``) instead: ``run_llamacpp``. The package
modes (``PACKAGE_MODES``) export the model's decode step as an AOTInductor package and run
it with ``rvv-generate`` (C++, no Python in the process): ``run_package``. The
``empty`` worker imports torch and transformers and builds nothing: its peak RSS is the
baseline the report subtracts from every mode's. The modes' names and traits, and the
region ids of the counting runs, are in ``modes.py`` (torch-free: the driver and the report
read them on the host).

Generation uses a transformers StaticCache (one per batch size, reset per workload), the
same in every mode. Greedy decoding in eager mode picks the tokens; the other modes are
teacher-forced with eager's tokens, so every step compares logits for the same input.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import torch
import transformers

from .. import _native, cpu, export, paths, reasons
from ..integration import enable
from ..policy import DEFAULT_GROUP_SIZE, K1_CORES, M_BUCKETS, prefill_chunk
from . import llamacpp, models
from .modes import (DECODE_LINEAR, DECODE_REST, EMPTY, GGUF_PACKAGE_MIXES, LLAMACPP_MODES, LLAMACPP_REGION,
                    MODES, PACKAGE_MODES, PREFILL_LINEAR, PREFILL_REST, PROMPT_LINEAR, PROMPT_REST, count_threads,
                    region_id, runner_times)
from .progress import worker_eta
from .progress_line import Progress

# The regional runtime and Inductor are imported where a mode uses them (each such import
# says why, "lazy"): they load our operator library and Inductor into the process, and the
# peak RSS of the eager and the empty worker, the baseline every mode's memory is reported
# over, must not include them.


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class RegionCounter:
    """Charges Linear calls and everything else to separate rvvcount regions. The plugin
    allows no nesting, so a Linear call ends the "rest" region and begins its own."""

    def __init__(self, model, hook_linears: bool) -> None:
        self._mark = _native.lib().rvv_count_region
        self.rest = self.linear = 0
        if hook_linears:
            from ..regional import RVVLinear  # lazy: loads our ops library; eager's RSS stays without it

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
    g = torch.Generator().manual_seed(spec["seed"] * 1000003 + b * 1009 + p)
    return torch.randint(0, spec["vocab_size"], (b, p), generator=g)


def _generate(model, decode, cache, prompt, steps, teacher, counter=None, bi=0):
    """Prefill, then `steps` decode steps. Returns logits [B, steps+1, V] (BF16), the
    tokens fed/chosen [B, steps+1], and wall times."""
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
        self.mode_name, self.spec, self.model, self.prog = mode_name, spec, model, prog
        self.decode = model.forward  # a mode's compile step may replace it
        self.teacher = None
        self.load = None  # for a meta-device model: where its weights come from (models.build_lazy)
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


def _first_steps(session: Session, what: str) -> dict:
    """(batch, prompt) -> (prefill s, first decode step s) of one step of every workload:
    the pass that compiles what the mode compiles lazily."""
    warm = {}
    for i, (b, p) in enumerate(session.workloads):
        session.prog.stage(f"{what}, workload {i + 1}/{len(session.workloads)} (batch {b}, prompt {p})")
        _, _, t_pre, st = session.generate(b, p, 1)
        warm[(b, p)] = (t_pre, st[0])
    return warm


def _record_linears(res: dict, rep) -> None:
    """What compile_linears reported: packed bytes and the layers taken and kept."""
    res["packed_bytes"] = rep.packed_bytes
    res["packed_param_bytes"] = rep.param_bytes
    res["routing"] = {"rvv": [f"{n} (N={nn} K={k})" for n, nn, k in rep.taken],
                      "fallback": [f"{n}: {why}" for n, why in rep.fell_back]}


def linear_weight_bytes(model) -> int:
    """Bytes of the Linear weights one decode step reads: each Linear's weight once, as it
    is stored (packed and quantized for RVVLinear/RVVQuantLinear, the [N, K] tensor for
    nn.Linear); a tied lm_head reads the embedding table."""
    from ..regional import RVVLinear  # lazy: loads our ops library; eager's RSS stays without it

    total = 0
    for m in model.modules():
        if isinstance(m, RVVLinear):
            total += m.packed_bytes
        elif isinstance(m, torch.nn.Linear):
            total += m.weight.numel() * m.weight.element_size()
    return total


class Mode:
    """One way of running the model (its traits: ``modes.MODES[name]``). ``run`` calls, in
    order: ``compile`` (make the model or its decode step fast), ``warm_up`` (trigger every
    compile before timing), the measured generation (the same for every mode), and
    ``measure`` (what only this mode reports)."""

    name = ""

    def __init__(self) -> None:
        self.traits = MODES[self.name]

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


class Regional(Mode):
    """rvv_inductor.compile_linears: only the Linear layers are compiled (RVV)."""

    name = "regional"

    def compile(self, session: Session, res: dict) -> None:
        from ..regional import compile_linears  # lazy: loads our ops library; eager's RSS stays without it

        session.prog.stage("regional: packing the Linear weights")
        _record_linears(res, compile_linears(session.model, load=session.load))

    def warm_up(self, session: Session) -> dict:
        # One step of every workload compiles every artifact (prefill and decode M buckets).
        warm = _first_steps(session, "regional: compiling + first run")
        _warm_long_prompt_buckets(session)
        return warm

    def measure(self, res: dict) -> None:
        from ..runtime import artifact_keys  # lazy: loads our ops library; eager's RSS stays without it

        res["artifacts"] = [list(k) for k in artifact_keys()]


class RegionalInt8(Regional):
    """compile_linears(weights="int8"): every admitted Linear quantized at load (round to
    nearest, FP16 scales, the default group size) and run by the quantized kernels."""

    name = "regional-int8"

    def compile(self, session: Session, res: dict) -> None:
        from ..regional import compile_linears  # lazy: loads our ops library; eager's RSS stays without it

        weights = self.traits.weights
        session.prog.stage(f"{self.name}: quantizing and packing the Linear weights ({weights})")
        rep = compile_linears(session.model, weights=weights, load=session.load,
                              compile_layers=self.traits.compile_layers)
        if self.traits.compile_layers:
            res["compiled_layers"] = len(rep.compiled_layers)
            res["rvv_attention"] = rep.rvv_attention
        _record_linears(res, rep)
        res["weights"] = weights
        # How the prompt's (M >= 2) Linear calls treat X, as they ran.
        res["activations"] = "int8" if rep.int8_activation_layers else "bf16"
        res["group_size"] = DEFAULT_GROUP_SIZE[weights]
        res["formats"] = [[n, f, pb, bb] for n, f, pb, bb in rep.formats]

    def warm_up(self, session: Session) -> dict:
        return {}  # the quantized Linear runs its C++ kernel directly: nothing to compile

    def measure(self, res: dict) -> None:
        pass


class RegionalInt4(RegionalInt8):
    name = "regional-int4"


class LayersInt4(RegionalInt4):
    """compile_linears(weights="int4", compile_layers=True): INT4 as regional-int4, and each
    decoder layer one compiled region around its packed Linear ops (layer_regions.py),
    attention through the RVV kernel. Not Linear-separable: the Linear calls run inside
    the compiled regions, where no hook can mark them. Its long prompt is counted as a
    whole, after uncounted runs until one compiles nothing (_count_long_prompt)."""

    name = "layers-int4"

    def warm_up(self, session: Session) -> dict:
        # Two passes: the first compiles each layer's prompt graph and, at the first decode
        # step, recompiles it with the sequence length dynamic (Dynamo's automatic dynamic
        # shapes); the second prompt compiles that dynamic graph for prompts. Only a third
        # pass, the measured one, runs without compiling (seen in the tiny demo).
        warm = _first_steps(session, f"{self.name}: compiling the layer regions + first run")
        again = _first_steps(session, f"{self.name}: compiling the dynamic-length prompt graphs")
        return {k: (warm[k][0] + again[k][0], warm[k][1] + again[k][1]) for k in warm}


class Whole(Mode):
    """torch.compile(model.forward, dynamic=False) with freezing and rvv_inductor enabled,
    as SGLang's CPU graph runner: the decode step is captured once per batch size;
    prefill runs the model without the graph."""

    name = "whole"

    def compile(self, session: Session, res: dict) -> None:
        import torch._inductor.config as icfg  # lazy: Inductor; eager's RSS stays without it

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


MODE_CLASSES = {m.name: m for m in (Eager, Regional, RegionalInt8, RegionalInt4, LayersInt4, Whole)}
PACKAGE_RUNNER_ENV = "RVV_GENERATE"  # path of the rvv-generate binary (scripts/demo builds it)


def run(spec: dict, mode_name: str) -> dict:
    """Build the model, run ``mode_name``'s steps and every workload; return the results
    (and save logits, and eager's tokens, for the report)."""
    mode = MODE_CLASSES[mode_name]()
    counting = bool(spec.get("count"))
    if counting:
        # Counting runs count every thread (the plugin charges all of them): the K1's 8
        # cores, so the estimate can use the busiest thread's measured work.
        torch.set_num_threads(spec.get("count_threads") or K1_CORES)
    elif spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    res: dict = {"mode": mode.name, "torch": torch.__version__, "threads": torch.get_num_threads(),
                 "packed_bytes": 0, "routing": {"rvv": [], "fallback": []}}
    res["omp_wait_policy"] = os.environ.get("OMP_WAIT_POLICY")
    stage = f"count:{mode.name}{spec.get('count_tag', '')}" if counting else f"measure:{mode.name}"
    prog = Progress(f"{mode.name}: building the model", stream=sys.stdout, eta=worker_eta(spec["out"], stage))
    t0 = time.perf_counter()
    lazy = models.build_lazy(spec) if mode.traits.lazy and not spec.get("no_lazy") else None
    model, load = lazy if lazy else (models.build(spec), None)
    res["lazy_build"] = load is not None
    res["build_s"] = time.perf_counter() - t0
    params = {id(p): p for p in model.parameters()}
    res["param_bytes"] = sum(p.numel() * p.element_size() for p in params.values())
    res["n_params"] = sum(p.numel() for p in params.values())
    res["rss_model_kib"] = _rss_kib("VmRSS")
    graphs0 = torch._dynamo.utils.counters["stats"]["unique_graphs"]

    session = Session(mode.name, spec, model, prog)
    session.load = load
    t0 = time.perf_counter()
    mode.compile(session, res)
    res["prepare_s"] = time.perf_counter() - t0
    if mode.traits.teacher_forced and not counting:
        # Counting runs compare no logits, so they decode greedily on their own and need
        # no eager run (their model may even be shallower, see --count-layers).
        session.teacher = torch.load(Path(spec["out"]) / "tokens-eager.pt")
    counter = RegionCounter(model, hook_linears=mode.traits.linear_separable) if counting else None
    with torch.no_grad():
        t0 = time.perf_counter()
        warm = mode.warm_up(session)
        res["first_pass_s"] = time.perf_counter() - t0
        logits, tokens, res["workloads"], res["compile_pass_s"] = _measured_pass(session, warm, counter)
        # eager's and whole's prompts are ATen's BF16 (whole runs its prompt eagerly).
        if counting and spec.get("count_prefill") and mode.name not in ("eager", "whole"):
            res["count_prefill"] = _count_long_prompt(session, counter, warm_first=mode.traits.compile_layers)
    prog.done()
    # Dynamo's own timer of every frame compile (tracing, Inductor, C++ build), wherever
    # it happened: a recompile during generation is counted too.
    timed = torch._dynamo.utils.compilation_time_metrics.get("_compile.compile_inner")
    res["compile_s"] = float(sum(timed)) if timed else res["compile_pass_s"]
    res["graphs"] = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs0
    mode.measure(res)
    res["weight_bytes_step"] = linear_weight_bytes(model)
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


WARM_PROMPT_RUNS = 3


def _count_long_prompt(session: Session, counter: RegionCounter, warm_first: bool = False) -> int:
    """One prefill of spec["count_prefill"] tokens at batch 1 (lm_head for the last token
    only, as a chat server computes it) in regions PROMPT_REST/PROMPT_LINEAR: the work of a
    user's time to first token. Its own StaticCache: the measured workloads' is shorter.
    ``warm_first`` (compiled layer regions): the prompt runs uncounted until a run compiles
    nothing (at most WARM_PROMPT_RUNS), because a new cache compiles the regions twice, as
    it would once in a server (seen on the tiny model: graphs 3 -> 4 -> 5 -> 5): its first
    prompt meets a new cache length, the second the cache initialised (Dynamo guards on
    its layers' lazy ``is_initialized``). A compile inside the counted prompt fails the
    run: the count would include it."""
    p = session.spec["count_prefill"]
    cache = transformers.StaticCache(config=session.model.config, max_cache_len=p + 1)
    ids = _workload_inputs(session.spec, 1, p)

    def prompt():
        cache.reset()
        session.model(input_ids=ids, past_key_values=cache, cache_position=torch.arange(p), use_cache=True,
                      logits_to_keep=1)

    def graphs() -> int:
        return torch._dynamo.utils.counters["stats"]["unique_graphs"]

    for i in range(WARM_PROMPT_RUNS if warm_first else 0):
        session.prog.stage(f"{session.mode_name}: compiling the {p}-token prompt's graphs, run {i + 1} (not counted)")
        before = graphs()
        prompt()
        if graphs() == before:
            break
    session.prog.stage(f"{session.mode_name}: counting a {p}-token prompt")
    before = graphs()
    counter.begin(PROMPT_REST, PROMPT_LINEAR)
    prompt()
    counter.end()
    if graphs() != before:
        raise RuntimeError(f"{session.mode_name}: the counted {p}-token prompt compiled a graph; its count would "
                           "include the compile")
    return p


def _warm_long_prompt_buckets(session: Session) -> None:
    """Compile (or find in the Inductor cache) the M bucket a long prompt's chunks run in,
    before anything is counted: one call of every distinct Linear shape (not lm_head: a
    prompt computes it for the last token only) with that many zero rows. Cheap next to
    running the prompt itself, which at 1.5B dimensions would take an hour emulated."""
    from ..regional import RVVLinear  # lazy: loads our ops library; eager's RSS stays without it

    p = session.spec.get("count_prefill") or 0
    if not p:
        return
    rows = min(p, M_BUCKETS[-1])
    lm_head = session.model.get_output_embeddings()
    seen = set()
    for m in session.model.modules():
        if isinstance(m, RVVLinear) and m is not lm_head:
            key = (m.in_features, m.out_features, m.bias is not None)
            if key not in seen:
                seen.add(key)
                m(torch.zeros(rows, m.in_features, dtype=torch.bfloat16))


def _whole_routing() -> dict:
    """Summarise the GEMM routing decisions Inductor logged while compiling this process's
    graphs (the log is shared by every process using the same Inductor cache)."""
    rvv, fb = {}, {}
    for e in reasons.read_log(paths.state_dir() / reasons.LOG_NAME, pid=os.getpid()):
        key = f"{e.op} M={e.M} N={e.N} K={e.K}"
        if e.route == "rvv":
            rvv[key] = rvv.get(key, 0) + 1
        else:
            fb[f"{key}: {e.reason}"] = fb.get(f"{key}: {e.reason}", 0) + 1
    return {"rvv": [f"{k} (x{n})" for k, n in sorted(rvv.items())],
            "fallback": [f"{k} (x{n})" for k, n in sorted(fb.items())]}


def run_empty(spec: dict) -> dict:
    """The baseline: what importing torch and transformers costs (and, emulated, QEMU)."""
    return {"mode": EMPTY, "torch": torch.__version__, "transformers": transformers.__version__,
            "rss_peak_kib": _rss_kib("VmHWM")}


def _batch1_workloads(spec: dict) -> list[tuple[int, int]]:
    """The (batch, prompt) workloads a one-sequence driver (llama.cpp, rvv-generate) runs."""
    return [(b, p) for b in spec["batches"] for p in spec["prompts"] if b == 1]


def _forced_inputs(spec: dict, eager_tokens: dict, b: int, p: int) -> tuple[list[int], list[int]]:
    """A driver's teacher-forced inputs for workload (b, p): the prompt's ids and eager's
    greedy tokens (steps + 1; decode step i feeds token i, so every position's logits
    compare with eager's for the same input)."""
    return [int(t) for t in _workload_inputs(spec, b, p)[0]], [int(t) for t in eager_tokens[(b, p)][0]]


def run_llamacpp(spec: dict, mode_name: str) -> dict:
    """llama.cpp on the demo's weights: write them as GGUF in the mode's format and run the
    decode driver on each batch-1 workload's prompt (one sequence per run). A missing
    llama.cpp (or driver, or llamacpp.py) is a result saying why, not a failure."""
    fmt = LLAMACPP_MODES[mode_name]
    out = Path(spec["out"])
    res: dict = {"mode": mode_name, "format": fmt, "workloads": [], "routing": {"rvv": [], "fallback": []},
                 "packed_bytes": 0, "compile_s": 0.0, "graphs": 0}
    why = llamacpp.unavailable(fmt)
    if why:
        res["unavailable"] = why
        return res
    counting = bool(spec.get("count"))
    if counting:
        raise models.DemoInputError(f"{mode_name}: the counting pass runs the driver itself (count-argv-*.json)")
    prog = Progress(f"{mode_name}: building the model", stream=sys.stdout,
                    eta=worker_eta(spec["out"], f"measure:{mode_name}"))
    model = models.build(spec)
    gguf_path = out / f"model-{fmt}.gguf"
    prog.stage(f"{mode_name}: writing the weights as GGUF ({fmt})")
    t0 = time.perf_counter()
    info = llamacpp.write_gguf(model, str(gguf_path), fmt)
    res["gguf_write_s"] = time.perf_counter() - t0
    res["gguf_file_bytes"] = int(info["file_bytes"])
    if "sha256" in info:  # a llama-quantize mix: which file, and llama.cpp's types for the Linears
        res["gguf_sha256"], res["linear_types"] = info["sha256"], info["linear_types"]
    res["weight_bytes_step"] = int(info["linear_weight_bytes"])
    res["param_bytes"] = sum(p.numel() * p.element_size() for p in {id(p): p for p in model.parameters()}.values())
    del model
    threads = spec.get("threads") or 1
    res["threads"] = threads
    eager_tokens = torch.load(out / "tokens-eager.pt")
    batch1 = _batch1_workloads(spec)
    if not batch1:
        res["unavailable"] = "llama.cpp runs one sequence: no batch-1 workload in this run"
    logits = {}
    for i, (b, p) in enumerate(batch1):
        prog.stage(f"{mode_name}: decoding, workload {i + 1}/{len(batch1)} (prompt {p}, {spec['steps']} steps, "
                   "teacher-forced with eager's tokens)")
        ids, ref = _forced_inputs(spec, eager_tokens, b, p)
        lpath = out / f"llamacpp-logits-{fmt}-{p}.f32"
        t0 = time.perf_counter()
        try:
            r = llamacpp.run(str(gguf_path), ids, spec["steps"], threads=threads, feed=ref[:spec["steps"]],
                             logits_path=str(lpath))
        except Exception as e:  # the driver failed: the row says so, the demo goes on
            res["unavailable"] = f"llama.cpp decode failed: {type(e).__name__}: {e}"
            break
        wall = time.perf_counter() - t0
        res["backend"] = r.get("ggml_cpu_so") or r.get("ggml_backend")
        res["ggml"] = {k: r.get(k) for k in ("ggml_cpu_so", "ggml_backend", "ggml_device", "ggml_features",
                                             "system_info")}
        steps_s = [float(x) for x in r.get("decode_step_s") or []]
        res["workloads"].append({"batch": b, "prompt": p, "wall_s": wall, "tokens": [int(t) for t in r["tokens"]],
                                 "prefill_s": float(r.get("prefill_s", 0.0)), "decode_step_s": steps_s,
                                 "decode_step_median_s": statistics.median(steps_s) if steps_s else 0.0,
                                 "load_s": r.get("load_s")})
        rows = torch.from_file(str(lpath), size=(p + spec["steps"]) * spec["vocab_size"], dtype=torch.float32)
        logits[(b, p)] = rows.view(1, p + spec["steps"], spec["vocab_size"])[:, p - 1:].clone()
        lpath.unlink()
    if logits:
        torch.save(logits, out / f"logits-{mode_name}.pt")
    prog.done()
    # The driver is a child process: its peak RSS (with the emulator's, when emulated).
    res["driver_rss_peak_kib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if "unavailable" not in res and spec.get("count_steps"):
        _write_llamacpp_count_runs(spec, mode_name, fmt, gguf_path, prog)
    return res


def _write_llamacpp_count_runs(spec: dict, mode_name: str, fmt: str, gguf_path: Path, prog) -> None:
    """count-argv-MODE.json: the driver runs the counting pass (scripts/demo) makes under
    the rvvcount plugin, without Python, each at every count_threads(): a decode run (the
    counting prompt, then count_steps decode tokens in region LLAMACPP_REGION), and a long
    prompt (spec "count_prefill" tokens in region PREFILL_REST, no decode step). With
    --count-layers the long prompt is counted on GGUF files of those depths (written here
    from shallower models with the same dimensions) and extrapolated, like the torch modes:
    at full 1.5B depth one 512-token prompt is ~0.8 T instructions, days under the plugin."""
    out = Path(spec["out"])
    cp = spec["count_prompt"]
    ids = [int(t) for t in _workload_inputs(spec, 1, cp)[0]]
    runs = []
    long_p = spec.get("count_prefill") or 0
    depths = [(r["layers"], f"-L{r['layers']}") for r in spec.get("count_runs") or []]
    files = {}
    if long_p and depths and fmt != "bf16":
        for layers, tag in depths:
            prog.stage(f"{mode_name}: writing a {layers}-layer GGUF ({fmt}) for the long-prompt count")
            shallow = models.build(models.at_depth(spec, layers))
            files[tag] = out / f"model-{fmt}{tag}.gguf"
            llamacpp.write_gguf(shallow, str(files[tag]), fmt)
            del shallow
    if fmt == "bf16":
        # ggml has no RVV kernel for BF16 (~12 instructions per weight, counted): a 512-token
        # prompt at one 1.5B layer alone would be ~0.3 T instructions, hours under the plugin.
        long_p, files = 0, {}
    long_ids = [int(t) for t in _workload_inputs(spec, 1, long_p)[0]] if long_p else []
    for t in count_threads(spec, mode_name):
        argv = llamacpp.decode_argv(str(gguf_path), ids, spec["count_steps"], t, LLAMACPP_REGION)
        runs.append({"tag": f"-t{t}", "kind": "decode", "threads": t, "argv": [str(x) for x in argv], "prompt": cp,
                     "steps": spec["count_steps"], "region": LLAMACPP_REGION})
        if long_p:
            for tag, path in (files.items() if files else [("", gguf_path)]):
                argv = llamacpp.decode_argv(str(path), long_ids, 0, t, LLAMACPP_REGION,
                                            prefill_region=PREFILL_REST)
                runs.append({"tag": f"-prompt-t{t}{tag}", "kind": "prompt", "threads": t, "layers_tag": tag,
                             "argv": [str(x) for x in argv], "prompt": long_p, "steps": 0,
                             "prefill_region": PREFILL_REST})
    (out / f"count-argv-{mode_name}.json").write_text(json.dumps({"runs": runs}, indent=1))


def _package_weight_bytes(model, weights: str, file_weights: dict | None = None) -> int:
    """Bytes of the Linear weights one decode step of the package reads: what export's gate
    admits in ``weights`` (packed as compile_linears packs that format, which is what the
    frozen compile stores; a GGUF file's layers as packed from its blocks), the rest as BF16."""
    from .. import regional  # lazy: loads our ops library; eager's RSS stays without it

    gate = export._parse_gate(export.DEFAULT_GATE)
    nb = cpu.effective().block_n
    total = 0
    for m in model.modules():
        if not isinstance(m, torch.nn.Linear):
            continue
        admitted = gate.check(1, m.out_features, m.in_features) is None
        fw = (file_weights or {}).get(m.weight.data_ptr())
        if admitted and fw is not None:
            total += fw.layout.bytes
        elif admitted and weights not in ("bf16", export.FILE_WEIGHTS):
            total += regional.RVVQuantLinear.from_linear(m, nb, weights, DEFAULT_GROUP_SIZE[weights]).packed_bytes
        else:
            total += m.weight.numel() * m.weight.element_size()
    return total


def _package_routing(package: Path) -> dict:
    """The export compile's routing decisions (extra/routing.jsonl in the package)."""
    rvv, fb = {}, {}
    with zipfile.ZipFile(package) as z:
        name = next((n for n in z.namelist() if n.endswith("extra/" + export.ROUTING_FILE)), None)
        lines = z.read(name).decode(errors="replace").splitlines() if name else []
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        key = f"{e['op']} M={e['M']} N={e['N']} K={e['K']} {e.get('dtype', '')}".rstrip()
        if e["route"] == "rvv":
            rvv[key] = rvv.get(key, 0) + 1
        else:
            k = f"{key}: {e.get('reason', '')}"
            fb[k] = fb.get(k, 0) + 1
    return {"rvv": [f"{k} (x{n})" for k, n in sorted(rvv.items())],
            "fallback": [f"{k} (x{n})" for k, n in sorted(fb.items())]}


REUSE_PACKAGE_ENV = "RVV_DEMO_REUSE_PACKAGE"


def _reused_package(pkg: Path, weights: str, cache: int, chunk: int) -> dict | None:
    """With RVV_DEMO_REUSE_PACKAGE=1, the package a previous run of this mode exported (a
    28-layer export is about an hour of emulated compiling), when its metadata says it is
    the same export: weights, cache length, prefill chunk. Else None: export again."""
    if os.environ.get(REUSE_PACKAGE_ENV) != "1" or not pkg.is_file():
        return None
    meta = export.read_meta(str(pkg))
    same = (meta.get("weights"), meta.get("max_cache_len"), meta.get("prefill_chunk")) == (weights, cache, chunk)
    return meta if same else None


def _export_package(spec: dict, mode_name: str, pkg: Path, cache: int, prog, tag: str = "") -> dict:
    """Build spec's model and export it as mode_name's package at ``pkg``: {"meta" (the
    package's), "model" and "file_weights" (what was exported), "export_weights",
    "param_bytes", "n_params", and for a GGUF mix "gguf_sha256", "linear_types",
    "gguf_file_bytes"}, or {"unavailable": why}. ``tag`` names a shallower model's files (-L1)."""
    weights = PACKAGE_MODES[mode_name]
    depth = f", {spec['config']['num_hidden_layers']} layers" if tag else ""  # a checkpoint has no config
    model = models.build(spec)
    params = {id(p): p for p in model.parameters()}
    got: dict = {"param_bytes": sum(p.numel() * p.element_size() for p in params.values()),
                 "n_params": sum(p.numel() for p in params.values())}
    del params
    file_weights, export_weights = None, weights
    if weights in GGUF_PACKAGE_MIXES:
        # llama-quantize's file of these weights (the llama.cpp mode makes the same bytes:
        # the report compares the sha256), exported with each layer in the file's format.
        prog.stage(f"{mode_name}: writing the weights as GGUF and running llama-quantize ({weights}{depth})")
        why = llamacpp.unavailable(weights)
        if why:
            return {"unavailable": why}
        info = llamacpp.write_gguf(model, str(pkg.parent / f"package-model-{weights}{tag}.gguf"), weights)
        got.update(gguf_sha256=info["sha256"], linear_types=info["linear_types"],
                   gguf_file_bytes=int(info["file_bytes"]))
        del model
        model, file_weights = export.load_model(info["path"], keep_file_formats=True)
        export_weights = export.FILE_WEIGHTS
    prog.stage(f"{mode_name}: export + AOTInductor compile ({weights}{depth})")
    # Partitioned for the K1's cores (export --threads): the counting run uses them all;
    # any thread count computes the same result.
    # The package's own prefill chunk (policy.prefill_chunk; a file's formats: the largest of
    # theirs); a prompt shorter than it runs as one padded call. --quick (CI) leaves the
    # prefill model out: its compile would double the export (test_export tests it).
    if spec.get("quick"):
        chunk = 0
    elif file_weights is not None:
        chunk = min(export._file_prefill_chunk(file_weights.values(), "auto"), cache)
    else:
        chunk = min(prefill_chunk(weights), cache)
    meta = _reused_package(pkg, export_weights, cache, chunk if chunk >= 2 else 0)
    if meta is None:
        meta = export.export(model, str(pkg), weights=export_weights, max_cache_len=cache, threads=K1_CORES,
                             prefill_chunk=chunk if chunk >= 2 else 0, file_weights=file_weights)
    return dict(got, meta=meta, model=model, file_weights=file_weights, export_weights=export_weights)


def _write_package_count_runs(spec: dict, mode_name: str, runner: str, pkg: Path, prog) -> None:
    """count-argv-MODE.json: the rvv-generate runs the counting pass (scripts/demo) makes
    under the rvvcount plugin, without Python, at every count_threads() (every thread
    counted): the counting prompt (its prefill in PREFILL_REST: the prefill model's chunks,
    or the decode step per token) then every decode step in LLAMACPP_REGION, on ``pkg``;
    and the long prompt alone (count_prefill tokens, whose first token is the time to first
    token). With --count-layers the long prompt runs on packages of those depths (exported
    here from shallower models of the same dimensions, a GGUF mix through llama-quantize
    as at full depth) and is extrapolated, like the torch modes and llama.cpp: at full
    1.5B depth one 512-token prompt is ~95 G instructions, about an hour and a half under
    the plugin, and a 28-layer export another hour."""
    out = Path(spec["out"])
    long_p = spec.get("count_prefill") or 0
    prompt_pkgs = {"": pkg}
    if long_p and spec.get("count_runs"):
        prompt_pkgs = {}
        for r in spec["count_runs"]:
            tag, shallow = r["tag"], models.at_depth(spec, r["layers"])
            prompt_pkgs[tag] = out / f"model-{mode_name}{tag}.pt2"
            got = _export_package(shallow, mode_name, prompt_pkgs[tag], long_p + 2, prog, tag)
            if "unavailable" in got:
                raise RuntimeError(f"{mode_name}: the {r['layers']}-layer package: {got['unavailable']}")
            del got
    runs = []
    for t in count_threads(spec, mode_name):
        for kind, p, steps, pkgs in (("decode", spec["count_prompt"], spec["count_steps"], {"": pkg}),
                                     ("prompt", long_p, 0, prompt_pkgs)):
            if not p:
                continue
            ids = [int(x) for x in _workload_inputs(spec, 1, p)[0]]
            for tag, path in pkgs.items():
                argv = [runner, str(path), "--prompt-ids", ",".join(map(str, ids)), "--max-new-tokens",
                        str(steps + 1), "--ignore-eos", "--region", str(LLAMACPP_REGION), "--prefill-region",
                        str(PREFILL_REST), "--threads", str(t)]
                runs.append({"tag": (f"-t{t}" if kind == "decode" else f"-prompt-t{t}") + tag, "kind": kind,
                             "threads": t, "argv": argv, "prompt": p, "steps": steps, "region": LLAMACPP_REGION,
                             "prefill_region": PREFILL_REST, "layers_tag": tag})
    (out / f"count-argv-{mode_name}.json").write_text(json.dumps({"runs": runs}, indent=1))


def run_package(spec: dict, mode_name: str) -> dict:
    """The decode and prefill steps exported once as an AOTInductor package (``export.export``, under
    rvv_inductor with freezing: every admitted projection on our kernels, attention on our
    decode kernel), then each batch-1 workload run by ``rvv-generate`` (C++, no Python),
    teacher-forced with eager's tokens (--feed-ids), its logits dumped for the comparison.
    Without the runner the result says why, as for llama.cpp."""
    weights = PACKAGE_MODES[mode_name]
    out = Path(spec["out"])
    res: dict = {"mode": mode_name, "weights": weights, "workloads": [], "routing": {"rvv": [], "fallback": []},
                 "packed_bytes": 0, "compile_s": 0.0, "graphs": 0}
    runner = os.environ.get(PACKAGE_RUNNER_ENV, "")
    if not runner or not Path(runner).is_file():
        res["unavailable"] = (f"rvv-generate is not built ({PACKAGE_RUNNER_ENV} "
                              + (f"names {runner}, which does not exist" if runner else "is not set")
                              + "; scripts/demo builds it in build/bench-rv64 against the root filesystem's libtorch)")
        return res
    if spec.get("count"):
        raise models.DemoInputError(f"{mode_name}: the counting pass runs rvv-generate itself (count-argv-*.json)")
    batch1 = _batch1_workloads(spec)
    if not batch1:
        res["unavailable"] = "rvv-generate runs one sequence: no batch-1 workload in this run"
        return res
    prog = Progress(f"{mode_name}: building the model", stream=sys.stdout,
                    eta=worker_eta(spec["out"], f"measure:{mode_name}"))
    # The cache holds the longest measured workload, the counting run's prompt + steps, and
    # the long prompt unless --count-layers runs it on shallow packages of their own.
    long_p = 0 if spec.get("count_runs") else (spec.get("count_prefill") or 0)
    cache = max(max(p for _, p in batch1) + spec["steps"], spec["count_prompt"] + spec["count_steps"],
                long_p + 1) + 1
    pkg = out / f"model-{mode_name}.pt2"
    exported = _export_package(spec, mode_name, pkg, cache, prog)
    if "unavailable" in exported:
        res["unavailable"] = exported["unavailable"]
        return res
    meta, model, file_weights, export_weights = (exported.pop(k) for k in ("meta", "model", "file_weights",
                                                                           "export_weights"))
    res.update(exported)
    res["compile_s"] = float(meta["export_s"]) + float(meta["compile_s"])
    res["graphs"] = 2 if meta["prefill_chunk"] else 1
    res["prefill_chunk"] = meta["prefill_chunk"]
    res["package_file_bytes"] = pkg.stat().st_size
    res["routing"] = _package_routing(pkg)
    res["weight_bytes_step"] = _package_weight_bytes(model, export_weights, file_weights)
    res["max_cache_len"] = cache
    if file_weights is not None:
        res["file_formats"] = meta.get("file_formats")
    del model, file_weights
    threads = spec.get("threads") or 1
    res["threads"] = threads
    eager_tokens = torch.load(out / "tokens-eager.pt")
    logits = {}
    for i, (b, p) in enumerate(batch1):
        prog.stage(f"{mode_name}: rvv-generate, workload {i + 1}/{len(batch1)} (prompt {p}, {spec['steps']} steps, "
                   "teacher-forced with eager's tokens)")
        ids, ref = _forced_inputs(spec, eager_tokens, b, p)
        lpath = out / f"package-logits-{mode_name}-{p}.f32"
        argv = [runner, str(pkg), "--prompt-ids", ",".join(map(str, ids)), "--feed-ids",
                ",".join(map(str, ref[:spec["steps"]])), "--dump-logits", str(lpath), "--threads", str(threads)]
        t0 = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError(f"rvv-generate failed (exit {r.returncode}): {r.stderr.strip()[-500:]}")
        t = runner_times(r.stdout)
        res["workloads"].append({"batch": b, "prompt": p, "wall_s": wall, "tokens": t.get("tokens", []),
                                 "prefill_s": t.get("prefill_s", 0.0), "load_s": t.get("load_s"),
                                 "decode_step_s": [t.get("decode_s_per_token", 0.0)] * spec["steps"],
                                 "decode_step_median_s": t.get("decode_s_per_token", 0.0)})
        rows = torch.from_file(str(lpath), size=(spec["steps"] + 1) * spec["vocab_size"], dtype=torch.float32)
        logits[(b, p)] = rows.view(1, spec["steps"] + 1, spec["vocab_size"]).clone()
        lpath.unlink()
    torch.save(logits, out / f"logits-{mode_name}.pt")
    prog.done()
    res["rss_peak_kib"] = _rss_kib("VmHWM")  # the export and compile, in this process
    res["runner_rss_peak_kib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if spec.get("count_steps"):
        _write_package_count_runs(spec, mode_name, runner, pkg, prog)
    return res


def main(argv: list[str]) -> int:
    """python3 -m rvv_inductor demo --worker MODE SPEC.json (the demo's ``main`` sets
    OMP_WAIT_POLICY first: before this module loads torch)"""
    mode, spec_path = argv
    spec = json.loads(Path(spec_path).read_text())
    try:
        if mode == EMPTY:
            res = run_empty(spec)
        elif mode in LLAMACPP_MODES:
            res = run_llamacpp(spec, mode)
        elif mode in PACKAGE_MODES:
            res = run_package(spec, mode)
        else:
            res = run(spec, mode)
            from .. import ops  # lazy: torch; the llama.cpp workers never load it (the report names the kernels)

            res["operator_kernels"] = ops.kernels()
    except models.DemoInputError as e:
        print(f"rvv_inductor demo: {e}", file=sys.stderr)
        return models.EXIT_BAD_INPUT
    (Path(spec["out"]) / f"result-{mode}{'-count' if spec.get('count') else ''}.json").write_text(
        json.dumps(res, indent=1))
    return 0
