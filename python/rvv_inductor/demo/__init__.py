"""``python3 -m rvv_inductor demo``: a Qwen2-architecture decoder (transformers) run side
by side -- eager ATen, regional RVV (compile_linears) in BF16, INT8 and INT4, whole-model
torch.compile with freezing, and llama.cpp on the same weights written as GGUF (Q8_0,
Q4_0) -- over batch sizes and prompt lengths, with a report of compile time, artifacts,
memory, agreement with eager, weight bytes per token, layer routing and (with counts from
the rvvcount QEMU plugin, see scripts/demo) an estimated K1 throughput.

Each mode runs in its own process (worker.py) so its compile time and peak RSS are its
own; this process only plans, checks input, and writes the report (report.py), with the
modes' torch-free tables (modes.py): it imports no torch.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
import sys
import time
from pathlib import Path

from ..policy import K1_CORES
from . import models, modes, report
from .progress import Plan, expected_seconds

# eager first: the other modes compare with its results
MODES = tuple(modes.MODES) + tuple(modes.LLAMACPP_MODES) + tuple(modes.PACKAGE_MODES)
# The default run includes the INT4 AOTInductor package (beside llama.cpp Q4_0: the two
# programs without Python); --full adds the BF16 one (each export compiles the decode and
# prefill steps with g++ under emulation: minutes even for the tiny model).
DEFAULT_MODES = ("eager", "regional", "regional-int8", "regional-int4", "whole", "llama.cpp-q8_0", "llama.cpp-q4_0",
                 "package-int4")
# --full also runs llama-quantize's Q4_K_M file, through llama.cpp and through our package
# of the same file (each layer in the file's format).
FULL_MODES = DEFAULT_MODES + ("package", "llama.cpp-q4_k_m", "package-q4_k_m")
# The CI smoke test takes each code path once (INT8 runs INT4's, in another format), to
# stay near its ~12-minute budget.
QUICK_MODES = ("eager", "regional", "regional-int4", "whole", "llama.cpp-q4_0", "package")
# The default workload fits the 20-minute budget of a first run on a 2-core machine
# (counts included); --full is the long run (the small config over several workloads).
# The measuring pass runs the K1's 8 threads (idle ones sleep: OMP_WAIT_POLICY=passive)
# and counts at its shortest prompt: the counting runs (8 threads, every thread counted)
# then find the regional artifacts in the Inductor cache (its key holds the thread count,
# the prompt sets the M buckets) instead of compiling them again under the plugin, which
# took 13 of the default run's 22.6 minutes. --quick (CI, not counted) keeps one thread.
# count_prefill: the long prompt counted for the time to first token (batch 1, regional
# modes, the package and llama.cpp), as llama-bench's pp512.
DEFAULT = dict(config="tiny", batch=[1], prompt=[16], steps=4, count_steps=1, count_prompt=0, threads=K1_CORES,
               count_prefill=512)
FULL = dict(config="small", batch=[1, 2, 4], prompt=[32, 128], steps=8, count_steps=2, count_prompt=0,
            threads=K1_CORES, count_prefill=512)
QUICK = dict(config="tiny", batch=[1], prompt=[8], steps=3, count_steps=1, count_prompt=0, threads=1,
             count_prefill=0)


def _ints(s: str) -> list[int]:
    try:
        v = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None
    if not v or min(v) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {s!r}")
    return v


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m rvv_inductor demo", description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group()
    src.add_argument("--config", default=None, choices=list(models.CONFIGS),
                     help="model dimensions, random weights with a fixed seed (default: tiny; --full: small)")
    src.add_argument("--model", metavar="DIR", help="local Hugging Face checkpoint (config.json + *.safetensors)")
    p.add_argument("--layers", type=int, help="override the number of decoder layers")
    p.add_argument("--batch", type=_ints, help="concurrent sequences (default 1; --full: 1,2,4)")
    p.add_argument("--prompt", type=_ints, help="prompt lengths (default 16; --full: 32,128)")
    p.add_argument("--steps", type=int, help="decode steps per workload (default 4; --full: 8)")
    p.add_argument("--modes", help=f"subset of {','.join(MODES)} (default: {','.join(DEFAULT_MODES)}; --full: "
                   f"also package; --quick: {','.join(QUICK_MODES)}; eager is always run)")
    p.add_argument("--full", action="store_true",
                   help="the long run: --config small, batch 1,2,4, prompt 32,128, 8 decode steps, 2 counted "
                        "steps (hours under emulation)")
    p.add_argument("--quick", action="store_true",
                   help="CI smoke test: tiny model, batch 1, prompt 8, 3 steps, all modes, agreement enforced")
    p.add_argument("--out", default="build/demo", help="report directory (default build/demo)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, help=f"torch threads of the measuring pass (default {K1_CORES}, the K1's cores, "
                   "which the counting pass uses: with another count it compiles the regional artifacts again; "
                   "--quick: 1)")
    p.add_argument("--keep-cache", action="store_true",
                   help="reuse the Inductor cache of a previous run (compile times are then warm)")
    p.add_argument("--count-steps", type=int, help="decode steps in the counting runs (scripts/demo; default 1, "
                   "--full 2)")
    p.add_argument("--count-prompt", type=int,
                   help="prompt length in the counting runs (default 8; --full: the shortest --prompt)")
    p.add_argument("--count-prefill", type=int, metavar="P",
                   help="the long prompt counted for the time to first token (batch 1; regional modes, package, "
                        "llama.cpp; default 512, --quick: 0 = none)")
    p.add_argument("--count-layers", type=_ints, metavar="A,B",
                   help="count at A and B decoder layers (same dimensions) and extrapolate linearly to the "
                        "model's depth; for deep --config models whose full-depth counting would take hours "
                        "under emulation")
    p.add_argument("--measure-jobs", type=int,
                   help="mode workers run at once after eager (default 2 for models under 200M parameters, "
                        "else 1: each worker holds its own copy of the model). Compile and wall times are then "
                        "measured while another mode shares the cores; the report says so")
    p.add_argument("--report-only", action="store_true", help="rewrite the report from OUT's results")
    # Passed by scripts/demo so the progress estimate includes its counting pass.
    p.add_argument("--count-jobs", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--count-modes", default="", help=argparse.SUPPRESS)
    return p


def make_spec(a) -> dict:
    if a.quick and a.full:
        raise models.DemoInputError("--quick and --full contradict each other")
    preset = QUICK if a.quick else FULL if a.full else DEFAULT
    if a.quick:  # the smoke test's workload is fixed
        a.batch = a.prompt = a.steps = None
    if a.model is None:
        a.config = a.config or preset["config"]
    for k in ("batch", "prompt", "steps", "count_steps", "count_prompt", "threads", "count_prefill"):
        if getattr(a, k) is None:
            setattr(a, k, preset[k])
    if a.steps < 1 or a.count_steps < 1 or a.count_prompt < 0 or a.count_prefill < 0:
        raise models.DemoInputError("--steps and --count-steps must be >= 1, --count-prompt and --count-prefill >= 0")
    if a.layers is not None and a.layers < 1:
        raise models.DemoInputError("--layers must be >= 1")
    if a.modes is None:
        a.modes = ",".join(QUICK_MODES if a.quick else FULL_MODES if a.full else DEFAULT_MODES)
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise models.DemoInputError(f"unknown mode(s) {', '.join(bad)}; choose from {', '.join(MODES)}")
    modes = ["eager"] + [m for m in MODES[1:] if m in modes]
    spec = {"seed": a.seed, "batches": a.batch, "prompts": a.prompt, "steps": a.steps, "modes": modes,
            "threads": a.threads, "quick": a.quick, "full": a.full, "out": str(Path(a.out).resolve()),
            "count_steps": a.count_steps, "count_prompt": a.count_prompt or min(a.prompt),
            "count_prefill": a.count_prefill}
    if a.model:
        cfg = models.inspect_checkpoint(a.model)
        if a.layers:
            raise models.DemoInputError("--layers applies to --config models, not to a checkpoint")
        spec.update(model_dir=str(Path(a.model).resolve()), source=f"checkpoint {a.model}", config=None)
    else:
        name = a.config
        cfg = models.config_dict(name, a.layers)
        spec.update(config=cfg, source=f"--config {name}" + (f" --layers {a.layers}" if a.layers else "")
                    + f", random weights (seed {a.seed})")
    if max(max(a.prompt) + a.steps, a.count_prefill) + 1 > cfg.get("max_position_embeddings", 32768):
        raise models.DemoInputError("prompt + steps (or --count-prefill) exceed the model's max_position_embeddings")
    spec["vocab_size"] = cfg["vocab_size"]
    spec["n_params_expected"] = models.param_count({**cfg, "num_key_value_heads": cfg.get("num_key_value_heads",
                                                                                         cfg["num_attention_heads"])})
    spec["mem_needed_bytes"] = models.check_memory(spec["n_params_expected"], modes)
    spec["dims"] = {k: cfg.get(k) for k in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                          "num_attention_heads", "num_key_value_heads", "vocab_size",
                                          "tie_word_embeddings")}
    spec["count_runs"] = count_runs(a, spec)  # a bad --count-layers fails here, before anything runs
    if a.measure_jobs is not None and a.measure_jobs < 1:
        raise models.DemoInputError("--measure-jobs must be >= 1")
    spec["measure_jobs"] = a.measure_jobs or (2 if spec["n_params_expected"] < MEASURE_JOBS_MAX_PARAMS else 1)
    return spec


def count_runs(a, spec: dict) -> list[dict]:
    """The counting runs --count-layers asks for (none without it)."""
    if not a.count_layers:
        return []
    depth = spec["dims"]["num_hidden_layers"]
    if spec.get("config") is None:
        raise models.DemoInputError("--count-layers applies to --config models, not to a checkpoint")
    if len(a.count_layers) != 2 or not a.count_layers[0] < a.count_layers[1] <= depth:
        raise models.DemoInputError(f"--count-layers needs two layer counts A < B <= {depth} (the model's depth), "
                                    f"got {','.join(map(str, a.count_layers))}")
    return [{"spec": f"spec-count-L{n}.json", "tag": f"-L{n}", "layers": n} for n in a.count_layers]


# Above this size a second worker's copy of the model costs more memory than the time it saves.
MEASURE_JOBS_MAX_PARAMS = 200_000_000


def _run_worker(mode: str, spec_path: Path, out: Path, env: dict) -> int:
    log = out / f"worker-{mode}.log"
    with open(log, "w") as f:
        rc = subprocess.run([sys.executable, "-m", "rvv_inductor", "demo", "--worker", mode, str(spec_path)],
                            stderr=f, env=env).returncode
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-12:]
        if rc != models.EXIT_BAD_INPUT:
            print(f"rvv_inductor demo: mode {mode} failed (exit {rc}); last lines of {log}:", file=sys.stderr)
        print("\n".join("  " + t for t in tail), file=sys.stderr)
    return rc


def plan_stages(spec: dict, count_jobs: int, count_modes: str) -> list[tuple[str, float]]:
    """The run's stages with their expected seconds: the empty baseline and each mode's
    worker, then (when scripts/demo counts: count_jobs > 0) each counting run."""
    tokens = sum(b * (p + spec["steps"]) for b in spec["batches"] for p in spec["prompts"])
    n = spec["n_params_expected"]
    stages = [(f"measure:{m}", expected_seconds("measure", m, n, tokens)) for m in [modes.EMPTY] + spec["modes"]]
    if count_jobs > 0:
        # scripts/demo counts the whole-model graph only with --full or when named.
        want = [m for m in count_modes.split(",") if m] or [m for m in spec["modes"] if m != "whole" or spec["full"]]
        ctok = max(spec["batches"][:modes.MAX_COUNTED_BATCHES]) * (spec["count_prompt"] + spec["count_steps"])
        runs = spec["count_runs"] or [{"tag": ""}]
        long_p = spec.get("count_prefill") or 0
        for m in spec["modes"]:
            if m not in want:
                continue
            if m in modes.DRIVER_MODES:  # worker._write_*_count_runs: decode and the long prompt per thread count
                depths = [r["tag"] for r in runs]
                for t in modes.count_threads(spec, m):
                    stages.append((f"count:{m}-t{t}", expected_seconds("count", m, n, ctok)))
                    stages += [(f"count:{m}-prompt-t{t}{d}", expected_seconds("count-prompt", m, n, long_p))
                               for d in depths if long_p]
            else:
                for r in runs:
                    stages.append((f"count:{m}{r['tag']}", expected_seconds("count", m, n, ctok)
                                   + (expected_seconds("count-prompt", m, n, long_p) if long_p and m != "eager" else 0)))
    return stages


def _write_specs(out: Path, spec: dict, a) -> None:
    """Empty ``out`` of an earlier run's results (and Inductor cache, unless --keep-cache),
    then write spec.json for the modes and spec-count*.json for the counting runs."""
    out.mkdir(parents=True, exist_ok=True)
    stale = ("result-*.json", "logits-*.pt", "counts-*.json", "count-argv-*.json", "model-*.gguf", "model-*.pt2",
             "plan*.json*")
    for old in [f for pattern in stale for f in out.glob(pattern)]:
        old.unlink()
    cache = out / "inductor-cache"
    if cache.exists() and not a.keep_cache:
        shutil.rmtree(cache)
    spec["inductor_cache"] = str(cache)
    spec["emulated"] = os.environ.get("RV64_EMULATED") == "1"
    spec["warm_cache"] = bool(a.keep_cache)
    (out / "spec.json").write_text(json.dumps(spec, indent=1))
    count_spec = dict(spec, count=True, prompts=[spec["count_prompt"]], steps=spec["count_steps"], threads=1,
                      batches=spec["batches"][:modes.MAX_COUNTED_BATCHES], count_tag="")
    # One counting run per entry; with --count-layers, two shallower models whose counts the
    # report extrapolates to the full depth (report.counted).
    runs = spec["count_runs"]
    for run in runs:
        shallow = dict(models.at_depth(count_spec, run["layers"]), count_tag=run["tag"])
        (out / run["spec"]).write_text(json.dumps(shallow, indent=1))
    count_spec["runs"] = runs or [{"spec": "spec-count.json", "tag": "", "layers": spec["dims"]["num_hidden_layers"]}]
    (out / "spec-count.json").write_text(json.dumps(count_spec, indent=1))


def _worker_main(argv: list[str]) -> int:
    """``demo --worker MODE SPEC.json``: one mode in this process (worker.py)."""
    spec = json.loads(Path(argv[1]).read_text()) if len(argv) == 2 else {}
    if (spec.get("count") or (spec.get("threads") or 1) > 1) and "torch" not in sys.modules:
        # Before libgomp loads (with torch, which worker.py imports): idle OpenMP workers
        # sleep in futex instead of spinning inside a counted region, where the plugin would
        # charge the spinning, or, in the measuring pass, on the cores the other mode worker needs.
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    from . import worker  # lazy: torch and transformers; the driver imports no torch (host)

    return worker.main(argv)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--worker":
        return _worker_main(argv[1:])
    a = parser().parse_args(argv)
    out = Path(a.out).resolve()
    if a.report_only:
        return report.write(out)
    try:
        spec = make_spec(a)
    except models.DemoInputError as e:
        print(f"rvv_inductor demo: {e}", file=sys.stderr)
        return models.EXIT_BAD_INPUT
    _write_specs(out, spec, a)
    print(f"rvv_inductor demo: Qwen2 architecture, {spec['source']}; ~{spec['n_params_expected'] / 1e6:.0f}M "
          f"parameters; modes {', '.join(spec['modes'])}; batch {spec['batches']}, prompt {spec['prompts']}, "
          f"{spec['steps']} decode steps. Report: {out}")
    if spec["emulated"]:
        print("  (running under QEMU: wall times below are emulated, not RISC-V speed)")
    plan = Plan.create(out, plan_stages(spec, a.count_jobs, a.count_modes), max(a.count_jobs, 1),
                       spec["measure_jobs"])
    print(f"  expected: {plan.eta_text()} (durations measured on a 2-core machine, refined as stages finish)")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=spec["inductor_cache"], PYTHONUNBUFFERED="1")
    jobs = spec["measure_jobs"]
    if jobs > 1:  # two workers redrawing one terminal line would garble it: plain lines instead
        env["RVV_DEMO_PLAIN_PROGRESS"] = "1"

    def measure(mode: str) -> int:
        t0 = time.monotonic()
        plan.start(f"measure:{mode}")
        rc = _run_worker(mode, out / "spec.json", out, env)
        plan.finish(f"measure:{mode}", time.monotonic() - t0)
        if rc != 0 and mode in modes.LLAMACPP_MODES:
            # llama.cpp is a peer, not part of this project: its failure is a row saying so.
            (out / f"result-{mode}.json").write_text(json.dumps(
                {"mode": mode, "unavailable": f"the worker failed (exit {rc}, see worker-{mode}.log)",
                 "workloads": []}))
            rc = 0
        if rc == 0 and mode != modes.EMPTY:
            print(f"rvv_inductor demo: {mode} finished in {time.monotonic() - t0:.0f} s; {plan.eta_text()}",
                  flush=True)
        return rc

    # Eager first: the other modes are teacher-forced with its tokens. The empty baseline
    # needs nothing and runs beside it. The rest run `jobs` at a time, longest expected first.
    expected = dict(plan_stages(spec, 0, ""))
    rest = sorted(spec["modes"][1:], key=lambda m: -expected.get(f"measure:{m}", 0.0))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        first = [pool.submit(measure, m) for m in (modes.EMPTY, "eager")]
        rcs = [f.result() for f in first]
        if all(rc == 0 for rc in rcs):
            rcs += list(pool.map(measure, rest))
    bad = [rc for rc in rcs if rc != 0]
    if bad:
        return bad[0]
    return report.write(out)
