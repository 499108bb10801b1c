"""The demo's run plan: its stages (one per worker process: the measured modes, then the
counting runs), each with the seconds it took on the project's 2-core machine
(``EXPECTED_S``). As stages finish, the remaining ones are scaled by how much slower or
faster the finished ones were than expected, so the estimate corrects itself for a
loaded or a faster machine. scripts/demo's counting pass reports through the same files
(``python3 -m rvv_inductor.demo.progress OUT done STAGE SECONDS``). Plain Python: the
driver and scripts/demo run it with the host's python3. The workers' progress lines
(tqdm) are in ``progress_line.py``.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def fmt_duration(s: float) -> str:
    return f"{int(s) // 60}m{int(s) % 60:02d}s"


# Seconds per stage of the default run (scripts/demo without flags: --config tiny, batch 1,
# prompt 16, 4 decode steps; counts at prompt 16 with 1 step, 8 threads counted), cold
# Inductor cache, on the project's quiet 2-core x86_64 machine (2026-12-05, 10 min 59 s in
# all): each stage's wall time as it ran there, i.e. beside the other worker or counting
# run of its pair (measure_jobs and count_jobs 2), which is why seconds_left divides the
# remaining sum by the number of jobs. The plan corrects them from the stages that finished.
# Keys: (kind, mode); kind "measure" (the mode's worker) or "count" (its run under the
# rvvcount plugin, QEMU 10).
EXPECTED_S = {
    ("measure", "empty"): 20, ("measure", "eager"): 35, ("measure", "regional"): 260,
    ("measure", "regional-int8"): 45, ("measure", "regional-int4"): 45, ("measure", "whole"): 225,
    ("measure", "layers-int4"): 240,  # not yet timed quietly: a guess between regional and whole
    ("measure", "llama.cpp-q8_0"): 36, ("measure", "llama.cpp-q4_0"): 32, ("measure", "llama.cpp-bf16"): 40,
    ("measure", "llama.cpp-q4_k_m"): 60,  # + llama-quantize; not yet timed quietly
    # count:regional finds the measuring pass's artifacts (same threads and prompt).
    ("count", "eager"): 95, ("count", "regional"): 140, ("count", "regional-int8"): 346,
    ("count", "regional-int4"): 517, ("count", "whole"): 400, ("count", "layers-int4"): 200,
    ("count", "llama.cpp-q8_0"): 8, ("count", "llama.cpp-q4_0"): 8, ("count", "llama.cpp-bf16"): 15,
    # The package's export + AOTI compile (g++ over the whole decode step; test_export's
    # 2-layer hidden-128 exports took 5.5-8 min at load 9-13, not yet timed on the tiny
    # model on a quiet machine), then seconds of rvv-generate; its count: a few C++ steps.
    ("measure", "package"): 420, ("measure", "package-int4"): 343,
    ("count", "package"): 30, ("count", "package-int4"): 35,
    ("measure", "package-q4_k_m"): 400, ("count", "package-q4_k_m"): 35,  # not yet timed quietly
    ("count", "llama.cpp-q4_k_m"): 10,
    # The default run timed quietly on 2026-12-06 (32 min 0 s in all) gave package-int4 343 s,
# the INT8/INT4 counting runs with their 512-token prompt inside 346 / 517 s, llama.cpp's
# long-prompt counts 200-236 s at 8 threads and 283-430 s at 4 (mean per format below).
# The 512-token prompt of the time to first token (spec count_prefill), counted on its own.
    # llama.cpp: 2.7 min at 8 threads (Q4_0, measured 2026-12-05); the rest not yet timed.
    ("count-prompt", "llama.cpp-q8_0"): 315, ("count-prompt", "llama.cpp-q4_0"): 260,
    ("count-prompt", "llama.cpp-bf16"): 1800, ("count-prompt", "regional"): 120,
    ("count-prompt", "regional-int8"): 60, ("count-prompt", "regional-int4"): 60,
    ("count-prompt", "package"): 120, ("count-prompt", "package-int4"): 152,
    ("count-prompt", "package-q4_k_m"): 180, ("count-prompt", "llama.cpp-q4_k_m"): 400,  # guesses
}
DEFAULT_WORK = {"n_params": 24_000_000, "tokens": 1 * (16 + 4)}  # what EXPECTED_S was measured with


def expected_seconds(kind: str, mode: str, n_params: int, tokens: int) -> float:
    """A first guess for one stage: the measured default, scaled (crudely) by the model's
    size and the tokens generated. The plan refines it from the stages that finished."""
    base = EXPECTED_S.get((kind, mode), 120.0)
    size = max(1.0, n_params / DEFAULT_WORK["n_params"]) ** 0.5
    if kind == "count-prompt":  # measured at 512 tokens
        return base * size * max(tokens, 1) / 512
    work = max(1.0, tokens / DEFAULT_WORK["tokens"]) ** 0.5
    return base * size * work


def _fmt_left(s: float) -> str:
    return f"~{int(s) // 60}m{int(s) % 60:02d}s left" if s < 3600 else f"~{s / 3600:.1f}h left"


class Plan:
    """The run's stages and their expected seconds (plan.json), and those that finished
    with the seconds they took (plan-done.jsonl, one line per stage: appended by parallel
    counting runs)."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        d = json.loads((self.out / "plan.json").read_text())
        self.stages: list[list] = d["stages"]  # [name, expected_s]
        self.count_jobs = max(1, int(d.get("count_jobs", 1)))
        self.measure_jobs = max(1, int(d.get("measure_jobs", 1)))
        self.t0 = float(d["t0"])

    @staticmethod
    def create(out: Path, stages: list[tuple[str, float]], count_jobs: int = 1, measure_jobs: int = 1) -> Plan:
        out = Path(out)
        (out / "plan.json").write_text(json.dumps({"t0": time.time(), "count_jobs": count_jobs,
                                                   "measure_jobs": measure_jobs,
                                                   "stages": [[n, float(e)] for n, e in stages]}, indent=1))
        (out / "plan-done.jsonl").write_text("")
        return Plan(out)

    @staticmethod
    def find(out) -> Plan | None:
        try:
            return Plan(Path(out))
        except (OSError, ValueError, KeyError):
            return None

    def _events(self) -> list[dict]:
        try:
            return [json.loads(ln) for ln in (self.out / "plan-done.jsonl").read_text().splitlines() if ln.strip()]
        except (OSError, ValueError):
            return []

    def done(self) -> dict[str, float]:
        return {d["stage"]: float(d["s"]) for d in self._events() if "s" in d}

    def running(self) -> dict[str, float]:
        """Stages started (``start``) and not finished -> seconds they have run."""
        done, now = self.done(), time.time()
        return {d["stage"]: now - float(d["start"]) for d in self._events() if "start" in d and d["stage"] not in done}

    def start(self, stage: str) -> None:
        with open(self.out / "plan-done.jsonl", "a") as f:
            f.write(json.dumps({"stage": stage, "start": time.time()}) + "\n")

    def finish(self, stage: str, seconds: float) -> None:
        with open(self.out / "plan-done.jsonl", "a") as f:
            f.write(json.dumps({"stage": stage, "s": seconds}) + "\n")

    def seconds_left(self, current: dict[str, float] | None = None) -> float:
        """Expected seconds until the run ends. ``current``: stages running now -> seconds
        they have run. Counting stages run ``count_jobs`` at a time, measuring stages
        ``measure_jobs`` at a time; a stage's expected seconds are its wall time beside its
        neighbours (EXPECTED_S), so the remaining work divides by the number of jobs."""
        done = self.done()
        current = dict(self.running(), **(current or {}))
        exp = dict((n, float(e)) for n, e in self.stages)
        spent = sum(done.values())
        planned = sum(exp.get(n, 0.0) for n in done)
        factor = min(4.0, max(0.4, spent / planned)) if planned > 0 else 1.0
        left_measure = left_count = 0.0
        for n, e in exp.items():
            if n in done:
                continue
            rest = max(e * factor - current.get(n, 0.0), 0.1 * e * factor)
            if n.startswith("count:"):
                left_count += rest
            else:
                left_measure += rest
        return left_measure / self.measure_jobs + left_count / self.count_jobs

    def eta_text(self, current: dict[str, float] | None = None) -> str:
        n_done, n = len(self.done()), len(self.stages)
        return f"stage {min(n_done + 1, n)}/{n}, run {_fmt_left(self.seconds_left(current))}"


def worker_eta(out, stage: str):
    """For a worker's Progress: the run's time left while ``stage`` runs (None without a plan)."""
    plan = Plan.find(out)
    if plan is None or stage not in dict((n, e) for n, e in plan.stages):
        return None
    t0 = time.monotonic()
    return lambda: plan.eta_text({stage: time.monotonic() - t0})


def main(argv: list[str]) -> int:
    """python3 -m rvv_inductor.demo.progress OUT start STAGE | OUT done STAGE SECONDS | OUT eta"""
    if len(argv) == 4 and argv[1] == "done":
        plan = Plan.find(argv[0])
        if plan is None:
            return 0
        plan.finish(argv[2], float(argv[3]))
        print(f"rvv_inductor demo: {argv[2]} finished in {fmt_duration(float(argv[3]))}; {plan.eta_text()}", flush=True)
        return 0
    if len(argv) == 3 and argv[1] == "start":
        plan = Plan.find(argv[0])
        if plan is not None:
            plan.start(argv[2])
        return 0
    if len(argv) == 2 and argv[1] == "eta":
        plan = Plan.find(argv[0])
        # (--count-only reuses a plan whose stages may all be done: then say nothing.)
        if plan is not None and set(n for n, _ in plan.stages) - set(plan.done()):
            print(f"rvv_inductor demo: {plan.eta_text()}", flush=True)
        return 0
    print(main.__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
