"""``python3 -m rvv_inductor export`` and ``rvv-generate``: an AOTInductor package of a
decoder's decode step with RVV kernels, run from C++ (issue 16).

Small Qwen2 (BF16 weights) and Llama (INT4 g64 weights) decoders with random weights and a
fixed seed are saved with ``save_pretrained``, exported through the CLI (in-process), and
run by the C++ runner (``RVV_GENERATE``, else the first built of
``build/{rv64,bench-rv64,native}/tools/rvv_generate/rvv-generate``; the tests that need it
skip when it is not built). Checks:

1. rvv-generate's tokens are the argmax of the logits it dumps, and equal eager
   transformers' greedy tokens wherever eager's top-2 margin exceeds the tolerance
   (decisive positions); the logits are within 4 BF16 ulps of eager's largest logit
   (test_transformers.py's tolerance) for BF16 weights, and, for INT4, against the same
   model with its weights replaced by their dequantized INT4 values;
2. ``verify PKG.pt2`` on the package's generated code: RVV kernels with vector FMAs, no
   ATen mm/addmm, no routing defect;
3. bad input: a missing file, a file that is not a package, a prompt longer than the KV
   cache, a token outside the vocabulary (exit 2, one line); a CPU without V (QEMU's V
   switched off for the runner only) is refused before the package's code is loaded.

The gate is lowered to N, K >= 64 so that every projection of these small models (GQA
k/v: N = 64) takes an RVV kernel.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from rvv_inductor import cpu, export
from small_decoders import random_decoder  # noqa: E402  (tests/python is on sys.path)

pytestmark = pytest.mark.skipif(not cpu.detect().is_riscv64 or not cpu.detect().has_v,
                                reason="needs riscv64 with V (emulated or native)")

transformers = pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
_BUILT = [REPO / f"build/{d}/tools/rvv_generate/rvv-generate" for d in ("rv64", "bench-rv64", "native")]
RUNNER = Path(os.environ.get("RVV_GENERATE") or next((p for p in _BUILT if p.is_file()), _BUILT[0]))
# scripts/test builds the runner and names it in RVV_GENERATE: there a missing runner fails
# (in the test's assertions) instead of skipping.
needs_runner = pytest.mark.skipif(not RUNNER.is_file() and not os.environ.get("RVV_GENERATE"), reason=f"rvv-generate not built ({RUNNER}): build it "
                                  "with -DRVV_TORCH_SYSROOT (tools/rvv_generate/CMakeLists.txt)")
CACHE = 32
CHUNK = 4  # the prefill model's chunk: PROMPT takes 2 calls, the second overlapping the first
PROMPT = [3, 17, 42, 5, 99]
NEW = 8
GATE = "min_mnk=0,min_n=64,min_k=64"
ULPS = 4


def bf16_ulp(x: float) -> float:
    return 2.0 ** (math.floor(math.log2(x)) - 7)


def make_model(arch: str):
    model = random_decoder(arch, hidden=128, heads=4, kv_heads=2, vocab=256, max_positions=64, init_range=0.08)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model.to(torch.bfloat16).eval()


CASES = {"qwen2": ("bf16", None), "llama": ("int4", 64)}


class _Packages:
    """arch -> (model, package path, export's metadata), each exported when first asked
    for: the INT4 Llama package's tests are marked slow, and a bounded run (scripts/test
    without --full) then pays for one export (two AOTI compiles), not two."""

    def __init__(self, tmp_path_factory, watchdog):
        self._tmp, self._watchdog, self._out = tmp_path_factory, watchdog, {}
        self._cache = str(tmp_path_factory.mktemp("inductor"))

    def __getitem__(self, arch):
        if arch not in self._out:
            self._out[arch] = self._export(arch)
            self._watchdog()  # each export (two AOTI compiles) gets the whole timeout
        return self._out[arch]

    def _export(self, arch):
        import rvv_inductor

        weights, group = CASES[arch]
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TORCHINDUCTOR_CACHE_DIR", self._cache)
            torch._dynamo.reset()
            d = self._tmp.mktemp(arch)
            model = make_model(arch)
            model.save_pretrained(d / "model")
            pkg = d / "model.pt2"
            args = [str(d / "model"), "--weights", weights, "-o", str(pkg), "--max-cache-len", str(CACHE),
                    "--gate", GATE, "--prefill-chunk", str(CHUNK)]
            if group:
                args += ["--group-size", str(group)]
            try:
                assert export.main(args) == 0
            finally:
                rvv_inductor.disable()
                torch._dynamo.reset()
        return model, pkg, export.read_meta(str(pkg))


@pytest.fixture(scope="module")
def packages(tmp_path_factory, watchdog):
    return _Packages(tmp_path_factory, watchdog)


# The INT4 Llama package (INT4 g64 weights, its prefill with INT8 activations): the bounded
# tier leaves its tests to --full (docs/testing-and-ci.md); BF16 and INT8 packages stay.
ARCHS = [pytest.param(a, marks=pytest.mark.slow) if a == "llama" else a for a in CASES]


def run(*args, env=None, check=True):
    r = subprocess.run([str(RUNNER), *map(str, args)], capture_output=True, text=True, env=env, timeout=900)
    if check:
        assert r.returncode == 0, r.stderr
    return r


class PromptX8Linear(torch.nn.Module):
    """A quantized Linear of the reference when the package's prefill quantizes activations
    to INT8 (export's default): rows [0, prompt_rows) of a call with more than one row --
    the prompt, which the package's prefill chunks compute -- are quantized as the kernel
    does (test_int8_activations.quantize_x8); later rows (decode steps, M = 1 in the
    package) are not. FP32 product with the dequantized weight."""

    def __init__(self, w: torch.Tensor, bias, prompt_rows: int) -> None:
        super().__init__()
        self.w, self.prompt_rows = w.float(), prompt_rows
        self.b = bias.detach().float() if bias is not None else None

    def forward(self, x):
        from test_int8_activations import quantize_x8

        x32 = x.float().clone()
        p = min(self.prompt_rows, x.shape[-2]) if x.shape[-2] > 1 else 0
        if p:
            lead = x32[..., :p, :]
            x32[..., :p, :] = quantize_x8(x[..., :p, :].reshape(-1, x.shape[-1])).float().reshape(lead.shape)
        return torch.nn.functional.linear(x32, self.w, self.b).to(x.dtype)


def reference_model(model, weights: str, group: int | None, x8_prompt_rows: int = 0):
    """The eager model whose logits the package must match: the model itself for BF16;
    for INT8/INT4, the model with every quantized Linear's weight replaced by its
    dequantized value (the same packing the compile used), and with x8_prompt_rows > 0 the
    prompt's activations quantized to INT8 as the package's prefill does (PromptX8Linear)."""
    if weights == "bf16":
        return model
    import copy

    from rvv_inductor import policy, quantized, regional

    ref = copy.deepcopy(model)
    nb = cpu.effective().block_n
    gate = export._parse_gate(GATE)
    with torch.no_grad():
        for name, mod in list(ref.named_modules()):
            if isinstance(mod, torch.nn.Linear) and gate.check(1, mod.out_features, mod.in_features) is None:
                g = policy.DEFAULT_GROUP_SIZE[weights] if group is None else group
                q = regional.RVVQuantLinear.from_linear(mod, nb, weights, g)
                w = quantized.dequantize(q.packed_weight, q._layout)
                if x8_prompt_rows:
                    parent, _, child = name.rpartition(".")
                    setattr(ref.get_submodule(parent) if parent else ref, child,
                            PromptX8Linear(w, mod.bias, x8_prompt_rows))
                else:
                    mod.weight.copy_(w.to(torch.bfloat16))
    return ref


def assert_matches_reference(ref, tokens: list[int], got, label: str, extra_tol: float = 0.0) -> list[bool]:
    """rvv-generate's logits ``got`` (a row per new token, after PROMPT) against ``ref``'s,
    teacher-forced on the same tokens: within ULPS BF16 ulps of the largest logit, and the
    same greedy token on every decisive position (top-2 margin over twice the tolerance).
    Returns the decisive flags."""
    with torch.no_grad():
        want = ref(torch.tensor([PROMPT + tokens[:-1]])).logits[0, len(PROMPT) - 1:].float()
    tol = ULPS * bf16_ulp(want.abs().max().item()) + extra_tol
    diff = (got - want).abs().max().item()
    print(f"{label}: max |logit diff| {diff:.4g}, tolerance {tol:.4g}; tokens {tokens}")
    assert diff <= tol
    top2 = want.topk(2, -1).values
    decisive = ((top2[:, 0] - top2[:, 1]) > 2 * tol).tolist()
    assert any(decisive), "no decisive position: the test would check no token"
    eager_tokens = want.argmax(-1).tolist()
    for i, d in enumerate(decisive):
        if d:
            assert tokens[i] == eager_tokens[i], f"position {i}: rvv-generate {tokens[i]}, eager {eager_tokens[i]}"
    return decisive


@needs_runner
@pytest.mark.parametrize("arch", ARCHS)
def test_tokens_and_logits_match_eager(arch, packages, tmp_path):
    model, pkg, meta = packages[arch]
    weights, group = CASES[arch]
    assert meta["weights"] == weights and meta["max_cache_len"] == CACHE and meta["isa_has_v"]
    dump = tmp_path / "logits.bin"
    r = run(pkg, "--prompt-ids", ",".join(map(str, PROMPT)), "--max-new-tokens", NEW, "--threads", 2,
            "--dump-logits", dump, "--ignore-eos")
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    tokens = [int(t) for t in lines["tokens"].split(",")]
    assert len(tokens) == NEW
    assert lines["threads"] == "2"
    assert meta["prefill_chunk"] == CHUNK and "2 prefill call(s) of 4 tokens" in lines["prefill_s"], lines
    got = torch.from_numpy(__import__("numpy").fromfile(dump, dtype="float32").reshape(NEW, -1))
    assert got.shape[1] == 256
    assert got.argmax(-1).tolist() == tokens  # the runner's argmax is its logits'

    # The INT4 package's prefill runs with INT8 activations (export's default), its decode
    # steps on the FP path; meta says so.
    x8 = meta.get("activations") == "int8"
    assert x8 == (weights != "bf16"), meta
    ref = reference_model(model, weights, group, len(PROMPT) if x8 else 0)
    extra = 0.0
    if x8:
        # Quantizing activations turns the last-bit differences between the package's and
        # the reference's hidden states into different rounding decisions, each worth a
        # step of dx: another draw of the same noise, not the same draw. So, as
        # test_llamacpp bounds llama.cpp: twice the deviation the quantization causes in the
        # reference itself (x8 reference against the FP one), on top of the BF16 ulps.
        with torch.no_grad():
            seq = torch.tensor([PROMPT + tokens[:-1]])
            fp = reference_model(model, weights, group)(seq).logits[0, len(PROMPT) - 1:].float()
            sim = (ref(seq).logits[0, len(PROMPT) - 1:].float() - fp).abs().max().item()
        extra = 2 * sim
        print(f"{arch} {weights}: INT8 activations move the reference's logits by {sim:.4g}")
    decisive = assert_matches_reference(ref, tokens, got, f"{arch} {weights}", extra)
    # Free-running eager greedy decoding agrees up to the first non-decisive position.
    n = decisive.index(False) if False in decisive else len(decisive)
    with torch.no_grad():
        free = ref.generate(torch.tensor([PROMPT]), max_new_tokens=NEW, do_sample=False)[0, len(PROMPT):].tolist()
    assert free[:n] == tokens[:n]


@needs_runner
@pytest.mark.installed
def test_int8_package(tmp_path, watchdog):
    # INT8 (per-channel scales, export's default) end to end: the qwen2 test model exported
    # with --weights int8 (decode step only, to keep CI's time), its kernels the quantized
    # ones (verify), rvv-generate's logits against eager on the dequantized INT8 weights,
    # and greedy tokens on decisive positions.
    model = make_model("qwen2")
    pkg = tmp_path / "int8.pt2"
    d = tmp_path / "model"
    model.save_pretrained(d)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
        torch._dynamo.reset()
        try:
            assert export.main([str(d), "--weights", "int8", "-o", str(pkg), "--max-cache-len", str(CACHE),
                                "--gate", GATE, "--prefill-chunk", "0"]) == 0
        finally:
            import rvv_inductor

            rvv_inductor.disable()
            torch._dynamo.reset()
    watchdog()
    meta = export.read_meta(str(pkg))
    assert meta["weights"] == "int8" and meta["prefill_chunk"] == 0
    dump = tmp_path / "l.bin"
    r = run(pkg, "--prompt-ids", ",".join(map(str, PROMPT)), "--max-new-tokens", NEW, "--dump-logits", dump,
            "--ignore-eos")
    assert "decode step per token" in r.stdout, r.stdout
    tokens = [int(t) for t in r.stdout.splitlines()[0].split(": ")[1].split(",")]
    got = torch.from_numpy(__import__("numpy").fromfile(dump, dtype="float32").reshape(NEW, -1))
    assert got.argmax(-1).tolist() == tokens
    assert_matches_reference(reference_model(model, "int8", None), tokens, got, "qwen2 int8")
    # This interpreter and its environment: the checkout's package, or the installed one
    # when test_packaging.py runs this test in its virtual environment.
    v = subprocess.run([sys.executable, "-m", "rvv_inductor", "verify", str(pkg), "--json"], capture_output=True,
                       text=True, timeout=600)
    report = json.loads(v.stdout)
    assert v.returncode == 0 and report["ok"], report["problems"]
    assert {e["dtype"] for e in report["routing"] if e["route"] == "rvv"} == {"int8"}


@needs_runner
def test_teacher_forced(packages, tmp_path):
    # --feed-ids (what the demo's package mode runs): each decode step takes the fed token,
    # not the one chosen, and the logits are the reference model's on prompt + fed tokens.
    model, pkg, _ = packages["qwen2"]
    feed = [7, 200, 7, 1]  # arbitrary: not the greedy continuation
    dump = tmp_path / "forced.bin"
    r = run(pkg, "--prompt-ids", ",".join(map(str, PROMPT)), "--feed-ids", ",".join(map(str, feed)),
            "--dump-logits", dump)
    tokens = [int(t) for t in r.stdout.splitlines()[0].split(": ")[1].split(",")]
    got = torch.from_numpy(__import__("numpy").fromfile(dump, dtype="float32").reshape(len(feed) + 1, -1))
    assert got.argmax(-1).tolist() == tokens and len(tokens) == len(feed) + 1
    with torch.no_grad():
        want = model(torch.tensor([PROMPT + feed])).logits[0, len(PROMPT) - 1:].float()
    tol = ULPS * bf16_ulp(want.abs().max().item())
    assert (got - want).abs().max().item() <= tol


@needs_runner
@pytest.mark.parametrize("prompt", [PROMPT[:3], PROMPT + [7, 8, 9]], ids=["shorter-than-a-chunk", "two-chunks"])
def test_prefill_paths(packages, tmp_path, prompt):
    # The prefill model (chunks of CHUNK, run on the decode model's weights and KV cache)
    # and the decode step token by token (--tokenwise-prefill) both give eager's logits: for
    # a prompt of exactly two chunks, and for one shorter than a chunk (one call, padded:
    # the padding's cache entries lie past the prompt and the decode steps overwrite them).
    model, pkg, _ = packages["qwen2"]
    feed = [11, 3]
    with torch.no_grad():
        want = model(torch.tensor([prompt + feed])).logits[0, len(prompt) - 1:].float()
    tol = ULPS * bf16_ulp(want.abs().max().item())
    calls = max(1, len(prompt) // CHUNK)
    padded = f" ({len(prompt)} of them the prompt's)" if len(prompt) < CHUNK else ""
    for extra, note in (([], f"{calls} prefill call(s) of {CHUNK} tokens{padded}"),
                        (["--tokenwise-prefill"], "decode step per token")):
        dump = tmp_path / "l.bin"
        r = run(pkg, "--prompt-ids", ",".join(map(str, prompt)), "--feed-ids", ",".join(map(str, feed)),
                "--dump-logits", dump, *extra)
        assert note in r.stdout, r.stdout
        got = torch.from_numpy(__import__("numpy").fromfile(dump, dtype="float32").reshape(len(feed) + 1, -1))
        assert (got - want).abs().max().item() <= tol, (extra, (got - want).abs().max().item(), tol)


@needs_runner
@pytest.mark.slow
def test_prefill_model_must_share_the_decode_constants(packages, tmp_path):
    # A package whose prefill model is not the decode model's twin (here: the other test
    # model's prefill library), or that lacks the prefill model its metadata promises, is
    # refused with one line (exit 2) before any prefill call.
    _, pkg, _ = packages["qwen2"]
    _, other, _ = packages["llama"]

    def rebuilt(path, prefill_from):
        with zipfile.ZipFile(pkg) as src, zipfile.ZipFile(path, "w") as dst:
            for info in src.infolist():
                if "/data/aotinductor/prefill/" not in info.filename:
                    dst.writestr(info, src.read(info))
            if prefill_from is not None:
                with zipfile.ZipFile(prefill_from) as o:
                    root = src.namelist()[0].split("/")[0]
                    for info in o.infolist():
                        if "/data/aotinductor/prefill/" in info.filename:
                            dst.writestr(root + "/" + info.filename.split("/", 1)[1], o.read(info))
        return path

    for bad, want in ((rebuilt(tmp_path / "swapped.pt2", other), "not one of the decode model's"),
                      (rebuilt(tmp_path / "missing.pt2", None), "has no AOTI model 'prefill'")):
        r = run(bad, "--prompt-ids", ",".join(map(str, PROMPT)), check=False)
        assert r.returncode == 2 and want in r.stderr and r.stderr.count("\n") == 1, (r.returncode, r.stderr)
        # The decode step alone still runs such a package.
        assert run(bad, "--prompt-ids", ",".join(map(str, PROMPT)), "--tokenwise-prefill").returncode == 0


def test_shared_constant_problems():
    # The export-side check that lets rvv-generate bind the prefill model to the decode
    # model's tensors: same names, FQNs, dtypes, shapes, strides and bytes.
    w = torch.randn(4, 8).to(torch.bfloat16)
    kv = torch.zeros(2, 3, dtype=torch.bfloat16)
    decode = {"w": ("model.w", w), "key_cache_0": ("key_cache_0", kv)}
    assert export.shared_constant_problems(decode, {"w": ("model.w", w.clone()), "key_cache_0": ("key_cache_0", kv)}) == []
    w2 = w.clone()
    w2[1, 2] += 1
    cases = [({"w": ("model.w", w2)}, "different values"), ({"w": ("model.v", w)}, "FQN"),
             ({"w": ("model.w", w.float())}, "dtype"), ({"w": ("model.w", w.t().contiguous())}, "shape"),
             ({"w": ("model.w", torch.empty_strided((4, 8), (1, 4), dtype=torch.bfloat16).copy_(w))}, "strides"),
             ({"u": ("model.u", w)}, "not a decode constant")]
    for prefill, want in cases:
        problems = export.shared_constant_problems(decode, prefill)
        assert len(problems) == 1 and want in problems[0], (want, problems)
    dup = {"a": ("constant2", w), "b": ("constant2", w)}
    assert "share the FQN" in export.shared_constant_problems(dup, {})[0]


@pytest.mark.parametrize("arch", ARCHS)
def test_verify_package(arch, packages):
    _, pkg, meta = packages[arch]
    weights, _ = CASES[arch]
    r = subprocess.run(["python3", "-m", "rvv_inductor", "verify", str(pkg), "--json"], capture_output=True,
                       text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    report = json.loads(r.stdout)
    assert r.returncode == 0 and report["ok"], report["problems"]
    assert report["extern_calls"].get("mm", 0) == 0 and report["extern_calls"].get("addmm", 0) == 0
    rvv = [e for e in report["routing"] if e["route"] == "rvv"]
    # q, k, v, o, gate, up, down, lm_head shapes (k and v share one): all on RVV, M = 1.
    shapes = {(e["N"], e["K"]) for e in rvv}
    assert shapes == {(128, 128), (64, 128), (256, 128), (128, 256)}, shapes
    assert not [e for e in report["routing"] if e["route"] == "aten"]
    # M = 1 (decode) and M = CHUNK (prefill), every projection in both models.
    assert {e["M"] for e in rvv} == {1, CHUNK}
    assert {(e["N"], e["K"]) for e in rvv if e["M"] == CHUNK} == shapes
    if weights != "bf16":
        assert {e["dtype"] for e in rvv} == {weights}
    sos = [s for s in report["shared_objects"] if s["rvv_micro_gemm"]]
    assert sos, "no shared object of the package holds an RVV kernel"
    c = sos[0]["counts"]
    assert c.get("vfmacc", 0) + c.get("vfwmacc", 0) + c.get("vfwmaccbf16", 0) > 0
    assert meta["routing_entries"] > 0
    # Attention runs our kernel (export's default --attention rvv), not ATen's SDPA.
    assert meta["attention"] == "rvv"
    assert report["attention"]["rvv_kernels"] >= 1 and report["attention"]["aten_sdpa_calls"] == 0, report["attention"]
    # export compiles without a precompiled header, so SiLU's exp is our vector exp
    # (inductor_vec_math.h), not libm's expf lane by lane.
    with zipfile.ZipFile(pkg) as z:
        sos = [n for n in z.namelist() if n.endswith(".so")]
        assert sos and not [n for n in sos if b"expf" in z.read(n)]


@needs_runner
def test_bad_input(packages, tmp_path):
    _, pkg, _ = packages["qwen2"]
    text = tmp_path / "text.pt2"
    text.write_text("not a zip")
    import zipfile

    other = tmp_path / "other.pt2"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("other/data/x.txt", "a zip, but no AOTI model")
    cases = [
        ([tmp_path / "missing.pt2", "--prompt-ids", "1"], "No such file"),
        ([text, "--prompt-ids", "1"], "not a .pt2 package"),
        ([other, "--prompt-ids", "1"], "not an rvv_inductor package"),
        ([pkg, "--prompt-ids", ",".join(["1"] * (CACHE + 1))], "longer than the package's KV cache (32"),
        ([pkg, "--prompt-ids", "1,999"], "outside the vocabulary (256)"),
        ([pkg, "--prompt-ids", "1", "--threads", "0"], "--threads"),
        ([pkg], "--prompt-ids is required"),
        ([pkg, "--prompt-ids", "1", "--feed-ids", "2,300"], "--feed-ids: token 300 is outside the vocabulary"),
        ([pkg, "--prompt-ids", ",".join(["1"] * (CACHE - 1)), "--feed-ids", "2,3"], "need 33 positions"),
    ]
    for args, want in cases:
        r = run(*args, check=False)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert want in r.stderr and r.stderr.count("\n") == 1, (args, r.stderr)
    # A prompt that fills the cache: one token from the prefill's logits, with a note.
    r = run(pkg, "--prompt-ids", ",".join(["1"] * CACHE), "--max-new-tokens", 4)
    assert "generating 1 tokens" in r.stderr and len(r.stdout.splitlines()[0].split(",")) == 1


@needs_runner
@pytest.mark.skipif(os.environ.get("RV64_EMULATED") != "1", reason="switches V off in QEMU (emulated runs only)")
def test_no_v_is_refused(packages):
    _, pkg, _ = packages["qwen2"]
    no_v = subprocess.run([str(REPO / "scripts/lib/qemu-cpu"), "--no-v"], capture_output=True, text=True, check=True)
    env = {**os.environ, "QEMU_CPU": no_v.stdout.strip()}
    r = run(pkg, "--prompt-ids", "1,2", env=env, check=False)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "no V extension" in r.stderr and r.stderr.count("\n") == 1, r.stderr


@pytest.mark.skipif(os.environ.get("RV64_EMULATED") != "1" or not os.environ.get("RVV_GENERATE")
                    or os.environ.get("RVV_INSTALLED_PACKAGE"),
                    reason="scripts/rv64's PATH, with the runner scripts/test built (checkout runs only)")
def test_the_checkout_runner_is_on_path_in_the_emulated_world():
    """docs/aot-package.md's `scripts/rv64 rvv-generate ...`: scripts/rv64 puts the
    checkout's built runner on PATH (an installed wheel does the same: test_packaging)."""
    found = shutil.which("rvv-generate")
    assert found and Path(found).resolve().is_relative_to(REPO / "build"), found
    r = subprocess.run(["rvv-generate", "--help"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "--prompt-ids" in r.stdout + r.stderr, r.stdout + r.stderr
