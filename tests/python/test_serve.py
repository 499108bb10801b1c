"""``python3 -m rvv_inductor serve``: transformers' own server with RVV Linear layers.

A tiny random Llama checkpoint (every Linear 320x320, so one compiled artifact per M
bucket) with a byte-level BPE tokenizer is written to a temporary directory. The server
runs in this process (uvicorn in a thread, loopback only), so the tests can count the
Linear calls it makes; the command-line tests run it as a subprocess.

References: each prompt's greedy completion with no other request in flight, and eager
transformers (ATen) on the same checkpoint, compared on decisive positions (the top-2
logit margin of the eager model larger than TIE_MARGIN, the BF16 noise between two
correct implementations: the agreement tolerance the other model tests use).
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from argparse import Namespace
from pathlib import Path

import pytest

from rvv_inductor import cpu

pytestmark = pytest.mark.skipif(not cpu.detect().is_riscv64 or not cpu.detect().has_v,
                                reason="needs riscv64 with V (emulated or native)")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from rvv_inductor import serve  # noqa: E402

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma", "omega",
         "risc", "vector"]
DIM, VOCAB, NEW = 320, 320, 6
CONTEXT = 64  # the model's max_position_embeddings
REPO = Path(__file__).resolve().parents[2]
TIE_MARGIN = 0.125  # logits of these models are O(1): a few BF16 ulps


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def greedy_with_margins(model, tok, prompt: str, n: int):
    """The model's greedy ids for ``prompt`` and the top-2 logit margin at each step."""
    ids = tok(prompt, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=n, do_sample=False, output_scores=True,
                             return_dict_in_generate=True)
    gen = out.sequences[0, ids.shape[1]:].tolist()
    return gen, [float(s[0].float().topk(2).values.diff().abs()) for s in out.scores]


def _prompt(i: int) -> str:
    return " ".join(WORDS[(i * 5 + j) % len(WORDS)] for j in range(5 + i % 4))


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    out = tmp_path_factory.mktemp("serve-model")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(12)) for i in range(100)]
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                      special_tokens=["<|endoftext|>"]))
    ft = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                              pad_token="<|endoftext|>")
    ft.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=DIM, intermediate_size=DIM, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=4, vocab_size=VOCAB, max_position_embeddings=CONTEXT,
                                   tie_word_embeddings=False, bos_token_id=None, eos_token_id=None,
                                   initializer_range=0.2)
    transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(out)
    ft.save_pretrained(out)
    # No EOS: every request generates exactly max_tokens (tokens are compared by count).
    (out / "generation_config.json").write_text(json.dumps({"do_sample": False}))
    return out


def _opts(model, **kw) -> Namespace:
    d = dict(model=str(model), weights=None, group_size=None, keep_bf16=[], tokenizer=None, activations="auto",
             continuous_batching=False, compile_layers=False, attention="rvv", cb_block_size=None, cb_num_blocks=None,
             cb_max_batch_tokens=None,
             host="127.0.0.1", port=_free_port(), threads=0, log_level="error", ready_file=None)
    d.update(kw)
    return Namespace(**d)


class Client:
    def __init__(self, running) -> None:
        self.url, self.model = running.url, running.model_id
        # No keep-alive: uvicorn closes a connection idle for 5 s, and emulated checks between
        # requests take longer, so a reused connection could be reset under the next POST.
        self.http = httpx.Client(timeout=900, limits=httpx.Limits(max_keepalive_connections=0))

    def complete(self, prompt: str, max_tokens: int = NEW, **kw) -> str:
        r = self.http.post(f"{self.url}/completions", json=dict(model=self.model, prompt=prompt,
                                                                max_tokens=max_tokens, temperature=0, **kw))
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["text"]

    def many(self, prompts: list[str], workers: int, max_tokens: int = NEW) -> list[str]:
        with cf.ThreadPoolExecutor(workers) as ex:
            return list(ex.map(lambda p: self.complete(p, max_tokens), prompts))


class LinearCalls:
    """Counts the calls of one Linear layer and the rows (M) of each."""

    def __init__(self, layer) -> None:
        self.rows: list[int] = []
        self._h = layer.register_forward_pre_hook(lambda _m, args: self.rows.append(args[0].reshape(-1, DIM).shape[0]))

    def take(self) -> list[int]:
        rows, self.rows = self.rows, []
        return rows

    def close(self) -> None:
        self._h.remove()


@pytest.fixture(scope="module")
def eager_ref(ckpt):
    """Greedy ids and top-2 margins of the eager (ATen) model, per prompt."""
    tok = transformers.AutoTokenizer.from_pretrained(ckpt)
    model = transformers.AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.bfloat16).eval()

    def ref(prompt: str, n: int = NEW):
        return greedy_with_margins(model, tok, prompt, n)

    return tok, ref


def _check_against_eager(text: str, prompt: str, eager_ref) -> None:
    tok, ref = eager_ref
    gen, margins = ref(prompt)
    decisive = next((i for i, m in enumerate(margins) if m <= TIE_MARGIN), len(gen))
    expect = tok.decode(gen[:decisive])
    assert text.startswith(expect), (prompt, text, tok.decode(gen), margins)


@pytest.mark.parametrize("cb", [False, True], ids=["sequential", "continuous-batching"])
def test_concurrent_requests_equal_alone_and_eager(ckpt, eager_ref, cb):
    from rvv_inductor import runtime

    running = serve.start(_opts(ckpt, continuous_batching=cb))
    try:
        assert running.summary["layers_rvv"] == 2 * 7 + 1 and running.summary["layers_fallback"] == 0
        # Continuous batching attends through our kernel, each request against its own keys.
        assert running.summary["attention"] == ("paged|rvv" if cb else "sdpa")
        model = running.model
        calls = LinearCalls(model.model.layers[0].self_attn.q_proj)
        c = Client(running)
        prompts = [_prompt(i) for i in range(8)]
        alone = [c.complete(p) for p in prompts]
        alone_calls = calls.take()
        for text, p in zip(alone, prompts):
            assert len(text) > 0
            _check_against_eager(text, p, eager_ref)
        # (The sequential server serves one at a time: one level of concurrency tells.)
        levels = (4, 8) if cb else (8,)
        for n in levels:
            assert c.many(prompts[:n], workers=n) == alone[:n], f"{n} concurrent requests"
        batched_calls = calls.take()
        calls.close()
        # One request alone: a prefill and NEW - 1 decode steps, one row each.
        assert len(alone_calls) == len(prompts) * NEW
        if cb:
            # Continuous batching shares forward passes between requests: far fewer calls
            # than requests x steps, and decode calls with several rows.
            unbatched = sum(levels) * NEW
            assert len(batched_calls) < unbatched / 2, batched_calls
            assert max(batched_calls) >= 4
        # Every row count reached a bucketed artifact (one row: the operator directly), and
        # no more variants than buckets.
        keys = runtime.artifact_keys()
        from rvv_inductor.policy import M_BUCKETS, m_bucket
        assert {k[2] for k in keys} <= set(M_BUCKETS)
        ran = {k[2] for k in keys} | {k[2] for k in runtime.direct_keys()}
        assert {m_bucket(m) for m in alone_calls + batched_calls if m <= M_BUCKETS[-1]} <= ran
        assert len({(n, k, b) for n, k, b, _ in keys}) <= len(M_BUCKETS) * 2  # one 320x320 shape, lm_head too
    finally:
        running.stop()
    assert not running.alive()


@pytest.mark.slow  # ~115 s emulated
def test_continuous_batching_computes_only_the_sampled_logits():
    """serve.logits_of_sampled_rows: a continuous-batching step (input_ids [1, T] with
    logits_indices, as transformers' model runner calls the model) runs lm_head on the
    sampled rows only, and the runner's logits[:, logits_indices] are the full forward's."""
    from small_decoders import random_decoder

    model = random_decoder("qwen2", hidden=64, heads=4, kv_heads=2, vocab=96, max_positions=64, init_range=0.2,
                           seed=5).eval()
    ids = torch.randint(0, 96, (1, 23), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = model(input_ids=ids).logits
    rows = []
    model.lm_head.register_forward_hook(lambda m, args, out: rows.append(args[0].shape[1]))
    serve.logits_of_sampled_rows(model)
    idx = torch.tensor([6, 15, 22])  # the last token of three packed sequences
    with torch.no_grad():
        got = model(input_ids=ids, logits_indices=idx).logits
        plain = model(input_ids=ids).logits  # no logits_indices: the model as it was
    assert rows == [3, 23]
    assert got.shape == want.shape
    torch.testing.assert_close(got[:, idx], want[:, idx], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(plain, want, rtol=0, atol=0)


def test_qwen3_gguf_serves(ckpt, tmp_path):
    """A qwen3 GGUF file (write_gguf's Q4_0 of a random Qwen3: 4 heads of 128 in a width of
    320, so the paged KV cache's head size is not hidden / heads) served with continuous
    batching and the test's tokenizer: every Linear on RVV, attention "paged|rvv", and each
    prompt's completion, alone and with 4 in flight, is load_gguf's own greedy decode where
    its top-2 margins are decisive."""
    from small_decoders import random_decoder

    from rvv_inductor.demo import llamacpp
    from rvv_inductor.gguf_load import load_gguf

    src = random_decoder("qwen3", hidden=DIM, heads=4, kv_heads=2, head_dim=128, vocab=VOCAB,
                         max_positions=CONTEXT, init_range=0.2, seed=3).to(torch.bfloat16).eval()
    path = Path(llamacpp.write_gguf(src, tmp_path / "qwen3-q4_0.gguf", "q4_0")["path"])
    tok = transformers.AutoTokenizer.from_pretrained(ckpt)
    ours = load_gguf(path)
    prompts = [_prompt(i) for i in range(4)]
    running = serve.start(_opts(path, tokenizer=str(ckpt), continuous_batching=True))
    try:
        assert running.summary["layers_rvv"] == 2 * 7 + 1 and running.summary["layers_fallback"] == 0
        assert running.summary["attention"] == "paged|rvv"
        assert running.model.config.model_type == "qwen3" and running.model.config.head_dim == 128
        c = Client(running)
        alone = [c.complete(p) for p in prompts]
        assert c.many(prompts, workers=4) == alone
    finally:
        running.stop()
    for text, p in zip(alone, prompts):
        gen, margins = greedy_with_margins(ours, tok, p, NEW)
        decisive = next((i for i, m in enumerate(margins) if m <= TIE_MARGIN), len(gen))
        assert text.startswith(tok.decode(gen[:decisive])), (p, text, tok.decode(gen), margins)


def test_robustness(ckpt):
    running = serve.start(_opts(ckpt, continuous_batching=True))
    try:
        c = Client(running)
        first = c.complete(_prompt(1))
        # A client that goes away in the middle of a stream.
        with httpx.Client(timeout=900) as h:
            with h.stream("POST", f"{running.url}/completions",
                          json=dict(model=c.model, prompt=_prompt(2), max_tokens=32, stream=True)) as r:
                assert r.status_code == 200
                next(r.iter_lines())
        # Malformed requests get a 4xx answer.
        assert 400 <= c.http.post(f"{running.url}/completions", content=b"{not json").status_code < 500
        assert 400 <= c.http.post(f"{running.url}/completions",
                                  json=dict(model=c.model, prompt=123)).status_code < 500
        assert 400 <= c.http.post(f"{running.url}/completions",
                                  json=dict(model="another-model", prompt="alpha")).status_code < 500
        # A prompt longer than the model's context.
        long = c.http.post(f"{running.url}/completions",
                           json=dict(model=c.model, prompt=" ".join(WORDS * 20), max_tokens=4))
        assert long.status_code != 200 or long.json()["choices"][0]["text"] is not None
        # ... and the server still answers, the same as before. (Many requests from many
        # clients, none lost: test_default_path_under_load.)
        assert c.complete(_prompt(1)) == first
        assert running.alive()
    finally:
        running.stop()


def _serve_cmd(*args):
    return [sys.executable, "-m", "rvv_inductor", "serve", *map(str, args)]


def _run(*args, timeout=300):
    return subprocess.run(_serve_cmd(*args), capture_output=True, text=True, timeout=timeout)


def test_cli_bad_input(ckpt, tmp_path):
    r = _run(tmp_path / "nope")
    assert r.returncode == serve.EXIT_BAD_INPUT and "no such file" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "empty").mkdir()
    r = _run(tmp_path / "empty")
    assert r.returncode == serve.EXIT_BAD_INPUT and "config.json" in r.stderr
    (tmp_path / "bad.gguf").write_bytes(b"NOPE" + bytes(60))
    r = _run(tmp_path / "bad.gguf")
    assert r.returncode == serve.EXIT_BAD_INPUT and "GGUF" in r.stderr and "Traceback" not in r.stderr
    r = _run(ckpt, "--weights", "int3")
    assert r.returncode == 2 and "invalid choice" in r.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        r = _run(ckpt, "--port", busy.getsockname()[1])
    assert r.returncode == serve.EXIT_BAD_INPUT and "already in use" in r.stderr and "Traceback" not in r.stderr


def _wait_ready(p, ready, seconds=600):
    """Until the server wrote its ready file (it loads and packs the model first)."""
    t_end = time.monotonic() + seconds
    while not ready.exists():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < t_end
        time.sleep(0.5)


# ----------------------------------------------------------------------------- the default path, under load
# The default path's flags for these tests: INT4 with the FP path at M >= 2, so that a
# batched row computes what it computes alone (INT8 activations round X per batch shape:
# close, not bit-equal).
DEFAULT_PATH_ARGS = ("--weights", "int4", "--activations", "bf16")


def _graphs() -> int:
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _cut_stream(c: Client, prompt: str) -> None:
    """A client that reads one streamed chunk and leaves."""
    with httpx.Client(timeout=900) as h:
        with h.stream("POST", f"{c.url}/completions", json=dict(model=c.model, prompt=prompt, max_tokens=12,
                                                                 temperature=0, stream=True)) as r:
            assert r.status_code == 200
            next(r.iter_lines())


@pytest.fixture(scope="module")
def default_server(ckpt, tmp_path_factory):
    """``serve MODEL`` with no flags but DEFAULT_PATH_ARGS, started in this process with an
    Inductor cache of its own (cold: the warm-up compiles); yields (server, cache dir)."""
    cache = tmp_path_factory.mktemp("inductor-default")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
        torch._dynamo.reset()
        opts = serve.parser().parse_args([str(ckpt), *DEFAULT_PATH_ARGS, "--port", str(_free_port()),
                                          "--log-level", "error"])
        running = serve.start(opts)
        try:
            yield running, cache
        finally:
            running.stop()
            torch._dynamo.reset()


def test_default_path_under_load(default_server):
    """What ``serve MODEL`` gives with no flags: continuous batching, the decoder layers
    compiled (one graph for both layers, warmed up before ready), attention on our paged
    kernel. Then a bounded load test: mixed-length requests from 16 clients, some cut
    mid-stream; every completed text equals its greedy text run alone; nothing compiles
    after the warm-up; the KV blocks come back; RSS stays within 5% of its level after the
    requests ran alone."""
    running, _ = default_server
    defaults = serve.parser().parse_args(["model"])
    assert defaults.continuous_batching is True and defaults.compile_layers is None
    s = running.summary
    assert s["compiled_layers"] == 2 and s["attention"] == "paged|rvv" and s["formats"] == ["int4"], s
    assert s["warm_up"]["graphs"] >= 2 and s["warm_up"]["inductor_cache_misses"] >= 1, s["warm_up"]
    assert {"loaded and packed", "compiled the decoder layers' graphs (warm-up)"} <= set(s["startup_s"]), s
    c = Client(running)
    jobs = [(_prompt(i), 2 + (i * 5) % 11) for i in range(12)]  # prompts of 5-8 words, 2-12 new tokens
    alone = {j: c.complete(*j) for j in jobs}
    cache = serve.serve_requests._paged_cache(running.srv._generation_state._cb_manager)
    free0, rss0, graphs0 = cache.get_num_free_blocks(), _rss_kib(), _graphs()

    def request(i):
        job = jobs[i % len(jobs)]
        if i % 9 == 4:
            _cut_stream(c, job[0])
            return None
        return job, c.complete(*job)

    n = 64
    with cf.ThreadPoolExecutor(16) as ex:
        results = list(ex.map(request, range(n)))
    done = [r for r in results if r is not None]
    assert len(done) == n - len([i for i in range(n) if i % 9 == 4])
    for job, text in done:
        assert text == alone[job], (job, text, alone[job])
    assert _graphs() == graphs0, f"{_graphs() - graphs0} graphs compiled after the warm-up"
    t_end = time.monotonic() + 60  # a cut request's blocks are freed when the worker notices
    while cache.get_num_free_blocks() != free0 and time.monotonic() < t_end:
        time.sleep(0.5)
    assert cache.get_num_free_blocks() == free0
    assert _rss_kib() <= 1.05 * rss0, (rss0, _rss_kib())
    assert running.alive()


def test_compiled_layers_without_a_compiler(monkeypatch, capsys):
    """No C++ compiler for Inductor: by default the layers stay eager, said in one line; with
    --compile-layers the start is refused in one line (never a failure in a forward)."""
    assert serve.compile_layers_wanted(serve.parser().parse_args(["m"])) is True  # this machine has g++
    assert serve.compile_layers_wanted(serve.parser().parse_args(["m", "--no-compile-layers"])) is False
    monkeypatch.setattr(torch._inductor.config.cpp, "cxx", (None, "/nonexistent/g++"))
    assert serve.compile_layers_wanted(serve.parser().parse_args(["m"])) is False
    assert "decoder layers not compiled: no C++ compiler" in capsys.readouterr().out
    with pytest.raises(serve.ServeError, match=r"--compile-layers needs a C\+\+ compiler"):
        serve.compile_layers_wanted(serve.parser().parse_args(["m", "--compile-layers"]))


@pytest.mark.slow
def test_cli_default_path_restarts_warm_and_stops_on_sigterm(ckpt, default_server, tmp_path):
    """The command with the default path, in a new process on the Inductor cache the
    in-process server filled: its warm-up traces the graphs again and compiles none; it
    prints its start-up stages, answers, and stops with exit 0 on SIGTERM."""
    _, cache = default_server
    ready = tmp_path / "ready.json"
    port = _free_port()
    p = subprocess.Popen(_serve_cmd(ckpt, *DEFAULT_PATH_ARGS, "--port", port, "--ready-file", ready),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache)))
    try:
        _wait_ready(p, ready, seconds=1200)
        info = json.loads(ready.read_text())
        assert info["formats"] == ["int4"] and info["layers_rvv"] == 15 and info["activations"] == "bf16"
        assert info["packed_bytes"] < 0.35 * info["bf16_bytes"]
        assert info["compiled_layers"] == 2 and info["attention"] == "paged|rvv"
        assert info["warm_up"]["graphs"] >= 2 and info["warm_up"]["inductor_cache_misses"] == 0, info["warm_up"]
        r = httpx.post(f"http://127.0.0.1:{port}/v1/completions", timeout=900,
                       json=dict(model=info["model"], prompt=_prompt(0), max_tokens=2, temperature=0))
        assert r.status_code == 200 and r.json()["choices"][0]["text"]
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert "15 Linear layers on RVV (int4; activations at M >= 2: bf16)" in out and "stopped" in out
    for stage in ("imported torch", "loaded and packed", "HTTP server started",
                  "compiled the decoder layers' graphs (warm-up)", "ready after"):
        assert stage in out, (stage, out)


# ----------------------------------------------------------------------------- the first request, and bad ones
def _openai_error(r, status: int = 400) -> dict:
    """The error of an answer in OpenAI's shape, after checking the shape."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["message"], body
    return body["error"]


@pytest.fixture(scope="module")
def tok(ckpt):
    return transformers.AutoTokenizer.from_pretrained(ckpt)


def _n_tokens(tok, text: str) -> int:
    return len(tok(text)["input_ids"])


@pytest.mark.installed
def test_models_lists_the_served_model_without_hf_cache(ckpt, tmp_path):
    """GET /v1/models, the first call of OpenAI clients, on a machine without a Hugging Face
    cache (transformers scanned the hub cache there and answered 500): the model served,
    under the id completions accept. The command gets the checkpoint as a user would type
    it, relative to its working directory."""
    (REPO / "build" / "tmp").mkdir(parents=True, exist_ok=True)
    hf_home = Path(tempfile.mkdtemp(prefix="serve-hf-home-", dir=REPO / "build" / "tmp"))
    env = dict(os.environ, HF_HOME=str(hf_home))
    env.pop("HF_HUB_CACHE", None)
    ready, port = tmp_path / "ready.json", _free_port()
    # --no-compile-layers: the listing does not depend on it, and the installed wheel's compiled
    # layers would compile cold here (the in-repo tests above run that path).
    p = subprocess.Popen(_serve_cmd(ckpt.name, "--no-compile-layers", "--port", port, "--ready-file", ready),
                         cwd=ckpt.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_ready(p, ready)
        url = f"http://127.0.0.1:{port}/v1"
        r = httpx.get(f"{url}/models", timeout=60)
        assert r.status_code == 200, r.text
        listing = r.json()
        assert listing["object"] == "list" and len(listing["data"]) == 1, listing
        card = listing["data"][0]
        assert set(card) == {"id", "object", "created", "owned_by"} and card["object"] == "model", card
        assert card["id"] == str(ckpt.resolve()) == json.loads(ready.read_text())["model"]
        assert isinstance(card["created"], int) and 0 < card["created"] <= time.time()
        assert isinstance(card["owned_by"], str) and card["owned_by"]
        # Completions take the listed id, and the path as the user typed it.
        for name in (card["id"], ckpt.name):
            r = httpx.post(f"{url}/completions", timeout=900,
                           json=dict(model=name, prompt=_prompt(0), max_tokens=2, temperature=0))
            assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2, (name, r.text)
        err = _openai_error(httpx.post(f"{url}/completions", timeout=60,
                                       json=dict(model="another-model", prompt=_prompt(0), max_tokens=2)))
        assert err["param"] == "model" and err["code"] == "model_not_found" and card["id"] in err["message"]
        # The empty prompt: a 400 here, no traceback in the log (checked below).
        err = _openai_error(httpx.post(f"{url}/completions", timeout=60,
                                       json=dict(model=card["id"], prompt="", max_tokens=2)))
        assert err["code"] == "empty_prompt"
    finally:
        p.send_signal(signal.SIGTERM)
        out, log = p.communicate(timeout=120)
        made_hub_cache = (hf_home / "hub").exists()
        shutil.rmtree(hf_home, ignore_errors=True)
    assert p.returncode == 0, log
    assert "Traceback" not in log, log
    assert not made_hub_cache  # the server ran with no hub cache throughout


_CHAT = [{"role": "user", "content": "alpha beta"}]
# id, endpoint, fields over a valid request (None: field left out), param, code, words of the message
REFUSED = [
    ("empty-prompt", "completions", {"prompt": ""}, "prompt", "empty_prompt", ["empty after tokenization"]),
    ("empty-prompt-stream", "completions", {"prompt": "", "stream": True}, "prompt", "empty_prompt", ["empty"]),
    ("max-tokens-0", "completions", {"max_tokens": 0}, "max_tokens", None, ["integer >= 1", "got 0"]),
    ("max-tokens-negative", "completions", {"max_tokens": -3}, "max_tokens", None, ["got -3"]),
    ("max-tokens-text", "completions", {"max_tokens": "8"}, "max_tokens", None, ['got "8"']),
    ("max-tokens-fraction", "completions", {"max_tokens": 2.5}, "max_tokens", None, ["got 2.5"]),
    ("max-tokens-bool", "completions", {"max_tokens": True}, "max_tokens", None, ["got true"]),
    ("max-tokens-huge", "completions", {"max_tokens": 10**12}, "max_tokens", "context_length_exceeded",
     ["1000000000000", f"holds {CONTEXT}"]),
    ("prompt-too-long", "completions", {"prompt": " ".join(WORDS * 20)}, "prompt", "context_length_exceeded",
     [f"holds {CONTEXT} tokens", "no room"]),
    ("token-id-prompt", "completions", {"prompt": [1, 2, 3]}, "prompt", None, ["token ids"]),
    ("non-integer-token-ids", "completions", {"prompt": [1.5, "a"]}, "prompt", None, ["token ids"]),
    ("no-prompt", "completions", {"prompt": None}, "prompt", "empty_prompt", ["empty"]),
    ("suffix-number", "completions", {"suffix": 5}, "suffix", None, ["string"]),
    ("stop-number", "completions", {"stop": 5}, "stop", None, ["string"]),
    ("temperature-negative", "completions", {"temperature": -1}, "temperature", None, ["0 to 2"]),
    ("temperature-text", "completions", {"temperature": "hot"}, "temperature", None, ['"hot"']),
    ("top-p-above-1", "completions", {"top_p": 1.5}, "top_p", None, ["0 to 1"]),
    ("frequency-penalty-minus-1", "completions", {"frequency_penalty": -1}, "frequency_penalty", None,
     ["greater than -1"]),
    ("seed-text", "completions", {"seed": "x"}, "seed", None, ["integer"]),
    ("stream-text", "completions", {"stream": "yes"}, "stream", None, ["true or false"]),
    ("generation-config-not-json", "completions", {"generation_config": "{max_new_tokens: 2"}, "generation_config",
     None, ["JSON object"]),
    ("another-model", "completions", {"model": "another-model"}, "model", "model_not_found",
     ['"another-model"', "GET /v1/models"]),
    ("no-messages", "chat/completions", {"messages": None}, "messages", "missing_required_parameter", ["required"]),
    ("empty-messages", "chat/completions", {"messages": []}, "messages", None, ["non-empty list"]),
    ("message-without-role", "chat/completions", {"messages": [{"content": "alpha"}]}, "messages", None,
     ["messages[0].role"]),
    ("message-content-number", "chat/completions", {"messages": [{"role": "user", "content": 5}]}, "messages", None,
     ["messages[0].content"]),
    ("logit-bias-non-integer-id", "chat/completions", {"logit_bias": {"alpha": 1}}, "logit_bias", None,
     ["'alpha'", "token id"]),
    ("logit-bias-outside-vocab", "chat/completions", {"logit_bias": {"99999": 1}}, "logit_bias", None,
     [f"0 to {VOCAB - 1}"]),
    ("logit-bias-too-strong", "chat/completions", {"logit_bias": {"5": 500}}, "logit_bias", None, ["-100 to 100"]),
    ("chat-template-kwargs-text", "chat/completions", {"chat_template_kwargs": "x"}, "chat_template_kwargs", None,
     ["JSON object"]),
    ("chat-max-tokens-0", "chat/completions", {"max_tokens": 0}, "max_tokens", None, ["integer >= 1"]),
    ("response-empty-input", "responses", {"input": []}, "input", None, ["non-empty list"]),
    ("response-max-output-tokens-0", "responses", {"max_output_tokens": 0}, "max_output_tokens", None,
     ["integer >= 1"]),
]


def _request(endpoint: str, model: str, fields: dict) -> dict:
    """A valid request of the endpoint with ``fields`` over it (None: left out)."""
    body = {"completions": dict(prompt="alpha beta", max_tokens=2),
            "chat/completions": dict(messages=_CHAT, max_tokens=2),
            "responses": dict(input="alpha beta", max_output_tokens=2, stream=False)}[endpoint]
    body = dict(body, model=model, temperature=0) | fields
    return {k: v for k, v in body.items() if v is not None}


@pytest.fixture(scope="class")
def running(ckpt):
    """A sequential server for the tests of one class."""
    running = serve.start(_opts(ckpt))
    yield running
    running.stop()


class TestRequestChecks:
    """The sequential server (generate): requests that reached the model unchecked, each
    answered 400 with OpenAI's error body before the model runs."""

    @pytest.mark.parametrize("case", REFUSED, ids=[c[0] for c in REFUSED])
    def test_refused(self, running, case):
        _, endpoint, fields, param, code, words = case
        calls = LinearCalls(running.model.model.layers[0].self_attn.q_proj)
        try:
            with httpx.Client(timeout=900) as h:
                r = h.post(f"{running.url}/{endpoint}", json=_request(endpoint, running.model_id, fields))
        finally:
            calls.close()
        err = _openai_error(r)
        assert (err["param"], err["code"]) == (param, code), err
        assert all(w in err["message"] for w in words), (words, err["message"])
        assert calls.take() == [], "the model ran"

    def test_transformers_refusals_in_openai_shape(self, running):
        # transformers' own refusal (an unknown field: 422) gets the same body.
        r = httpx.post(f"{running.url}/completions", timeout=60,
                       json=dict(model=running.model_id, prompt="alpha", max_tokens=2, best_friend=1))
        err = _openai_error(r, status=422)
        assert "best_friend" in err["message"]

    def test_completion_length_fits_the_context(self, running, tok):
        prompt = _prompt(3)
        n = _n_tokens(tok, prompt)
        room = CONTEXT - n
        with httpx.Client(timeout=900) as h:
            def post(**kw):
                return h.post(f"{running.url}/completions",
                              json=dict(model=running.model_id, prompt=prompt, temperature=0, **kw))

            # No max_tokens: transformers' default was 1024 new tokens, far past the model's
            # positions; the server generates what fits. (The model has no EOS: all of it.)
            r = post()
            assert r.status_code == 200, r.text
            assert r.json()["usage"] == dict(prompt_tokens=n, completion_tokens=room, total_tokens=CONTEXT)
            assert r.json()["choices"][0]["finish_reason"] == "length"
            # Asked for exactly what fits: served, the same greedy tokens.
            exact = post(max_tokens=room)
            assert exact.status_code == 200 and exact.json()["usage"]["completion_tokens"] == room, exact.text
            assert exact.json()["choices"][0]["text"] == r.json()["choices"][0]["text"]
            # One more: refused, with the numbers.
            err = _openai_error(post(max_tokens=room + 1))
            assert err["code"] == "context_length_exceeded" and err["param"] == "max_tokens"
            assert f"{n} prompt tokens" in err["message"] and f"ask for at most {room}" in err["message"]

    def test_integer_logit_bias(self, running, tok):
        # OpenAI's examples give integer biases; transformers' sequence bias took floats
        # only (a 500). +100 on one token makes greedy decoding pick it at every step.
        favourite = tok("alpha")["input_ids"][0]
        r = httpx.post(f"{running.url}/chat/completions", timeout=900,
                       json=dict(model=running.model_id, messages=_CHAT, max_tokens=3, temperature=0,
                                 logit_bias={str(favourite): 100}))
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"] == tok.decode([favourite] * 3, skip_special_tokens=True)


def test_refusals_keep_the_cb_worker_alive(ckpt, tok, capfd):
    """Continuous batching: an empty prompt, or a request longer than the paged KV cache
    holds, stopped the worker thread (every later request: 503, /health unhealthy). A
    cache of 2 blocks of 16 tokens, smaller than the model's context: a prompt of 8 tokens
    + 30 new ones stopped it before the check. Now such requests get a 400, the longest
    that fits runs, and the server answers as before."""
    running = serve.start(_opts(ckpt, continuous_batching=True, cb_num_blocks=2, cb_block_size=16))
    try:
        c = Client(running)
        before = c.complete(_prompt(1), max_tokens=4)
        prompt = _prompt(3)
        n = _n_tokens(tok, prompt)
        fits = 2 * 16 - 1 - n  # all of the cache but one token (the scheduler allocates a block ahead)
        calls = LinearCalls(running.model.model.layers[0].self_attn.q_proj)
        with httpx.Client(timeout=900) as h:
            for endpoint, fields, param, code in [
                    ("completions", {"prompt": ""}, "prompt", "empty_prompt"),
                    ("completions", {"prompt": "", "stream": True}, "prompt", "empty_prompt"),
                    ("chat/completions", {"messages": []}, "messages", None),
                    ("responses", {"input": []}, "input", None),
                    ("completions", {"prompt": prompt, "max_tokens": 30}, "max_tokens", "context_length_exceeded"),
                    ("completions", {"prompt": prompt, "max_tokens": fits + 1}, "max_tokens",
                     "context_length_exceeded")]:
                err = _openai_error(h.post(f"{running.url}/{endpoint}",
                                           json=_request(endpoint, running.model_id, fields)))
                assert (err["param"], err["code"]) == (param, code), (endpoint, fields, err)
                if code == "context_length_exceeded":
                    assert "paged KV cache" in err["message"] and f"ask for at most {fits}" in err["message"]
            assert calls.take() == [], "the model ran"
            calls.close()
            # The longest request that fits runs; without max_tokens the server picks that length.
            for kw in (dict(max_tokens=fits), {}):
                r = h.post(f"{running.url}/completions",
                           json=dict(model=running.model_id, prompt=prompt, temperature=0, **kw))
                assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == fits, (kw, r.text)
            assert h.get(running.url.removesuffix("/v1") + "/health").json() == {"status": "ok"}
        assert c.complete(_prompt(1), max_tokens=4) == before
        assert running.alive()
    finally:
        running.stop()
    assert "Traceback" not in capfd.readouterr().err
