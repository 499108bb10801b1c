#!/usr/bin/env python3
"""Serving benchmark (issue 15): ``python3 -m rvv_inductor serve`` (transformers' server,
continuous batching, Linear layers on RVV) beside Debian's ``llama-server`` on the same
weights, a fixed request mix at concurrency 1, 2, 4 and 8, counted per output token with
the rvvcount QEMU plugin over the whole server process (every thread, HTTP included).

    bench/serve_bench.py [--config tiny] [--layers N] [--format bf16|q8_0|q4_0]
                         [--servers rvv-cb,llama] [--threads 1] [--levels 1,2,4,8]
                         [--out bench/results/serve] [--profile] [--report-only]

It runs on the host's python3 (no torch needed here). Steps:

1. builds ``bench/serve_region.c`` (an LD_PRELOAD library: a control thread in the server
   that opens/closes plugin regions on commands from a FIFO) for riscv64 with clang;
2. writes a random Qwen2 checkpoint (``demo/models.py`` config, seed 0; a word-level
   tokenizer so that a prompt of 32 words is exactly 32 tokens), the same weights as a
   BF16 GGUF (``demo/llamacpp.write_gguf``) and the prompts -- inside the riscv64 world
   (``scripts/rv64``), once, cached in ``build/serve-bench/<config>``;
3. per server: starts it under the plugin-capable QEMU 10 (``scripts/rv64`` with
   ``RV64_QEMU`` / ``QEMU_PLUGIN``, as ``scripts/demo --count`` does), loopback only;
   sends the whole request mix once uncounted (warm-up: lazy compiles, first-call
   initialisation; llama-server, which compiles nothing, one request), then the mix again
   with one plugin region per concurrency level (region id = concurrency), opened right
   before the level's requests are sent and closed right after the last answer; then
   stops the server (SIGTERM, clean exit: QEMU writes the plugin report);
4. writes ``OUT/serve.json`` and ``OUT/serve.md``.

Requests: ``c`` clients at once, each one request of a 32-token prompt and 16 new tokens,
greedy (temperature 0; the random models have no EOS, llama-server gets ignore_eos).
The HTTP client is this host process (not emulated, not counted). The counted work is
everything the server process executes while a region is open: the HTTP layer, the
scheduler, the model.

The estimate (ESTIMATED K1, not a measurement): per region,
  compute = max(busiest thread's cycles, all threads' cycles / K1_CORES) / K1_CLOCK_HZ
with a thread's cycles as ``demo/estimate.region_seconds`` counts them (every
non-vector-datapath instruction at CPI_SCALAR, vector instructions by their beats), and
  memory = DRAM bytes of all threads (plugin cache model) / bandwidth
at the achieved bandwidth of ``calibration.py`` (``policy.K1_DRAM_ACHIEVED_BYTES_PER_S``,
fitted to published board numbers) and, for reference, at the 10.66 GB/s peak;
  time = max(compute, memory), tokens/s = output tokens of the level / time.

Time to first token, per request: after each level's window, the same c requests again
with one new token each (max_tokens / n_predict 1) in a window of their own (region
``TTFT_REGION_BASE + c``). Its estimated time is when the last of the c requests, sent
together, has its first token: at c = 1 each request's time to first token, at c > 1 the
worst request's (the server prefills the c prompts, batched or one after another).
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import select
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "bench"))

from rvv_inductor import policy  # noqa: E402
from rvv_inductor.demo import calibration  # noqa: E402  (torch-free)
from rvv_inductor.demo import estimate  # noqa: E402  (torch-free)
import serve_timeline  # noqa: E402  (bench/, torch-free)

LEVELS = (1, 2, 4, 8)
TTFT_REGION_BASE = 8  # the first-token window of level c is region 8 + c (serve_region.c takes 1..16)
PROMPT_TOKENS = 32
NEW_TOKENS = 16
SERVERS = ("rvv-cb", "rvv-seq", "llama")
DEFAULT_SERVERS = ("rvv-cb", "llama")
# Named configs: demo/models.py's, plus the Qwen2.5-1.5B dimensions cut to a few layers:
# "1.5b" with its real vocabulary (the lm_head alone is 467 MB), "1.5b-v2k" with the tiny
# config's 2048 tokens, so the decoder layers' weights (94 MB each) set the bytes per step,
# as they do in the whole model, and an emulated run stays within an hour.
# --workload mixed (issue 42): per level, requests drawn from a fixed seed (prompt and new
# tokens uniform in these ranges), sent by c closed-loop clients (each sends its next request
# when its previous one is answered); a distinct set of prompts warms the server up.
# The warm-up sends 2 of its 8 drawn requests (all 8 are drawn, so the levels' requests stay
# those of the first counts): serve's own warm-up before ready already made the graphs'
# sizes dynamic (its load test compiles nothing after it); these only take the HTTP path and
# a prefill once (all 8 took 15-29 min of emulation at 1.5B dimensions).
MIXED = {"seed": 42, "prompt": (32, 512), "new": (16, 128), "requests": {1: 4, 2: 4, 4: 8, 8: 16},
         "warm_up": 8, "warm_up_new": 4, "warm_up_sent": 2}
# The other depths of a run only feed the per-layer fit (bench/serve_timeline.py): the same
# kinds of steps (prefills of 32-512 tokens, batches of 1-8 sequences), fewer of them.
MIXED_FIT = dict(MIXED, new=(16, 32), requests={1: 1, 2: 2, 4: 4, 8: 8})
CONFIGS = {"tiny": ("tiny", None, {}), "small": ("small", None, {}), "1.5b": ("qwen2.5-1.5b", 1, {}),
           "1.5b-v2k": ("qwen2.5-1.5b", 2, {"vocab_size": 2048})}


# ----------------------------------------------------------------------------- arithmetic
def thread_cycles(c: dict) -> float:
    """K1 cycles of one thread's counters (demo/estimate.py's compute model, one core)."""
    return estimate.region_seconds(dict(c, dram_read_bytes=0, dram_write_bytes=0), 1)["compute_s"] * policy.K1_CLOCK_HZ


def window_estimate(region: dict, tokens: int, bandwidth: float | None = None) -> dict:
    """The K1 estimate for one counted window (a plugin region's counters, all threads)
    that produced ``tokens`` output tokens."""
    bw = bandwidth or policy.K1_DRAM_ACHIEVED_BYTES_PER_S
    threads = region.get("threads") or {"0": region}
    cyc = [thread_cycles(t) for t in threads.values() if t.get("insns", 0) > 0]
    max_cyc, sum_cyc = max(cyc, default=0.0), sum(cyc)
    compute_s = max(max_cyc, sum_cyc / policy.K1_CORES) / policy.K1_CLOCK_HZ
    dram = region.get("dram_read_bytes", 0) + region.get("dram_write_bytes", 0)
    mem_s = dram / bw
    mem_peak_s = dram / policy.K1_DRAM_BYTES_PER_S
    s, s_peak = max(compute_s, mem_s), max(compute_s, mem_peak_s)
    return {"tokens": tokens, "insns": region["insns"], "insns_per_token": region["insns"] / tokens,
            "max_thread_insns": region.get("max_thread", {}).get("insns", region["insns"]),
            "max_thread_insns_per_token": region.get("max_thread", {}).get("insns", region["insns"]) / tokens,
            "threads_active": region.get("threads_active", 1),
            "dram_bytes": dram, "dram_bytes_per_token": dram / tokens,
            "max_thread_cycles": max_cyc, "sum_cycles": sum_cyc,
            "compute_s": compute_s, "memory_s": mem_s, "est_s": s,
            "bound": "memory" if mem_s >= compute_s else "compute",
            "est_tok_s": tokens / s if s else 0.0, "bandwidth": bw,
            "est_tok_s_peak_bw": tokens / s_peak if s_peak else 0.0}


def ttft_estimate(region: dict, requests: int) -> dict:
    """The first-token window of ``requests`` simultaneous requests: its estimated seconds at
    the calibrated and at the peak bandwidth (the last request's time to first token)."""
    e = window_estimate(region, requests)
    return {"est_ttft_s": e["est_s"], "est_ttft_s_peak_bw": requests / e["est_tok_s_peak_bw"] if e["est_tok_s_peak_bw"]
            else 0.0, "ttft_insns": e["insns"], "ttft_bound": e["bound"]}


def summarize(plugin: dict, levels: dict) -> dict:
    """Per concurrency level: the estimate from plugin region ``c`` (and the time to first
    token from region TTFT_REGION_BASE + c, when the run counted it). ``levels`` maps the
    concurrency (str or int) to {"tokens": output tokens, ...}."""
    out = {}
    for c, lv in levels.items():
        reg = plugin.get("regions", {}).get(str(c))
        if reg is None:
            raise ValueError(f"plugin report has no region {c} (regions: {sorted(plugin.get('regions', {}))})")
        out[str(c)] = dict(lv, **window_estimate(reg, lv["tokens"]))
        first = plugin.get("regions", {}).get(str(TTFT_REGION_BASE + int(c)))
        if first is not None:
            out[str(c)].update(ttft_estimate(first, int(c)))
    first, last = str(min(int(k) for k in out)), str(max(int(k) for k in out))
    ratio = out[last]["est_tok_s"] / out[first]["est_tok_s"] if out[first]["est_tok_s"] else 0.0
    return {"levels": out, "ratio_first_last": ratio, "ratio_levels": [int(first), int(last)]}


# ----------------------------------------------------------------------------- guest side
def prepare(work: Path, config: str, layers: int | None, fmt: str) -> None:
    """(riscv64 world) the checkpoint, the prompts and the ``fmt`` GGUF in ``work``; with the
    checkpoint already there, only the GGUF (the same weights, so every format's run
    serves one model)."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models as tmodels, pre_tokenizers

    from rvv_inductor.demo import models

    if (work / "prompts.json").exists():
        spec = json.loads((work / "prompts.json").read_text())
        model = transformers.AutoModelForCausalLM.from_pretrained(work / "model", dtype=torch.bfloat16)
        spec.setdefault("ggufs", {"bf16": spec.pop("gguf")} if "gguf" in spec else {})
        spec["ggufs"][fmt] = write_gguf(model, work, fmt, spec["model_config"]["vocab_size"])
        (work / "prompts.json").write_text(json.dumps(spec))
        return
    name, default_layers, overrides = CONFIGS[config]
    cfg = dict(models.config_dict(name, layers or default_layers), **overrides)
    cfg.update(bos_token_id=None, eos_token_id=None, max_position_embeddings=4096)
    model = models.build({"seed": 0, "config": cfg})
    mdir = work / "model"
    model.save_pretrained(mdir)
    V = cfg["vocab_size"]
    vocab = {f"t{i}": i for i in range(V - 1)}
    vocab["<|endoftext|>"] = V - 1
    tok = Tokenizer(tmodels.WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    ft = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                              pad_token="<|endoftext|>")
    ft.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    ft.save_pretrained(mdir)
    # A copy without config.json for `serve --tokenizer`: next to the checkpoint's config
    # (model_type qwen2) transformers 5 loads it as a Qwen2Tokenizer, which swaps in
    # Qwen's byte-level pre-tokenizer and turns these prompts into no tokens at all.
    ft.save_pretrained(work / "tokenizer")
    (mdir / "generation_config.json").write_text(json.dumps({"do_sample": False}))
    g = torch.Generator().manual_seed(1234)
    ids = torch.randint(1, V - 1, (2 * max(LEVELS), PROMPT_TOKENS), generator=g).tolist()
    for row in ids:
        assert ft(" ".join(f"t{i}" for i in row))["input_ids"] == row
    lin = sum(m.weight.numel() * 2 for n, m in model.named_modules() if isinstance(m, torch.nn.Linear))
    (work / "prompts.json").write_text(json.dumps({
        "config": config, "config_name": name, "model_config": cfg, "ids": ids,
        "linear_bf16_bytes": lin, "ggufs": {fmt: write_gguf(model, work, fmt, V)}}))


def write_gguf(model, work: Path, fmt: str, V: int) -> dict:
    """(riscv64 world) ``work/model-FMT.gguf``. llama-server detokenizes its output, which
    the id-only vocabulary of demo/llamacpp.write_gguf ("none") cannot: the same tokens as a
    GPT-2-style BPE vocabulary instead (the requests send token ids, and our server reads
    the tokenizer directory, so this vocabulary is never used to tokenize)."""
    import gguf

    from rvv_inductor.demo import llamacpp

    plain = gguf.GGUFWriter.add_tokenizer_model

    def with_vocab(w, _model):
        plain(w, "gpt2")
        w.add_tokenizer_pre("default")
        w.add_token_list([f"t{i}" for i in range(V - 1)] + ["<|endoftext|>"])
        w.add_token_types([1] * (V - 1) + [3])  # normal, and one control token
        w.add_token_merges(["t 1"])
        w.add_eos_token_id(V - 1)
        w.add_add_bos_token(False)

    gguf.GGUFWriter.add_tokenizer_model = with_vocab
    try:
        gg = llamacpp.write_gguf(model, work / f"model-{fmt}.gguf", fmt)
    finally:
        gguf.GGUFWriter.add_tokenizer_model = plain
    return {k: v for k, v in gg.items() if k != "path"}


# ----------------------------------------------------------------------------- host side
def mixed_requests(vocab: int, levels=LEVELS, spec: dict = MIXED) -> dict:
    """The mixed workload: {"warm_up": [(ids, new)], c: [(ids, new), ...]} from spec["seed"];
    token ids in 1..vocab-2 (the benchmark tokenizer's words t1..t{V-2}; every prompt
    distinct, so the server's prefix cache finds nothing to share)."""
    import random

    rng = random.Random(spec["seed"])
    lo, hi = spec["prompt"]
    nlo, nhi = spec["new"]

    def one(new=None):
        return [rng.randint(1, vocab - 2) for _ in range(rng.randint(lo, hi))], new or rng.randint(nlo, nhi)

    out = {"warm_up": [one(spec["warm_up_new"]) for _ in range(spec["warm_up"])]}
    for c in LEVELS:  # every level drawn, so a subset of levels gets the same requests
        reqs = [one() for _ in range(spec["requests"].get(c, 0))]
        if c in levels:
            out[c] = reqs
    return out


def _env_file() -> dict:
    cache = Path(os.environ.get("RVV_INDUCTOR_CACHE") or
                 Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rvv-inductor")
    env = {}
    for line in (cache / "bench" / "env").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            env[k] = v
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: dict, timeout: float) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class Control:
    """The FIFOs to the LD_PRELOAD control thread in the server."""

    def __init__(self, d: Path) -> None:
        d.mkdir(parents=True, exist_ok=True)
        for n in ("cmd", "ack"):
            p = d / n
            if p.exists():
                p.unlink()
            os.mkfifo(p)
        # O_RDWR: neither open blocks, whether or not the server has its ends open yet.
        self.cmd = os.open(d / "cmd", os.O_RDWR)
        self.ack = os.open(d / "ack", os.O_RDWR | os.O_NONBLOCK)
        self.buf = b""

    def send(self, line: str, timeout: float = 600) -> str:
        os.write(self.cmd, (line + "\n").encode())
        t_end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = t_end - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"no answer from the server's control thread to {line!r}")
            r, _, _ = select.select([self.ack], [], [], min(left, 5))
            if r:
                self.buf += os.read(self.ack, 4096)
        ans, self.buf = self.buf.split(b"\n", 1)
        if ans.decode().strip() != line.strip():
            raise RuntimeError(f"control thread answered {ans!r} to {line!r}")
        return ans.decode()

    def close(self) -> None:
        os.close(self.cmd)
        os.close(self.ack)


class Run:
    """One server under the plugin: start, warm up, count the levels, stop."""

    def __init__(self, kind: str, work: Path, lib: Path, threads: int, log, profile: Path | None = None,
                 fmt: str = "bf16", mixed: bool = False) -> None:
        self.kind, self.work, self.lib, self.threads, self.log, self.fmt = kind, work, lib, threads, log, fmt
        self.mixed = mixed
        # --workload mixed: one Inductor cache for every depth of a config (the layers share
        # one graph, whatever their number), warmed by warm_cache() without the plugin
        self.inductor_cache = (work.parent / f"{work.name.rsplit('-L', 1)[0]}-inductor-cache" if mixed
                               else work / "inductor-cache")
        self.steps_log = work / f"steps-{kind}-t{threads}.jsonl"
        self.profile = profile
        self.port = _free_port()
        self.plugin_out = work / f"plugin-{kind}.json"
        self.logfile = work / f"server-{kind}.log"

    def guest_argv(self) -> list[str]:
        w = self.work
        if self.kind == "llama":
            nctx = max(LEVELS) * (MIXED["prompt"][1] + MIXED["new"][1] if self.mixed else 128)
            return ["llama-server", "-m", str(w / f"model-{self.fmt}.gguf"), "--host", "127.0.0.1", "--port", str(self.port),
                    "-t", str(self.threads), "-tb", str(self.threads), "-np", str(max(LEVELS)), "-c", str(nctx),
                    "--no-warmup", "--poll", "0"]
        # BF16: the checkpoint directory (compile_linears); a quantized format: the very GGUF
        # file llama-server serves (load_gguf keeps its Q8_0/Q4_0 blocks).
        model = w / "model" if self.fmt == "bf16" else w / f"model-{self.fmt}.gguf"
        argv = ["python3", "-m", "rvv_inductor", "serve", str(model), "--host", "127.0.0.1",
                "--port", str(self.port), "--threads", str(self.threads), "--log-level", "error",
                "--ready-file", str(w / f"ready-{self.kind}.json"), "--tokenizer", str(w / "tokenizer")]
        if self.kind == "rvv-seq":
            argv += ["--no-continuous-batching"]
        if self.kind == "rvv-cb" and self.mixed:
            # 8 requests of up to 512 + 128 tokens: 5 blocks of 128 each, 40 in all (64 with
            # room); a batch of up to 512 tokens, llama-server's default micro-batch.
            argv += ["--cb-block-size", "128", "--cb-num-blocks", "64", "--cb-max-batch-tokens", "512"]
        elif self.kind == "rvv-cb":
            # Fixed paged-cache sizes: transformers otherwise derives them from the free memory
            # of the moment (on a shared machine that gave batches of 0 tokens); 8 requests of
            # 32 + 16 tokens fit one block of 128 each, and 256 tokens prefill all 8 prompts at once.
            argv += ["--continuous-batching", "--cb-block-size", "128", "--cb-num-blocks", "32",
                     "--cb-max-batch-tokens", "256"]
        return argv

    def start(self, env10: dict) -> None:
        self.ctl = Control(self.work / f"fifo-{self.kind}")
        if self.plugin_out.exists():
            self.plugin_out.unlink()
        ready = self.work / f"ready-{self.kind}.json"
        if ready.exists():
            ready.unlink()
        plugin = env10["RVV_BENCH_PLUGIN10"]
        env = dict(os.environ, RV64_QEMU=env10["RVV_BENCH_QEMU10"], RV64_BIND=str(Path(plugin).parent),
                   QEMU_PLUGIN=f"{plugin},out={self.plugin_out},vlen=256,dlen=128,vtype=read"
                   + (f",profile={self.profile}" if self.profile else ""))
        guest_env = [f"LD_PRELOAD={self.lib}", f"RVV_REGION_FIFO={self.work / f'fifo-{self.kind}'}",
                     "OMP_WAIT_POLICY=passive", f"OMP_NUM_THREADS={self.threads}",
                     f"TORCHINDUCTOR_CACHE_DIR={self.inductor_cache}"]
        if self.mixed and self.kind != "llama":  # per-step regions (bench/serve_steps/sitecustomize.py)
            # a level flag left by an interrupted run would count the warm-up as a level
            for f in (self.steps_log, Path(str(self.steps_log) + ".level")):
                if f.exists():
                    f.unlink()
            guest_env += [f"RVV_STEP_LOG={self.steps_log}",
                          f"PYTHONPATH={REPO / 'bench' / 'serve_steps'}:{REPO / 'python'}"]
        cmd = [str(REPO / "scripts" / "rv64"), "--vlen", "256", "env", *guest_env, *self.guest_argv()]
        self.log(f"{self.kind}: starting: {shlex.join(self.guest_argv())}")
        self.t_start = time.monotonic()
        self.proc = subprocess.Popen(cmd, env=env, stdout=open(self.logfile, "w"), stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=REPO)

    def warm_cache(self) -> None:
        """Starts our server once under the plain emulator (no plugin, several times faster)
        until it is ready, so that its compiles land in the Inductor cache; the counted start
        after it compiles nothing (serve's warm restart)."""
        mark = self.inductor_cache / f".warm-{self.fmt}-t{self.threads}"
        if self.kind == "llama" or mark.exists():
            return
        self.inductor_cache.mkdir(parents=True, exist_ok=True)
        argv = self.guest_argv()
        cmd = [str(REPO / "scripts" / "rv64"), "--vlen", "256", "env", "OMP_WAIT_POLICY=passive",
               f"OMP_NUM_THREADS={self.threads}", f"TORCHINDUCTOR_CACHE_DIR={self.inductor_cache}", *argv]
        self.log(f"{self.kind}: warming the Inductor cache {self.inductor_cache} (plain emulator)")
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=open(self.work / f"server-{self.kind}-warm.log", "w"),
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=REPO)
        ready = self.work / f"ready-{self.kind}.json"
        try:
            while not (ready.exists() and ready.read_text().strip()):
                if proc.poll() is not None:
                    raise RuntimeError(f"{self.kind}: the warming server exited ({proc.returncode})")
                if time.monotonic() - t0 > 7200:
                    raise RuntimeError(f"{self.kind}: the warming server not ready after 7200 s")
                time.sleep(5)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        ready.unlink()
        mark.write_text(f"{time.monotonic() - t0:.0f} s\n")
        self.log(f"{self.kind}: cache warm after {time.monotonic() - t0:.0f} s (emulated)")

    def wait_ready(self, timeout: float = 3600) -> None:
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind}: the server exited ({self.proc.returncode}); see {self.logfile}")
            try:
                if self.kind == "llama":
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=10) as r:
                        if r.status == 200:
                            break
                else:
                    ready = self.work / f"ready-{self.kind}.json"
                    if ready.exists() and ready.read_text().strip():
                        self.model_id = json.loads(ready.read_text())["model"]
                        self.ready_info = json.loads(ready.read_text())
                        break
            except (OSError, ValueError):
                pass
            time.sleep(2)
        else:
            raise RuntimeError(f"{self.kind}: not ready after {timeout:.0f} s")
        self.load_s = time.monotonic() - self.t_start
        self.log(f"{self.kind}: ready after {self.load_s:.0f} s (emulated wall time)")

    def request(self, ids: list[int], new_tokens: int = NEW_TOKENS) -> int:
        """One request; returns the output tokens the server reports."""
        if self.kind == "llama":
            r = _post(f"http://127.0.0.1:{self.port}/completion",
                      {"prompt": ids, "n_predict": new_tokens, "temperature": 0, "top_k": 1, "ignore_eos": True,
                       "cache_prompt": False, "return_tokens": True}, timeout=7200)
            if r.get("tokens_evaluated") not in (None, len(ids)):
                raise RuntimeError(f"llama-server evaluated {r['tokens_evaluated']} prompt tokens, not {len(ids)}")
            return int(r["tokens_predicted"])
        r = _post(f"http://127.0.0.1:{self.port}/v1/completions",
                  {"model": self.model_id, "prompt": " ".join(f"t{i}" for i in ids), "max_tokens": new_tokens,
                   "temperature": 0}, timeout=7200)
        u = r["usage"]
        if u["prompt_tokens"] != len(ids):
            raise RuntimeError(f"the server counted {u['prompt_tokens']} prompt tokens, not {len(ids)}")
        return int(u["completion_tokens"])

    def closed_loop(self, reqs: list, c: int) -> tuple[int, float]:
        """``reqs`` [(ids, new tokens)] sent by ``c`` clients, each taking the next request
        when its previous one is answered; returns (output tokens, emulated seconds)."""
        import queue

        todo = queue.Queue()
        for r in reqs:
            todo.put(r)
        got = []

        def client():
            while True:
                try:
                    ids, new = todo.get_nowait()
                except queue.Empty:
                    return
                n = self.request(ids, new)
                if n != new:
                    raise RuntimeError(f"{self.kind}: {n} tokens for a request of {new}")
                got.append(n)

        t0 = time.monotonic()
        with cf.ThreadPoolExecutor(c) as ex:
            for f in [ex.submit(client) for _ in range(c)]:
                f.result()
        return sum(got), time.monotonic() - t0

    def measure_mixed(self, work: dict, which) -> dict:
        """The mixed workload: warm-up uncounted; then per level our server counts every
        scheduling step in a region of its own (the step log names the level), llama-server
        the level as one window (region c)."""
        n, s = self.closed_loop(work["warm_up"][:MIXED["warm_up_sent"]], max(LEVELS))
        self.log(f"{self.kind}: warm-up: {n} tokens in {s:.0f} s (emulated)")
        self.ctl.send("l")
        libs = (self.work / f"fifo-{self.kind}" / "libs").read_text().split()
        self.ggml_cpu = sorted({Path(x).name for x in libs if "libggml-cpu" in x})
        levels = {}
        flag = Path(str(self.steps_log) + ".level")
        for c in which:
            if self.kind == "llama":
                self.ctl.send(f"o {c}")
            else:
                flag.write_text(f"{c}\n")
            try:
                n, s = self.closed_loop(work[c], c)
            finally:
                if self.kind == "llama":
                    self.ctl.send(f"c {c}")
                elif flag.exists():
                    flag.unlink()
            levels[c] = {"requests": len(work[c]), "tokens": n, "emulated_wall_s": round(s, 1),
                         "prompt_tokens": sum(len(i) for i, _ in work[c])}
            self.log(f"{self.kind}: counted c={c}: {len(work[c])} requests, {n} tokens in {s:.0f} s (emulated)")
        return levels

    def mix(self, prompts: list[list[int]], c: int, new_tokens: int = NEW_TOKENS) -> tuple[int, float]:
        t0 = time.monotonic()
        with cf.ThreadPoolExecutor(c) as ex:
            toks = list(ex.map(lambda ids: self.request(ids, new_tokens), prompts[:c]))
        return sum(toks), time.monotonic() - t0

    def stop(self, timeout: float = 600) -> None:
        try:
            self.ctl.send("q", timeout=60)
        except RuntimeError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.log(f"{self.kind}: no clean exit after {timeout} s; killing it (no plugin report then)")
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.ctl.close()

    def measure(self, ids: list[list[int]], which=LEVELS) -> dict:
        warm, meas = ids[:max(LEVELS)], ids[max(LEVELS):]
        levels = {}
        # Our server compiles an artifact per M bucket on first use: it warms up with the
        # whole mix. llama-server compiles nothing and reserves its compute buffers for the
        # largest batch at load, so one request warms it (its log reports no graph
        # reallocation after that); the full mix would add half an hour of emulation at
        # 1.5B dimensions for nothing.
        for c in (which if self.kind != "llama" else [1]):
            n, s = self.mix(warm, c)
            self.log(f"{self.kind}: warm-up c={c}: {n} tokens in {s:.0f} s (emulated)")
        self.ctl.send("l")
        libs = (self.work / f"fifo-{self.kind}" / "libs").read_text().split()
        self.ggml_cpu = sorted({Path(x).name for x in libs if "libggml-cpu" in x})
        for c in which:
            self.ctl.send(f"o {c}")
            n, s = self.mix(meas, c)
            self.ctl.send(f"c {c}")
            levels[c] = {"requests": c, "tokens": n, "emulated_wall_s": round(s, 1)}
            self.log(f"{self.kind}: counted c={c}: {n} tokens in {s:.0f} s (emulated)")
            # The time to first token: the same requests, one new token each, in a window of their own.
            self.ctl.send(f"o {TTFT_REGION_BASE + c}")
            n1, s1 = self.mix(meas, c, new_tokens=1)
            self.ctl.send(f"c {TTFT_REGION_BASE + c}")
            if n1 != c:
                raise RuntimeError(f"{self.kind}: the first-token window produced {n1} tokens for {c} requests")
            levels[c]["ttft_emulated_wall_s"] = round(s1, 1)
        return levels


def build_lib(log) -> Path:
    out = REPO / "build" / "serve-bench" / "libserve_region.so"
    src = REPO / "bench" / "serve_region.c"
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["clang-19", "--target=riscv64-linux-gnu", "-fuse-ld=lld", "-O2", "-fPIC", "-shared",
                        "-o", str(out), str(src), "-lpthread"], check=True)
        log(f"built {out.relative_to(REPO)}")
    return out


def run_all(args, log) -> dict:
    subprocess.run([str(REPO / "scripts" / "build-qemu-plugins")], check=True, stdout=subprocess.DEVNULL)
    env10 = _env_file()
    lib = build_lib(log)
    tag = args.config + (f"-L{args.layers}" if args.layers else "")
    work = REPO / "build" / "serve-bench" / tag
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "prompts.json").exists() or not (work / f"model-{args.format}.gguf").exists():
        log(f"writing the model, the {args.format} GGUF and prompts into {work.relative_to(REPO)} (emulated, once)")
        subprocess.run([str(REPO / "scripts" / "rv64"), "python3", str(Path(__file__).resolve()), "--prepare",
                        str(work), "--config", args.config, "--format", args.format]
                       + (["--layers", str(args.layers)] if args.layers else []), check=True, cwd=REPO)
    spec = json.loads((work / "prompts.json").read_text())
    ggufs = spec.get("ggufs") or {"bf16": spec["gguf"]}
    result = {"command": args.command, "config": spec["config"], "config_name": spec["config_name"],
              "model_config": spec["model_config"], "linear_bf16_bytes": spec["linear_bf16_bytes"],
              "format": args.format, "gguf": {k: v for k, v in ggufs[args.format].items() if k != "path"},
              "prompt_tokens": PROMPT_TOKENS, "new_tokens": NEW_TOKENS, "levels": list(LEVELS),
              "threads": args.threads, "source": _rev(), "qemu": Path(env10["RVV_BENCH_QEMU10"]).parent.name,
              "plugin": Path(env10["RVV_BENCH_PLUGIN10"]).name,
              "calibration": {"bandwidth": policy.K1_DRAM_ACHIEVED_BYTES_PER_S, "peak": policy.K1_DRAM_BYTES_PER_S,
                              "reference": calibration.REFERENCE, "clock_hz": policy.K1_CLOCK_HZ,
                              "cores": policy.K1_CORES, "cpi_scalar": policy.CPI_SCALAR},
              "servers": {}}
    raw = args.out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    # A run of some servers into a directory that holds others' results of the same setup
    # (config, format, threads) adds to them: the report lists every command that wrote it.
    old = json.loads((raw / "meta.json").read_text()) if (raw / "meta.json").is_file() else {}
    same = all(old.get(k) == result[k] for k in ("config", "format", "threads", "model_config"))
    prior = [c for c in old.get("commands", [old.get("command")]) if c] if same else []
    result["commands"] = prior + [args.command]
    for kind in args.servers:
        r = Run(kind, work, lib, args.threads, log, raw / f"profile-{kind}.tsv" if args.profile else None,
                args.format)
        t0 = time.monotonic()
        r.start(env10)
        try:
            r.wait_ready()
            levels = r.measure(spec["ids"], args.levels)
        finally:
            r.stop()
        if not r.plugin_out.exists():
            raise RuntimeError(f"{kind}: no plugin report ({r.plugin_out}); server log {r.logfile}")
        plugin = json.loads(r.plugin_out.read_text())
        entry = {"argv": r.guest_argv(), "levels_raw": {str(k): v for k, v in levels.items()},
                 "emulated_load_s": round(r.load_s, 1), "emulated_total_s": round(time.monotonic() - t0, 1),
                 "exit": r.proc.returncode, "plugin_notes": plugin.get("notes", {})}
        if kind != "llama":
            entry["ready"] = r.ready_info
        else:
            entry["ggml_cpu"] = r.ggml_cpu
        (raw / f"{kind}.json").write_text(json.dumps({"entry": entry, "plugin": plugin}, indent=1) + "\n")
        result["servers"][kind] = entry
    (raw / "meta.json").write_text(json.dumps({k: v for k, v in result.items() if k != "servers"}, indent=1) + "\n")
    return result


def _server_specs(servers: list[str], threads: int) -> list[tuple[str, int]]:
    """"rvv-cb,llama@4" -> [("rvv-cb", threads), ("llama", 4)]."""
    out = []
    for sv in servers:
        kind, _, t = sv.partition("@")
        out.append((kind, int(t) if t else threads))
    return out


def step_records(plugin: dict, log: list[dict]) -> list[dict]:
    """One record per counted step: its region's K1 compute seconds and DRAM bytes (at the
    counted depth), instructions, and the step's batch features."""
    regions = plugin.get("regions", {})
    out = []
    for line in log:
        if "step" not in line:
            continue
        reg = regions.get(str(line["step"]))
        if reg is None:
            raise ValueError(f"step {line['step']} is in the step log but not in the plugin report")
        e = window_estimate(reg, 1)
        out.append({"step": line["step"], "level": line["level"], "compute_s": e["compute_s"],
                    "dram_bytes": e["dram_bytes"], "insns": e["insns"], "max_thread_insns": e["max_thread_insns"],
                    "features": serve_timeline.step_features(line["batch"])})
    return out


def _mixed_meta(spec: dict, fmt: str, mix: dict, role: str, env10: dict) -> dict:
    """What a --workload mixed raw result records of its setup (role: timeline or fit)."""
    return {"role": role, "config": spec["config"], "config_name": spec["config_name"], "format": fmt,
            "gguf": {k: v for k, v in spec["ggufs"][fmt].items() if k != "path"},
            "model_config": spec["model_config"], "mixed": mix, "source": _rev(),
            "qemu": Path(env10["RVV_BENCH_QEMU10"]).parent.name, "plugin": Path(env10["RVV_BENCH_PLUGIN10"]).name}


def run_mixed(args, log) -> None:
    """--workload mixed: every server in args.servers at every depth in args.layers; raw
    results in OUT/raw/SERVER-tTHREADS-LDEPTH.json."""
    subprocess.run([str(REPO / "scripts" / "build-qemu-plugins")], check=True, stdout=subprocess.DEVNULL)
    env10 = _env_file()
    lib = build_lib(log)
    raw = args.out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for L in args.layers:
        work = REPO / "build" / "serve-bench" / f"{args.config}-L{L}"
        work.mkdir(parents=True, exist_ok=True)
        if not (work / "prompts.json").exists() or not (work / f"model-{args.format}.gguf").exists():
            log(f"writing the model and the {args.format} GGUF into {work.relative_to(REPO)} (emulated, once)")
            subprocess.run([str(REPO / "scripts" / "rv64"), "python3", str(Path(__file__).resolve()), "--prepare",
                            str(work), "--config", args.config, "--format", args.format, "--layers", str(L)],
                           check=True, cwd=REPO)
        spec = json.loads((work / "prompts.json").read_text())
        role = "timeline" if L == args.layers[0] and not args.fit else "fit"
        mix = MIXED if role == "timeline" else MIXED_FIT
        if args.mixed_requests:
            mix = dict(mix, requests={int(a): int(b) for a, b in (x.split(":") for x in args.mixed_requests.split(","))})
        if args.mixed_new:
            mix = dict(mix, new=tuple(int(x) for x in args.mixed_new.split(":")))
        reqs = mixed_requests(spec["model_config"]["vocab_size"], args.levels, mix)
        meta = _mixed_meta(spec, args.format, mix, role, env10)
        for kind, threads in _server_specs(args.servers, args.threads):
            name = f"{kind}-t{threads}-L{L}"
            if (raw / f"{name}.json").exists() and not args.again:
                log(f"{name}: counted before ({raw / f'{name}.json'}); --again counts it anew")
                continue
            r = Run(kind, work, lib, threads, log, None, args.format, mixed=True)
            r.warm_cache()
            t0 = time.monotonic()
            r.start(env10)
            try:
                r.wait_ready()
                levels = r.measure_mixed(reqs, args.levels)
            finally:
                r.stop()
            if not r.plugin_out.exists():
                raise RuntimeError(f"{kind}: no plugin report ({r.plugin_out}); server log {r.logfile}")
            plugin = json.loads(r.plugin_out.read_text())
            entry = dict(meta, kind=kind, threads=threads, layers=L, command=args.command, argv=r.guest_argv(),
                         levels_raw={str(k): v for k, v in levels.items()},
                         emulated_load_s=round(r.load_s, 1), emulated_total_s=round(time.monotonic() - t0, 1),
                         exit=r.proc.returncode, plugin_notes=plugin.get("notes", {}))
            if kind == "llama":
                entry["ggml_cpu"] = r.ggml_cpu
                entry["windows"] = {str(c): window_estimate(plugin["regions"][str(c)], levels[c]["tokens"])
                                    for c in levels}
            else:
                entry["ready"] = r.ready_info
                log_lines = [json.loads(x) for x in r.steps_log.read_text().splitlines() if x.strip()]
                entry["step_log"] = log_lines
                entry["steps"] = step_records(plugin, log_lines)
            (raw / f"{name}.json").write_text(json.dumps(entry, indent=None, separators=(",", ":")) + "\n")
            log(f"{name}: done in {time.monotonic() - t0:.0f} s (emulated)")


def collect_mixed(args, log) -> None:
    """--collect: the raw result of a --workload mixed count whose server was stopped early
    (`q` on its control FIFO: QEMU writes the plugin report of every closed region). Every
    counted step feeds the per-layer fit; only the levels named by --levels, which finished,
    enter the timeline."""
    env10 = _env_file()
    kind, threads = _server_specs([x for x in args.servers.split(",") if x], args.threads)[0]
    L = int(args.layers)
    work = REPO / "build" / "serve-bench" / f"{args.config}-L{L}"
    spec = json.loads((work / "prompts.json").read_text())
    mix = MIXED_FIT if args.fit else MIXED
    if args.mixed_requests:
        mix = dict(mix, requests={int(a): int(b) for a, b in (x.split(":") for x in args.mixed_requests.split(","))})
    r = Run(kind, work, Path("/dev/null"), threads, log, None, args.format, mixed=True)
    plugin = json.loads(r.plugin_out.read_text())
    lines = [json.loads(x) for x in r.steps_log.read_text().splitlines() if x.strip()]
    levels = [str(c) for c in args.levels.split(",")]
    steps = step_records(plugin, lines)
    timeline_log = [x for x in lines if x.get("level") in levels]
    levels_raw = {}
    for x in timeline_log:
        lv = levels_raw.setdefault(x["level"], {"requests": 0, "tokens": 0})
        if "arrival" in x:
            lv["requests"] += 1
        else:
            lv["tokens"] += sum(1 for b in x["batch"] if b[3])
    entry = {**_mixed_meta(spec, args.format, mix, "fit" if args.fit else "timeline", env10), "kind": kind, "threads": threads, "layers": L, "command": args.command, "argv": r.guest_argv(),
             "collected": f"server stopped early; levels {', '.join(levels)} finished and enter the timeline, every "
                          f"counted step ({len(steps)}) feeds the fit",
             "levels_raw": levels_raw, "emulated_load_s": None, "emulated_total_s": None, "exit": None,
             "plugin_notes": plugin.get("notes", {}),
             "ready": json.loads((work / f"ready-{kind}.json").read_text()) if (work / f"ready-{kind}.json").exists()
             else {}, "step_log": timeline_log, "steps": steps}
    raw = args.out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / f"{kind}-t{threads}-L{L}.json").write_text(json.dumps(entry, separators=(",", ":")) + "\n")
    log(f"collected {kind}-t{threads}-L{L}: {len(steps)} steps, levels {levels_raw}")


def _rev() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True,
                             cwd=REPO).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "python", "csrc", "bench/serve_region.c"],
                               capture_output=True, text=True, cwd=REPO).stdout.strip()
        return rev + ("+uncommitted" if dirty else "")
    except OSError:
        return "unknown"


# ----------------------------------------------------------------------------- report (mixed)
def mixed_summary(out: Path, target: int) -> dict:
    """Every raw result in OUT/raw (--workload mixed): our server's steps fitted per depth
    and laid out on the K1 timeline at ``target`` layers; llama-server's level windows
    extrapolated per layer from its two depths."""
    tl = serve_timeline
    raws = [json.loads(f.read_text()) for f in sorted((out / "raw").glob("*-t*-L*.json"))]
    if not raws:
        raise ValueError(f"no --workload mixed results in {out / 'raw'}")
    bw = policy.K1_DRAM_ACHIEVED_BYTES_PER_S
    servers: dict = {}
    for r in raws:
        servers.setdefault((r["kind"], r["threads"]), {})[r["layers"]] = r
    main = next((r for r in raws if r.get("role") == "timeline"), raws[0])
    res = {"target_layers": target, "bandwidth": bw, "servers": {}, "meta": {k: main[k] for k in (
        "config_name", "format", "gguf", "model_config", "mixed", "source", "qemu", "plugin")},
        "commands": sorted({r["command"] for r in raws})}
    for (kind, threads), by_depth in sorted(servers.items()):
        depths = sorted(by_depth)
        entry = {"kind": kind, "threads": threads, "depths": depths, "levels": {}}
        if kind != "llama":
            fits = {L: {k: tl.fit(by_depth[L]["steps"], k) for k in ("compute_s", "dram_bytes")} for L in depths}
            entry["fits"] = fits
            for L in depths:
                d = by_depth[L]
                timeline_role = d.get("role", "timeline") == "timeline"
                for depth in sorted({L, target} if len(depths) > 1 and timeline_role else {L}):
                    times = tl.step_times(d["steps"], fits if len(depths) > 1 else None, depth, L, bw)
                    lv = tl.timeline(d["step_log"], {s["step"]: t for s, t in zip(d["steps"], times)})
                    entry["levels"][f"L{L}->{depth}"] = lv
            entry["ready"] = {L: by_depth[L].get("ready", {}) for L in depths}
        else:
            for L in depths:
                entry["levels"][f"L{L}->{L}"] = {c: {"tok_s": w["est_tok_s"], "tokens": w["tokens"],
                                                     "seconds": w["est_s"]} for c, w in by_depth[L]["windows"].items()}
            # per layer: the difference of two depths' windows, so only over one workload
            if len(depths) > 1 and by_depth[depths[0]]["mixed"] == by_depth[depths[1]]["mixed"]:
                a, b = depths[:2]
                ext = {}
                for c in by_depth[b]["windows"]:
                    wa, wb = by_depth[a]["windows"][c], by_depth[b]["windows"][c]
                    k = (target - b) / (b - a)
                    comp = wb["compute_s"] + k * max(0.0, wb["compute_s"] - wa["compute_s"])
                    mem = wb["memory_s"] + k * max(0.0, wb["memory_s"] - wa["memory_s"])
                    ext[c] = {"tok_s": wb["tokens"] / max(comp, mem), "tokens": wb["tokens"], "seconds": max(comp, mem)}
                entry["levels"][f"L{b}->{target}"] = ext
        entry["emulated"] = {L: {"load_s": by_depth[L]["emulated_load_s"], "total_s": by_depth[L]["emulated_total_s"]}
                             for L in depths}
        entry["collected"] = {L: by_depth[L]["collected"] for L in depths if by_depth[L].get("collected")}
        res["servers"][f"{kind}-t{threads}"] = entry
    return res


def mixed_markdown(res: dict) -> str:
    m, mc, target = res["meta"], res["meta"]["model_config"], res["target_layers"]
    mx = m["mixed"]
    L = ["# Serving at full depth: a mixed workload (ESTIMATED K1 from counted steps; QEMU + rvvcount)", "",
         "Regenerate: " + "; ".join(f"`{c}`" for c in res["commands"]) + f" (source {m['source']}; {m['qemu']}, "
         f"{m['plugin']}); the report alone: `bench/serve_bench.py --workload mixed --report-only --out DIR`.", "",
         f"Model: random Qwen2 at `{m['config_name']}` dimensions (hidden {mc['hidden_size']}, intermediate "
         f"{mc['intermediate_size']}, {mc['num_attention_heads']}/{mc['num_key_value_heads']} heads, vocabulary "
         f"{mc['vocab_size']}), one {m['format'].upper()} GGUF per counted depth that both servers load, counted at "
         f"{' and '.join(str(d) for d in sorted({d for s in res['servers'].values() for d in s['depths']}))} decoder "
         f"layers and extrapolated to **{target}**.", "",
         f"Workload (seed {mx['seed']}): per concurrency level c, {', '.join(f'{n} requests at c={c}' for c, n in mx['requests'].items())}; "
         f"prompts of {mx['prompt'][0]}-{mx['prompt'][1]} tokens, {mx['new'][0]}-{mx['new'][1]} new tokens, greedy, "
         f"uniform from the seed; c closed-loop clients (each sends its next request when its previous one is "
         f"answered). First {mx.get('warm_up_sent', mx['warm_up'])} other requests uncounted (warm-up).", "",
         "| server | threads | c | requests | output tokens | **aggregate tok/s** | TTFT p50 s | TTFT p95 s | "
         "inter-token p50 s | inter-token p95 s |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, s in res["servers"].items():
        key = next((k for k in s["levels"] if k.endswith(f"->{target}")), None)
        if key is None:
            continue
        for c, lv in sorted(s["levels"][key].items(), key=lambda kv: int(kv[0])):
            lat = (f"{lv['ttft_p50']:.2f} | {lv['ttft_p95']:.2f} | {lv['itl_p50']:.3f} | {lv['itl_p95']:.3f}"
                   if "ttft_p50" in lv else "not counted | - | - | -")
            L.append(f"| {s['kind']} | {s['threads']} | {c} | {lv.get('requests', '-')} | {lv['tokens']} | "
                     f"**{lv['tok_s']:.2f}** | {lat} |")
    for name, s in res["servers"].items():
        for depth, note in sorted(s.get("collected", {}).items()):
            L += ["", f"{name} at {depth} layer(s): {note}."]
    L += ["", f"All at {target} layers, the calibrated {res['bandwidth'] / 1e9:.2f} GB/s; per-level c/c1 ratios:", ""]
    for name, s in res["servers"].items():
        key = next((k for k in s["levels"] if k.endswith(f"->{target}")), None)
        if key and "1" in s["levels"][key]:
            lv = s["levels"][key]
            L.append(f"- {name}: " + ", ".join(f"c{c}/c1 = {lv[c]['tok_s'] / lv['1']['tok_s']:.2f}x"
                                               for c in sorted(lv, key=int) if c != "1"))
    L += ["", "Counted depths (each server at its own depth, no extrapolation):", "",
          "| server | layers | c | aggregate tok/s | TTFT p50 s | inter-token p50 s |", "|---|---:|---:|---:|---:|---:|"]
    for name, s in res["servers"].items():
        for key, lvs in s["levels"].items():
            a, b = key[1:].split("->")
            if a != b:
                continue
            for c, lv in sorted(lvs.items(), key=lambda kv: int(kv[0])):
                L.append(f"| {name} | {a} | {c} | {lv['tok_s']:.2f} | "
                         f"{lv['ttft_p50']:.2f} | {lv['itl_p50']:.3f} |" if "ttft_p50" in lv else
                         f"| {name} | {a} | {c} | {lv['tok_s']:.2f} | - | - |")
    for name, s in res["servers"].items():
        if "fits" in s:
            L += ["", f"{name}: per-step fits (compute seconds and DRAM bytes, linear in 1, query tokens, sequences, "
                  "attention pairs); relative residuals p50 / max:", ""]
            for depth, f in sorted(s["fits"].items()):
                L.append(f"- {depth} layers, {f['compute_s']['steps']} steps: compute {f['compute_s']['residual_p50']:.1%} / "
                         f"{f['compute_s']['residual_max']:.1%}, DRAM {f['dram_bytes']['residual_p50']:.1%} / "
                         f"{f['dram_bytes']['residual_max']:.1%}")
    L += ["", "How it is estimated (bench/serve_timeline.py): our server counts every scheduling step in a plugin "
          "region of its own (bench/serve_steps/sitecustomize.py); a step's K1 time = max(compute, DRAM bytes / "
          "bandwidth), compute = max(busiest thread's cycles, all cycles / 8) at 1.6 GHz. A step at the target depth = "
          "its counters plus the missing layers, one layer being the difference of the two depths' per-step fits. "
          "The level's steps are laid back to back; a request arrives at the end of the step after which the server "
          "logged it. llama-server has no per-step regions: each level is one window, extrapolated per layer from "
          "its two depths, and its latencies are not counted. Emulated wall times say nothing about K1 speed.", ""]
    return "\n".join(L)


# ----------------------------------------------------------------------------- report
FORMAT_LABEL = {"bf16": "BF16", "q8_0": "the Q8_0 GGUF, INT8", "q4_0": "the Q4_0 GGUF, INT4"}


def label(kind: str, fmt: str) -> str:
    f = FORMAT_LABEL[fmt]
    return {"rvv-cb": f"rvv_inductor serve --continuous-batching ({f}, RVV Linear)",
            "rvv-seq": f"rvv_inductor serve, sequential ({f}, RVV Linear)",
            "llama": f"llama-server (Debian llama.cpp-tools, the same weights as {fmt.upper()} GGUF)"}.get(kind, kind)


def report(out: Path) -> dict:
    raw = out / "raw"
    meta = json.loads((raw / "meta.json").read_text())
    res = dict(meta, servers={})
    for kind in SERVERS:
        f = raw / f"{kind}.json"
        if not f.exists():
            continue
        d = json.loads(f.read_text())
        res["servers"][kind] = dict(d["entry"], **summarize(d["plugin"], d["entry"]["levels_raw"]))
    (out / "serve.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    (out / "serve.md").write_text(markdown(res))
    return res


def markdown(res: dict) -> str:
    mc = res["model_config"]
    bw = res["calibration"]["bandwidth"]
    fmt = res.get("format", "bf16")
    weights = (f"BF16; Linear weights {res['linear_bf16_bytes'] / 2**20:.1f} MiB per decode step. llama-server reads "
               f"the same weights as a BF16 GGUF ({res['gguf']['file_bytes'] / 2**20:.1f} MiB file)." if fmt == "bf16"
               else f"written as a {fmt.upper()} GGUF ({res['gguf']['file_bytes'] / 2**20:.1f} MiB file; Linear and "
               f"output weights {res['gguf']['linear_weight_bytes'] / 2**20:.1f} MiB per decode step, against "
               f"{res['linear_bf16_bytes'] / 2**20:.1f} MiB in BF16). Both servers load that one file: ours with "
               f"`load_gguf` (its blocks packed for the INT{8 if fmt == 'q8_0' else 4} kernels, no BF16 round "
               f"trip), llama-server as it is.")
    L = ["# Serving benchmark: RVV server vs llama-server (ESTIMATED K1; counts from QEMU + rvvcount)", "",
         f"Regenerate: {'; then '.join(f'`{c}`' for c in res.get('commands') or [res['command']])} "
         f"(source {res['source']}; {res['qemu']}, {res['plugin']}).", "",
         *([res["note"], ""] if res.get("note") else []),
         f"Model: random Qwen2, demo config `{res['config_name']}` "
         f"(hidden {mc['hidden_size']}, intermediate {mc['intermediate_size']}, {mc['num_hidden_layers']} layers, "
         f"{mc['num_attention_heads']}/{mc['num_key_value_heads']} heads, vocab {mc['vocab_size']}), {weights}", "",
         f"Request mix: at concurrency c, c clients send one request each at the same time: a "
         f"{res['prompt_tokens']}-token prompt, {res['new_tokens']} new tokens, greedy; the whole mix is sent once "
         f"uncounted first (warm-up: our server compiles its M-bucket artifacts on first use; llama-server, which "
         f"compiles nothing, gets one request). Each level is one plugin region over the **whole server process** (every "
         f"thread: HTTP, scheduler, model), opened just before the requests and closed after the last answer. "
         f"Compute threads: {res['threads']} per server (`--threads` / llama-server `-t`).", "",
         f"Estimate: time = max(compute, DRAM); compute = max(busiest thread's cycles, all cycles / "
         f"{res['calibration']['cores']} cores) at {res['calibration']['clock_hz'] / 1e9:.1f} GHz (demo/estimate.py's "
         f"cycle model); DRAM = the plugin cache model's bytes (all threads) at the calibrated "
         f"{bw / 1e9:.2f} GB/s (calibration.py, fitted to `{res['calibration']['reference']}`); the peak-bandwidth "
         f"column uses {res['calibration']['peak'] / 1e9:.2f} GB/s. Tokens/s are summed over the level's requests.", "",
         "| server | c | output tokens | instructions / token | busiest thread insns / token | threads | "
         "DRAM bytes / token | bound | **est. K1 tok/s** (calibrated) | est. tok/s (peak BW) | "
         "**est. TTFT s** (calibrated; last of c) | est. TTFT s (peak BW) | emulated wall s |",
         "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for kind, s in res["servers"].items():
        for c, lv in sorted(s["levels"].items(), key=lambda kv: int(kv[0])):
            ttft = (f"**{lv['est_ttft_s']:.2f}** | {lv['est_ttft_s_peak_bw']:.2f}" if "est_ttft_s" in lv
                    else "not counted | -")
            L.append(f"| {kind} | {c} | {lv['tokens']} | {lv['insns_per_token'] / 1e6:.1f} M | "
                     f"{lv['max_thread_insns_per_token'] / 1e6:.1f} M | {lv['threads_active']} | "
                     f"{lv['dram_bytes_per_token'] / 2**20:.2f} MiB | {lv['bound']} | **{lv['est_tok_s']:.1f}** | "
                     f"{lv['est_tok_s_peak_bw']:.1f} | {ttft} | {lv['emulated_wall_s']:.0f} (emulated) |")
    L += ["", f"TTFT: the estimated time until the last of c requests sent together has its first token "
          f"({res['prompt_tokens']}-token prompts, a window of its own with one new token per request): at c = 1 "
          "each request's time to first token. An ESTIMATE with the same model and bandwidths as the throughput."]
    L += ["", "Throughput at the highest concurrency over concurrency 1 (estimate; issue 15's goal: >= 3x):", ""]
    for kind, s in res["servers"].items():
        a, b = s["ratio_levels"]
        if a == b:
            L.append(f"- {label(kind, fmt)}: only c={a} counted, no ratio")
        else:
            L.append(f"- {label(kind, fmt)}: c{b}/c{a} = **{s['ratio_first_last']:.2f}x**")
    L += ["", "Servers:", ""]
    for kind, s in res["servers"].items():
        L.append(f"- `{kind}`: {label(kind, fmt)}; guest command `{' '.join(s['argv'])}`; "
                 f"ready after {s['emulated_load_s']:.0f} s, whole run {s['emulated_total_s']:.0f} s (emulated wall "
                 f"times, not K1 times); plugin notes: {s['plugin_notes'] or 'none'}"
                 + (f"; ggml CPU variant loaded: {', '.join(s['ggml_cpu']) or 'none found'}" if "ggml_cpu" in s else ""))
    L += ["", "Caveats: emulated wall times say nothing about K1 speed. The count of a window includes whatever "
          "the server's threads execute while waiting (event-loop timers, polling), which depends on how long the "
          "emulated window lasts. The cache model is per thread (cold at each region), so data shared by threads "
          "is charged once per thread. The estimate ignores dual issue and DRAM latency.", ""]
    return "\n".join(L)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", choices=sorted(CONFIGS), default="tiny",
                   help="tiny (default), small, 1.5b (Qwen2.5-1.5B dimensions, 1 layer unless --layers) or "
                        "1.5b-v2k (the same dimensions, 2 layers, a 2048-token vocabulary)")
    p.add_argument("--layers", default=None,
                   help="decoder layers (default: the config's); with --workload mixed a list, e.g. 1,2")
    p.add_argument("--workload", choices=("fixed", "mixed"), default="fixed",
                   help="fixed (default): c requests of 32 + 16 tokens per level, each level one window; mixed: "
                        "the issue-42 mix (MIXED) with our server's steps counted one by one and extrapolated to "
                        "--target-layers (bench/serve_timeline.py)")
    p.add_argument("--target-layers", type=int, default=28, help="--workload mixed: the depth to estimate (28)")
    p.add_argument("--again", action="store_true", help="--workload mixed: count results that exist anew")
    p.add_argument("--mixed-requests", default=None,
                   help="--workload mixed: requests per level, e.g. 1:4,2:4,4:8,8:16 (default: MIXED for the first "
                        "depth of --layers, MIXED_FIT for the others)")
    p.add_argument("--mixed-new", default=None, help="--workload mixed: new tokens per request, LO:HI")
    p.add_argument("--collect", action="store_true",
                   help="--workload mixed: the raw result of a count whose server was stopped early (`q` on its "
                        "control FIFO), from its plugin report and step log; --levels names the finished levels")
    p.add_argument("--fit", action="store_true",
                   help="--workload mixed: every depth of --layers only feeds the per-layer fit (MIXED_FIT), e.g. "
                        "a second process counting --layers 2 --fit beside one counting --layers 1")
    p.add_argument("--format", choices=("bf16", "q8_0", "q4_0"), default="bf16",
                   help="weights: bf16 (default; our server loads the checkpoint with compile_linears, llama-server "
                        "a BF16 GGUF), q8_0 or q4_0 (both servers load the same GGUF file)")
    p.add_argument("--servers", default=",".join(DEFAULT_SERVERS), help=f"comma-separated of {', '.join(SERVERS)}")
    p.add_argument("--threads", type=int, default=1, help="compute threads per server (default 1)")
    p.add_argument("--levels", default=",".join(map(str, LEVELS)),
                   help="concurrency levels to run (default 1,2,4,8; a subset of them)")
    p.add_argument("--out", type=Path, default=None, help="results directory (default bench/results/serve)")
    p.add_argument("--profile", action="store_true",
                   help="also write where the counted instructions ran (OUT/raw/profile-SERVER.tsv, all levels "
                        "summed; name them with bench/profile_report.py --sysroot ROOTFS)")
    p.add_argument("--report-only", action="store_true", help="only rebuild serve.md/serve.json from OUT/raw")
    p.add_argument("--prepare", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.prepare:
        prepare(args.prepare, args.config, int(args.layers) if args.layers else None, args.format)
        return 0
    if args.workload == "mixed":
        args.out = args.out or REPO / "bench" / "results" / f"serve-{args.config}-mixed"
        if args.collect:
            args.command = " ".join(["bench/serve_bench.py"] + list(argv if argv is not None else sys.argv[1:]))
            collect_mixed(args, lambda msg: print(f"[serve-bench] {msg}", file=sys.stderr, flush=True))
        elif not args.report_only:
            args.servers = [x for x in args.servers.split(",") if x]
            args.levels = [int(c) for c in args.levels.split(",") if c]
            args.layers = [int(x) for x in (args.layers or "1,2").split(",")]
            args.command = " ".join(["bench/serve_bench.py"] + list(argv if argv is not None else sys.argv[1:]))
            run_mixed(args, lambda msg: print(f"[serve-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr,
                                              flush=True))
        res = mixed_summary(args.out, args.target_layers)
        (args.out / "serve.json").write_text(json.dumps(res, indent=1, sort_keys=True, default=str) + "\n")
        (args.out / "serve.md").write_text(mixed_markdown(res))
        sys.stdout.write(mixed_markdown(res))
        return 0
    args.layers = int(args.layers) if args.layers else None
    args.out = args.out or REPO / "bench" / "results" / "serve"

    def log(msg):
        print(f"[serve-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    if not args.report_only:
        args.servers = [s for s in args.servers.split(",") if s]
        args.levels = [int(c) for c in args.levels.split(",") if c]
        if not args.levels or any(c not in LEVELS for c in args.levels):
            p.error(f"--levels: a subset of {LEVELS}")
        bad = [s for s in args.servers if s not in SERVERS]
        if bad:
            p.error(f"--servers: unknown {', '.join(bad)}")
        cmd = ["bench/serve_bench.py"] + [a for a in (argv if argv is not None else sys.argv[1:])]
        args.command = " ".join(cmd)
        run_all(args, log)
    res = report(args.out)
    sys.stdout.write(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
