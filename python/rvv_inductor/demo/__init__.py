"""``python3 -m rvv_inductor demo``: a Qwen2-architecture decoder (transformers) run three
ways side by side -- eager ATen, regional RVV (compile_linears), and whole-model
torch.compile with freezing -- over batch sizes and prompt lengths, with a report of
compile time, artifacts, memory, agreement with eager, layer routing and (with counts
from the rvvcount QEMU plugin, see scripts/demo) an estimated K1 throughput.

Each mode runs in its own process (worker.py) so its compile time and peak RSS are its
own; this process only plans, checks input, and writes the report (report.py).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import models, worker

MODES = tuple(worker.MODES)  # eager first: the other modes compare with its results


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
                     help="model dimensions, random weights with a fixed seed (default: small)")
    src.add_argument("--model", metavar="DIR", help="local Hugging Face checkpoint (config.json + *.safetensors)")
    p.add_argument("--layers", type=int, help="override the number of decoder layers")
    p.add_argument("--batch", type=_ints, default=[1, 2, 4], help="concurrent sequences (default 1,2,4)")
    p.add_argument("--prompt", type=_ints, default=[32, 128], help="prompt lengths (default 32,128)")
    p.add_argument("--steps", type=int, default=8, help="decode steps per workload (default 8)")
    p.add_argument("--modes", default=",".join(MODES), help="subset of eager,regional,whole (eager is always run)")
    p.add_argument("--quick", action="store_true",
                   help="CI smoke test: tiny model, batch 1, prompt 8, 3 steps, all modes, agreement enforced")
    p.add_argument("--out", default="build/demo", help="report directory (default build/demo)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    p.add_argument("--keep-cache", action="store_true",
                   help="reuse the Inductor cache of a previous run (compile times are then warm)")
    p.add_argument("--count-steps", type=int, default=2, help="decode steps in the counting runs (scripts/demo)")
    p.add_argument("--count-prompt", type=int, default=0,
                   help="prompt length in the counting runs (default: the shortest --prompt)")
    p.add_argument("--count-layers", type=_ints, metavar="A,B",
                   help="count at A and B decoder layers (same dimensions) and extrapolate linearly to the "
                        "model's depth; for deep --config models whose full-depth counting would take hours "
                        "under emulation")
    p.add_argument("--report-only", action="store_true", help="rewrite the report from OUT's results")
    return p


def make_spec(a) -> dict:
    if a.quick:
        a.config = a.config or "tiny"
        a.batch, a.prompt, a.steps = [1], [8], 3
    if a.steps < 1 or a.count_steps < 1 or a.count_prompt < 0:
        raise models.DemoInputError("--steps and --count-steps must be >= 1, --count-prompt >= 0")
    if a.layers is not None and a.layers < 1:
        raise models.DemoInputError("--layers must be >= 1")
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise models.DemoInputError(f"unknown mode(s) {', '.join(bad)}; choose from {', '.join(MODES)}")
    modes = ["eager"] + [m for m in MODES[1:] if m in modes]
    spec = {"seed": a.seed, "batches": a.batch, "prompts": a.prompt, "steps": a.steps, "modes": modes,
            "threads": a.threads, "quick": a.quick, "out": str(Path(a.out).resolve())}
    if a.model:
        cfg = models.inspect_checkpoint(a.model)
        if a.layers:
            raise models.DemoInputError("--layers applies to --config models, not to a checkpoint")
        spec.update(model_dir=str(Path(a.model).resolve()), source=f"checkpoint {a.model}", config=None)
    else:
        name = a.config or "small"
        cfg = models.config_dict(name, a.layers)
        spec.update(config=cfg, source=f"--config {name}" + (f" --layers {a.layers}" if a.layers else "")
                    + f", random weights (seed {a.seed})")
    if max(a.prompt) + a.steps + 1 > cfg.get("max_position_embeddings", 32768):
        raise models.DemoInputError("prompt + steps exceed the model's max_position_embeddings")
    spec["vocab_size"] = cfg["vocab_size"]
    spec["n_params_expected"] = models.param_count({**cfg, "num_key_value_heads": cfg.get("num_key_value_heads",
                                                                                         cfg["num_attention_heads"])})
    spec["mem_needed_bytes"] = models.check_memory(spec["n_params_expected"], modes)
    spec["dims"] = {k: cfg.get(k) for k in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                          "num_attention_heads", "num_key_value_heads", "vocab_size",
                                          "tie_word_embeddings")}
    spec["count_runs"] = count_runs(a, spec)  # a bad --count-layers fails here, before anything runs
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


def _write_specs(out: Path, spec: dict, a) -> None:
    """Empty ``out`` of an earlier run's results (and Inductor cache, unless --keep-cache),
    then write spec.json for the modes and spec-count*.json for the counting runs."""
    out.mkdir(parents=True, exist_ok=True)
    for old in list(out.glob("result-*.json")) + list(out.glob("logits-*.pt")) + list(out.glob("counts-*.json")):
        old.unlink()
    cache = out / "inductor-cache"
    if cache.exists() and not a.keep_cache:
        shutil.rmtree(cache)
    spec["inductor_cache"] = str(cache)
    spec["emulated"] = os.environ.get("RV64_EMULATED") == "1"
    spec["warm_cache"] = bool(a.keep_cache)
    (out / "spec.json").write_text(json.dumps(spec, indent=1))
    count_spec = dict(spec, count=True, prompts=[a.count_prompt or min(spec["prompts"])], steps=a.count_steps, threads=1,
                      batches=spec["batches"][:worker.MAX_COUNTED_BATCHES])
    # One counting run per entry; with --count-layers, two shallower models whose counts the
    # report extrapolates to the full depth (report.counted).
    runs = spec["count_runs"]
    for run in runs:
        shallow = dict(count_spec, config=dict(spec["config"], num_hidden_layers=run["layers"]))
        (out / run["spec"]).write_text(json.dumps(shallow, indent=1))
    count_spec["runs"] = runs or [{"spec": "spec-count.json", "tag": "", "layers": spec["dims"]["num_hidden_layers"]}]
    (out / "spec-count.json").write_text(json.dumps(count_spec, indent=1))


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--worker":
        return worker.main(argv[1:])
    a = parser().parse_args(argv)
    out = Path(a.out).resolve()
    from . import report

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
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=spec["inductor_cache"], PYTHONUNBUFFERED="1")
    for mode in spec["modes"]:
        rc = _run_worker(mode, out / "spec.json", out, env)
        if rc != 0:
            return rc
    return report.write(out)
