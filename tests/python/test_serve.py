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
import signal
import socket
import subprocess
import sys
import time
from argparse import Namespace

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
TIE_MARGIN = 0.125  # logits of these models are O(1): a few BF16 ulps


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
                                   num_key_value_heads=4, vocab_size=VOCAB, max_position_embeddings=64,
                                   tie_word_embeddings=False, bos_token_id=None, eos_token_id=None,
                                   initializer_range=0.2)
    transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(out)
    ft.save_pretrained(out)
    # No EOS: every request generates exactly max_tokens (tokens are compared by count).
    (out / "generation_config.json").write_text(json.dumps({"do_sample": False}))
    return out


def _opts(model, **kw) -> Namespace:
    d = dict(model=str(model), weights=None, group_size=None, keep_bf16=[], tokenizer=None, activations="auto",
             continuous_batching=False, attention="rvv", cb_block_size=None, cb_num_blocks=None, cb_max_batch_tokens=None,
             host="127.0.0.1", port=_free_port(), threads=0, log_level="error", ready_file=None)
    d.update(kw)
    return Namespace(**d)


class Client:
    def __init__(self, running) -> None:
        self.url, self.model = running.url, running.model_id
        self.http = httpx.Client(timeout=900)

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
        ids = tok(prompt, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=n, do_sample=False, output_scores=True,
                                 return_dict_in_generate=True)
        gen = out.sequences[0, ids.shape[1]:].tolist()
        margins = [float(s[0].float().topk(2).values.diff().abs()) for s in out.scores]
        return gen, margins

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
        for n in (4, 8):
            assert c.many(prompts[:n], workers=n) == alone[:n], f"{n} concurrent requests"
        batched_calls = calls.take()
        calls.close()
        # One request alone: a prefill and NEW - 1 decode steps, one row each.
        assert len(alone_calls) == len(prompts) * NEW
        if cb:
            # Continuous batching shares forward passes between requests: far fewer calls
            # than requests x steps, and decode calls with several rows.
            unbatched = (4 + 8) * NEW
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
        # ... and the server still answers, the same as before.
        assert c.complete(_prompt(1)) == first
        # A few hundred short requests from a bounded client loop: none is lost.
        n = 200
        with cf.ThreadPoolExecutor(8) as ex:
            texts = list(ex.map(lambda i: c.complete(_prompt(i % 8), max_tokens=1), range(n)))
        assert len(texts) == n and all(t for t in texts)
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


def test_cli_serves_int8_and_stops_on_sigterm(ckpt, tmp_path):
    ready = tmp_path / "ready.json"
    port = _free_port()
    p = subprocess.Popen(_serve_cmd(ckpt, "--weights", "int8", "--port", port, "--ready-file", ready),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t_end = time.monotonic() + 600
        while not ready.exists():
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < t_end
            time.sleep(0.5)
        info = json.loads(ready.read_text())
        # INT8 weights: "auto" keeps the FP path for the prompt (INT8 activations are for INT4).
        assert info["formats"] == ["int8"] and info["layers_rvv"] == 15 and info["activations"] == "bf16"
        assert info["packed_bytes"] < 0.6 * info["bf16_bytes"]
        r = httpx.post(f"http://127.0.0.1:{port}/v1/completions", timeout=900,
                       json=dict(model=info["model"], prompt=_prompt(0), max_tokens=2, temperature=0))
        assert r.status_code == 200 and r.json()["choices"][0]["text"]
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert "15 Linear layers on RVV (int8; activations at M >= 2: bf16)" in out and "stopped" in out
