"""``python3 -m rvv_inductor serve MODEL``: transformers' own OpenAI-compatible server
(``transformers serve``: /v1/chat/completions, /v1/completions, streaming, continuous
batching with paged attention) with the model's Linear layers on RVV kernels.

Nothing of the server is copied. transformers' ``Serve`` builds its ``ModelManager`` from
``transformers.cli.serving.model_manager`` when it starts; we put a subclass there that
loads the model through our path -- ``compile_linears(model, weights=...)`` for a
checkpoint directory, ``load_gguf`` for a GGUF file -- and leave everything else
(routing, batching, streaming, the HTTP layer) to transformers.

The model is pinned (``force_model``): it is loaded and packed before the port opens,
and it is never unloaded for idleness. /v1/models lists it, and only it (transformers
would list the Hugging Face hub cache, and answer 500 where there is none). Requests are
checked before they reach the model (``serve_requests``): a bad one, another model's name
included, gets a 400 with OpenAI's error body.
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from . import gguf_checks, serve_requests
from .integration import enable

EXIT_BAD_INPUT = 2


class ServeError(Exception):
    """Bad input to ``serve``: printed as one line, exit status 2."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m rvv_inductor serve",
                                description="transformers' OpenAI-compatible server with RVV Linear kernels")
    p.add_argument("model", metavar="MODEL_DIR_OR_GGUF",
                   help="a local Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer) "
                        "or a Qwen2/Qwen3/Llama .gguf file")
    p.add_argument("--weights", choices=("bf16", "int8", "int4"), default=None,
                   help="Linear weight format for a checkpoint directory (default bf16); a GGUF keeps its own")
    p.add_argument("--group-size", type=int, default=None, help="K rows per quantization scale (int8/int4)")
    p.add_argument("--activations", choices=("auto", "int8", "bf16"), default="auto",
                   help="INT8/INT4 layers at M >= 2 (prompt, batched decode): quantize X to INT8 per 32 values "
                        "(int8) or keep the FP path (bf16); auto (default): int8 for INT4 weights, bf16 for INT8")
    p.add_argument("--keep-bf16", action="append", default=[], metavar="PATTERN",
                   help="layers kept in BF16 (fnmatch on the layer name, e.g. lm_head); repeatable")
    p.add_argument("--tokenizer", metavar="DIR", help="tokenizer directory (default: the model's own)")
    p.add_argument("--continuous-batching", action=argparse.BooleanOptionalAction, default=True,
                   help="transformers' continuous batching with paged attention: concurrent requests share each "
                        "step (the default); --no-continuous-batching serves one request at a time")
    p.add_argument("--compile-layers", action=argparse.BooleanOptionalAction, default=None,
                   help="run each decoder layer as one compiled region around its RVV Linear kernels, one graph "
                        "shared by all layers (default: on where the CPU has V; compiled by a warm-up before the "
                        "server says it is ready, loaded from Inductor's persistent cache after the first start)")
    p.add_argument("--attention", choices=("rvv", "sdpa"), default="rvv",
                   help="paged attention of continuous batching: rvv (our kernel, each request against its own "
                        "keys; the default) or sdpa (transformers' paged SDPA with a [tokens, keys] mask)")
    p.add_argument("--cb-block-size", type=int, help="KV cache block size in tokens (continuous batching)")
    p.add_argument("--cb-num-blocks", type=int, help="KV cache blocks (continuous batching)")
    p.add_argument("--cb-max-batch-tokens", type=int, help="tokens per batch (continuous batching)")
    p.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="listen port (default 8000)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    p.add_argument("--log-level", default="warning", help="transformers log level (default warning)")
    p.add_argument("--ready-file", metavar="FILE",
                   help="write a JSON line (port, layers, formats) to FILE once the server accepts requests")
    return p


def _is_gguf(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() == ".gguf"


def check_model(path: str, weights: str | None) -> Path:
    p = Path(path)
    if not p.exists():
        raise ServeError(f"{path}: no such file or directory")
    if _is_gguf(p):
        with open(p, "rb") as f:
            if f.read(4) != b"GGUF":
                raise ServeError(f"{path}: not a GGUF file (bad magic)")
        if weights not in (None, "bf16") and weights is not None:
            raise ServeError(f"--weights {weights}: a GGUF file keeps its own formats (Q8_0, Q4_0, Q4_1, Q5_0, "
                             "Q5_1, the K-quants, BF16); drop --weights, or quantize a checkpoint directory instead")
        # The whole file checked before the tokenizer reads its metadata (a damaged count
        # would hang transformers there, as in load_gguf): gguf_checks, torch-free.
        try:
            gguf_checks.open_checked(p)
        except gguf_checks.GGUFError as e:
            raise ServeError(str(e)) from None
        return p.resolve()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ServeError(f"{path}: a model directory needs config.json (a Hugging Face checkpoint)")
        return p.resolve()
    raise ServeError(f"{path}: expected a checkpoint directory or a .gguf file")


def check_port(host: str, port: int) -> None:
    """Fail early, before the model is loaded, if the port cannot be bound (the way uvicorn
    binds it: SO_REUSEADDR, so a TIME_WAIT socket does not count as busy)."""
    if not 0 < port < 65536:
        raise ServeError(f"--port {port}: not a TCP port")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ServeError(f"--host {host}: {e}") from None
    fam, _, _, _, addr = infos[0]
    s = socket.socket(fam, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(addr)
    except OSError as e:
        why = "already in use" if e.errno == errno.EADDRINUSE else e.strerror
        raise ServeError(f"cannot listen on {host}:{port}: {why}") from None
    finally:
        s.close()


def model_manager_class(opts: argparse.Namespace, summary: dict, stages: "Stages"):
    """transformers' ModelManager, loading through compile_linears / load_gguf."""
    # lazy: transformers; --help and the input checks run without it
    from transformers.cli.serving.model_manager import ModelManager

    class RVVModelManager(ModelManager):
        served: serve_requests.Served  # set once the pinned model is loaded

        def get_gen_models(self, cache_dir=None) -> list[dict]:
            # transformers lists the generative models of the Hugging Face hub cache, and
            # fails where the cache does not exist (a board serving a local directory or a
            # GGUF). This server serves one model whatever the cache holds: that is the list.
            return [self.served.card()]

        def _path(self, model_id_and_revision: str) -> Path:
            return Path(model_id_and_revision.rsplit("@", 1)[0])

        def _load_processor(self, model_id_and_revision: str):
            from transformers import AutoTokenizer  # lazy: transformers; --help and the input checks run without it

            path = self._path(model_id_and_revision)
            if opts.tokenizer:
                return AutoTokenizer.from_pretrained(opts.tokenizer)
            if _is_gguf(path):
                try:
                    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
                except Exception as e:  # noqa: BLE001  (whatever transformers' GGUF tokenizer reader raises)
                    raise ServeError(f"{path}: no tokenizer transformers can read in this GGUF "
                                     f"({type(e).__name__}: {e}); pass --tokenizer DIR") from None
            return super()._load_processor(model_id_and_revision)

        def _load_model(self, model_id_and_revision: str, tqdm_class=None, progress_callback=None):
            from . import regional  # lazy: torch; --help and the input checks run without it

            path = self._path(model_id_and_revision)
            t0 = time.perf_counter()
            layers = compile_layers_wanted(opts)
            if _is_gguf(path):
                model, report = load_gguf_packed(path, opts.activations, compile_layers=layers)
            else:
                model = _load_checkpoint(path, self.attn_implementation)
                report = regional.compile_linears(model, weights=opts.weights or "bf16",
                                                  group_size=opts.group_size, keep_bf16=tuple(opts.keep_bf16),
                                                  activations=opts.activations, compile_layers=layers)
            model.eval()
            summary["compiled_layers"] = len(report.compiled_layers)
            self.served = serve_requests.Served.of(self.force_model, opts.model, model.config)
            if opts.continuous_batching and opts.attention == "rvv":
                # Continuous batching keeps a "paged|" implementation as it finds it.
                from . import attention  # lazy: torch; --help and the input checks run without it

                attention.register()
                model.set_attn_implementation(attention.PAGED_NAME)
            if opts.continuous_batching:
                logits_of_sampled_rows(model)
            summary["attention"] = model.config._attn_implementation
            summary.update(layers_rvv=len(report.taken), layers_fallback=len(report.fell_back),
                           formats=sorted({f for _, f, _, _ in report.formats}) or ["bf16"],
                           activations="int8" if report.int8_activation_layers else "bf16",
                           packed_bytes=report.packed_bytes, bf16_bytes=report.param_bytes,
                           load_s=time.perf_counter() - t0)
            compiled = (f"{summary['compiled_layers']} decoder layers compiled as regions (one shared graph)"
                        if summary["compiled_layers"] else
                        "decoder layers eager" + ("" if layers else " (--no-compile-layers)"))
            stages.done("loaded and packed",
                        f"{path.name}: {len(report.taken)} Linear layers on RVV "
                        f"({', '.join(summary['formats'])}; activations at M >= 2: {summary['activations']}), "
                        f"{len(report.fell_back)} kept on ATen; packed "
                        f"{report.packed_bytes / 2**20:.1f} MiB (BF16 would be {report.param_bytes / 2**20:.1f} MiB); "
                        f"{compiled}; attention {summary['attention']}")
            for name, why in report.fell_back:
                print(f"  ATen: {name}: {why}", flush=True)
            return model

    return RVVModelManager


def logits_of_sampled_rows(model) -> None:
    """Continuous batching's step computes the logits of every query token and keeps one row
    per request (transformers' model runner: ``model(**batch).logits[:, logits_indices]``).
    A 512-token prompt chunk then runs lm_head on 512 rows for the one it samples: at
    Qwen2.5-1.5B dimensions 119 G multiply-adds, 15% of the whole prompt's work at 28 layers.
    The model is given ``logits_to_keep=logits_indices`` instead (transformers' CausalLM
    heads take index tensors), and the kept rows are put where the runner reads them, in an
    otherwise unwritten tensor: the same rows of the same lm_head, 1/T of the work. (With
    INT8 activations the kept rows may now go through the M = 1 GEMV instead of the batched
    GEMM: the same logits as ``generate`` computes for them.)"""
    forward = model.forward

    @functools.wraps(forward)
    def sampled_rows_forward(*args, logits_indices=None, **kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if logits_indices is None or "logits_to_keep" in kwargs or ids is None or ids.dim() != 2:
            return forward(*args, **kwargs)
        out = forward(*args, logits_to_keep=logits_indices, **kwargs)
        kept = out.logits  # [1, rows kept, vocab]
        full = kept.new_empty(kept.shape[0], ids.shape[1], kept.shape[2])
        full[:, logits_indices] = kept
        out.logits = full
        return out

    model.forward = sampled_rows_forward


def load_gguf_packed(path, activations: str = "auto", compile_layers: bool = False):
    """``load_gguf`` (the file's Q8_0/Q4_0 Linears packed as they are), then
    ``compile_linears`` for the Linears the file holds in BF16/F16 -- among them a tied
    lm_head, which reads the embedding table: without this it would run on ATen, and the
    vocabulary matrix would be held twice. ``compile_layers``: the decoder layers then run
    as compiled regions (``compile_linears(compile_layers=True)``). Returns (model,
    LinearReport of every layer)."""
    # lazy: torch; --help and the input checks run without it
    from . import regional
    from .gguf_load import load_gguf

    model = load_gguf(path, activations=activations)
    quant = [(name, m) for name, m in model.named_modules() if isinstance(m, regional.RVVLinear)]
    report = regional.compile_linears(model, activations=activations, compile_layers=compile_layers)
    for name, m in quant:
        if getattr(m, "activations_used", "bf16") == "int8":
            report.int8_activation_layers.append(name)
        bf16 = m.out_features * m.in_features * 2
        report.taken.append((name, m.out_features, m.in_features))
        report.formats.append((name, m.format, m.packed_bytes, bf16))
        report.packed_bytes += m.packed_bytes
        report.param_bytes += bf16
    return model, report


def compile_layers_wanted(opts: argparse.Namespace) -> bool:
    """--compile-layers / --no-compile-layers, else on where the CPU has V (the compiled
    regions run our kernels; without V they would only add compile time)."""
    from . import cpu  # lazy: the effective CPU (RVV_INDUCTOR_CPU validated)

    if opts.compile_layers is False or (opts.compile_layers is None and not cpu.effective().has_v):
        return False
    problem = cxx_problem()
    if problem is None:
        return True
    if opts.compile_layers:
        raise ServeError(f"--compile-layers needs a C++ compiler for Inductor: {problem}")
    print(f"rvv_inductor serve: decoder layers not compiled: no C++ compiler for Inductor ({problem}); "
          "install g++ for the fast path", flush=True)
    return False


def cxx_problem() -> str | None:
    """Why Inductor has no C++ compiler here (it would fail at the first compiled layer),
    or None."""
    # lazy: torch's C++ builder, only when layers may be compiled
    from torch._inductor import cpp_builder
    from torch._inductor.exc import InvalidCxxCompiler

    try:
        cpp_builder.get_cpp_compiler()
    except InvalidCxxCompiler as e:
        return str(e)
    return None


class Stages:
    """Prints each start-up stage as it ends, with the time since start and its own time;
    ``seconds`` keeps them for the ready file."""

    def __init__(self) -> None:
        self.t0 = self.last = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def done(self, name: str, detail: str = "") -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self.last, 2)
        print(f"rvv_inductor serve: [{now - self.t0:7.1f} s] {name} ({now - self.last:.1f} s)"
              + (f": {detail}" if detail else ""), flush=True)
        self.last = now

    def total(self) -> float:
        return time.perf_counter() - self.t0


# The warm-up's requests: (prompt words, new tokens) per round, the requests of a round sent
# at once. It gives the compiled layers every kind of step a server meets -- a prompt alone,
# prompts of other lengths, several prompts in one batch, a batch mixing a prompt with
# decoding requests, decode steps of 1 to 3 requests -- so that their sizes become dynamic
# here and later traffic compiles nothing new (tests/python/test_serve.py counts that).
WARM_UP = (((3, 2),), ((6, 3),), ((4, 4), (9, 2)), ((5, 5), (2, 3), (7, 4)))


def warm_up(running: "Server") -> dict:
    """Sends the warm-up requests to the running server; returns what compiled meanwhile
    (graphs, and Inductor cache hits/misses: a warm restart has no misses)."""
    # lazy: only when layers are compiled, after the server started
    import concurrent.futures as cf
    import urllib.error
    import urllib.request

    import torch  # lazy: torch; loaded by now

    counters = torch._dynamo.utils.counters

    def snapshot():
        # Graphs Dynamo made; Inductor graphs found in its persistent FX graph cache (also
        # when AOTAutograd's cache serves them); Inductor graphs compiled. A Dynamo graph may
        # hold several Inductor graphs.
        return (counters["stats"]["unique_graphs"], counters["inductor"]["fxgraph_cache_hit"],
                counters["inductor"]["fxgraph_cache_miss"])

    before = snapshot()

    def one(words_tokens):
        words, tokens = words_tokens
        body = json.dumps({"model": running.model_id, "prompt": " ".join(["warm"] * words),
                           "max_tokens": tokens, "temperature": 0}).encode()
        req = urllib.request.Request(f"{running.url}/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=3600) as r:
                r.read()
        except (urllib.error.URLError, OSError) as e:  # HTTPError (a 500: the compile failed), a timeout
            raise ServeError(f"the compiled layers' warm-up failed ({e}); the lines above say why; "
                             "--no-compile-layers serves without compiled layers") from None

    for round_ in WARM_UP:
        with cf.ThreadPoolExecutor(len(round_)) as ex:
            list(ex.map(one, round_))
    after = snapshot()
    return {"graphs": after[0] - before[0], "inductor_cache_hits": after[1] - before[1],
            "inductor_cache_misses": after[2] - before[2]}


def _load_checkpoint(path: Path, attn_implementation: str | None):
    """The checkpoint's causal LM in BF16 on the CPU. (transformers' own loader passes
    ``device_map``, which needs accelerate, not packaged in Debian.)"""
    # lazy: torch and transformers; --help and the input checks run without them
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(path)
    arch = (getattr(config, "architectures", None) or [None])[0]
    cls = getattr(transformers, arch, None) if arch else None
    if cls is None:
        cls = transformers.AutoModelForCausalLM
    kwargs = {"dtype": torch.bfloat16}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    return cls.from_pretrained(path, **kwargs)


@contextlib.contextmanager
def _replaced(attrs: list):
    """transformers' ``Serve`` looks its model manager, handlers and generation state up in
    their modules when it is built: ours stand there meanwhile, (module, name, ours) each."""
    saved = [(mod, name, getattr(mod, name)) for mod, name, _ in attrs]
    for mod, name, value in attrs:
        setattr(mod, name, value)
    try:
        yield
    finally:
        for mod, name, value in saved:
            setattr(mod, name, value)


def _wait_until_listening(server, thread: threading.Thread, timeout: float) -> None:
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if getattr(server, "started", False):
            return
        if not thread.is_alive():
            raise ServeError("the HTTP server stopped while starting (port taken meanwhile?)")
        time.sleep(0.05)
    raise ServeError(f"the HTTP server did not start within {timeout:.0f} s")


class Server:
    """A running server: ``srv`` is transformers' ``Serve`` (uvicorn in a thread),
    ``summary`` what the load did (layers, formats, packed bytes)."""

    def __init__(self, srv, summary: dict, url: str) -> None:
        self.srv, self.summary, self.url = srv, summary, url

    @property
    def model_id(self) -> str:
        return self.srv._model_manager.force_model

    @property
    def model(self):
        """The loaded (RVV) model object the server generates with."""
        mm = self.srv._model_manager
        return mm.loaded_models[mm.process_model_name(mm.force_model)].model

    def alive(self) -> bool:
        return self.srv._thread is not None and self.srv._thread.is_alive()

    def stop(self) -> None:
        self.srv.kill_server()


def start(opts: argparse.Namespace) -> Server:
    """Load the model through our path and start transformers' server in a thread; return
    once it accepts connections. Raises ServeError (or ValueError from the loaders) on
    bad input."""
    stages = Stages()
    model = check_model(opts.model, opts.weights)
    check_port(opts.host, opts.port)
    if opts.threads:
        import torch  # lazy: torch; --help and the input checks run without it

        torch.set_num_threads(opts.threads)
    enable()
    try:
        # lazy: transformers' server (fastapi, uvicorn): only when serving, and its absence is a ServeError
        from transformers.cli import serve as tserve
        from transformers.cli.serving import chat_completion, completion, response, utils
        from transformers.cli.serving import model_manager as tmm
    except ImportError as e:
        raise ServeError(f"transformers' server is not available here ({e}); on Debian install "
                         "python3-fastapi python3-uvicorn python3-openai") from None

    stages.done("imported torch and transformers' server")
    summary: dict = {}
    ours = [(tmm, "ModelManager", model_manager_class(opts, summary, stages)),
            (utils, "GenerationState", serve_requests.checked_generation_state(utils.GenerationState)),
            (completion, "CompletionHandler", serve_requests.checked_handler(completion.CompletionHandler,
                                                                             "completions")),
            (chat_completion, "ChatCompletionHandler",
             serve_requests.checked_handler(chat_completion.ChatCompletionHandler, "chat")),
            (response, "ResponseHandler", serve_requests.checked_handler(response.ResponseHandler, "responses"))]
    with _replaced(ours):
        srv = tserve.Serve(force_model=str(model), continuous_batching=opts.continuous_batching,
                           device="cpu", dtype="bfloat16", host=opts.host, port=opts.port,
                           log_level=opts.log_level, cb_block_size=opts.cb_block_size,
                           cb_num_blocks=opts.cb_num_blocks, cb_max_batch_tokens=opts.cb_max_batch_tokens,
                           non_blocking=True)
    running = Server(srv, summary, f"http://{opts.host}:{opts.port}/v1")
    try:
        _wait_until_listening(srv.server, srv._thread, timeout=120)
        stages.done("HTTP server started")
        if summary.get("compiled_layers"):
            w = warm_up(running)
            summary["warm_up"] = w
            stages.done("compiled the decoder layers' graphs (warm-up)",
                        f"{w['graphs']} graphs; Inductor's cache: {w['inductor_cache_hits']} hits, "
                        f"{w['inductor_cache_misses']} compiled")
    except BaseException:
        running.stop()
        raise
    summary["startup_s"] = dict(stages.seconds, total=round(stages.total(), 2))
    return running


def serve(opts: argparse.Namespace) -> int:
    """The command: start, print, wait for SIGINT/SIGTERM, stop cleanly."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    running = start(opts)
    try:
        print(f"rvv_inductor serve: ready after {running.summary['startup_s']['total']:.1f} s, listening on "
              f"{running.url} (continuous batching {'on' if opts.continuous_batching else 'off'}); Ctrl-C stops",
              flush=True)
        if opts.ready_file:
            Path(opts.ready_file).write_text(json.dumps(dict(running.summary, port=opts.port, pid=os.getpid(),
                                                             model=running.model_id)) + "\n")
        while not stop.wait(0.5):
            if not running.alive():
                print("rvv_inductor serve: the HTTP server stopped", file=sys.stderr)
                return 1
    finally:
        running.stop()
    print("rvv_inductor serve: stopped", flush=True)
    return 0


def main(argv: list[str]) -> int:
    opts = parser().parse_args(argv)
    try:
        return serve(opts)
    except (ServeError, ValueError) as e:  # ValueError: GGUFError, compile_linears' format checks
        print(f"rvv_inductor serve: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
