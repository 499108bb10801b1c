"""load_gguf: small random Qwen2 and Llama GGUF files written with python3-gguf, loaded with
their Q8_0/Q4_0 blocks packed bit for bit, run against a plain PyTorch twin holding the
reference's dequantized weights; bad files give GGUFError.

References. (1) gguf's own ``dequantize`` (test_load_bit_exact_and_runs). (2) transformers'
own GGUF loading, ``from_pretrained(dir, gguf_file=...)``, which dequantizes with gguf and
un-permutes Llama's q/k rows with its own code (test_matches_transformers_gguf_loading).
Debian's transformers 5.12 needs two shims for it, both about packaging, not numbers:
``is_gguf_available`` reads python3-gguf's version through importlib metadata, which
Debian's python3-gguf does not register under the import name, and falls back to
``gguf.__version__``, which it lacks (the test sets it from the installed dist-info); and
``from_pretrained`` refuses GGUF files unless ``accelerate`` is importable, which the root
filesystem does not install (scripts/rootfs-packages.txt) and which this CPU-only load
never calls (the test patches the check). Without these the comparison is impossible, and the test says so by
failing, not skipping.

The files carry ``tokenizer.ggml.model = "none"`` and ``<arch>.vocab_size``: the minimal
vocabulary both transformers and llama.cpp accept (token ids in, ids out)."""
from __future__ import annotations

import contextlib
import faulthandler
import math
import signal
import struct
import time

import pytest
import torch

from rvv_inductor import cpu, regional

pytestmark = pytest.mark.skipif(not cpu.detect().is_riscv64 or not cpu.detect().has_v,
                                reason="needs riscv64 with V (emulated or native)")
gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")
transformers = pytest.importorskip("transformers")

from rvv_inductor.gguf_load import GGUFError, load_gguf  # noqa: E402

Q = gguf.GGMLQuantizationType
H, FF, LAYERS, HEADS, KV, VOCAB = 256, 512, 2, 4, 2, 512
# Qwen3's heads in these files: transformers' GGUF loading of qwen3 does not read
# key_length and takes Qwen3Config's default head_dim, 128 (that of every published Qwen3),
# so its model fits the file only with 128; 128 != H / HEADS = 64 here, as in Qwen3-0.6B.
QWEN3_HEAD_DIM = 128
TYPES = {"attn_q": Q.Q8_0, "attn_k": Q.Q8_0, "attn_v": Q.Q4_0, "attn_output": Q.Q8_0,
         "ffn_gate": Q.Q4_0, "ffn_up": Q.Q4_0, "ffn_down": Q.BF16}


def write_gguf(path, arch="qwen2", override=None, seed=0, bias=None, drop=(), raw=None, dims=None):
    """A random GGUF in file layout (for Llama, q/k rows as llama.cpp's converter leaves
    them). override: tensor name -> type; drop: tensor names to leave out; raw: tensor name
    -> (type, uint8 byte array) written as given; dims: other values of H, FF, LAYERS,
    HEADS, KV, HEAD_DIM (by those names). qwen3: heads of HEAD_DIM (default QWEN3_HEAD_DIM,
    not H / HEADS), written as key_length and value_length, q/k norms, no biases."""
    d = {"H": H, "FF": FF, "LAYERS": LAYERS, "HEADS": HEADS, "KV": KV,
         "HEAD_DIM": QWEN3_HEAD_DIM if arch == "qwen3" else None, **(dims or {})}
    H_, FF_, LAYERS_, HEADS_, KV_ = d["H"], d["FF"], d["LAYERS"], d["HEADS"], d["KV"]
    HD = d["HEAD_DIM"] or H_ // HEADS_
    rng = np.random.default_rng(seed)
    bias = arch == "qwen2" if bias is None else bias
    w = gguf.GGUFWriter(str(path), arch)
    w.add_vocab_size(VOCAB)
    w.add_tokenizer_model("none")
    w.add_context_length(256)
    w.add_embedding_length(H_)
    w.add_block_count(LAYERS_)
    w.add_feed_forward_length(FF_)
    w.add_head_count(HEADS_)
    w.add_head_count_kv(KV_)
    if arch == "qwen3" or d["HEAD_DIM"]:
        w.add_key_length(HD)
        w.add_value_length(HD)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)

    def add(name, shape, qtype, scale=0.05):
        qtype = (override or {}).get(name, qtype)
        data = (rng.standard_normal(shape) * scale).astype(np.float32)
        if name in drop:
            return
        if name in (raw or {}):
            w.add_tensor(name, raw[name][1], raw_dtype=raw[name][0])
        elif qtype == Q.F32:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, gguf.quantize(data, qtype), raw_dtype=qtype)

    add("token_embd.weight", (VOCAB, H_), Q.F32, 1.0)
    for i in range(LAYERS_):
        shapes = {"attn_q": (HEADS_ * HD, H_), "attn_k": (KV_ * HD, H_), "attn_v": (KV_ * HD, H_),
                  "attn_output": (H_, HEADS_ * HD), "ffn_gate": (FF_, H_), "ffn_up": (FF_, H_), "ffn_down": (H_, FF_)}
        for kind, shape in shapes.items():
            add(f"blk.{i}.{kind}.weight", shape, TYPES[kind])
        for kind in ("attn_q", "attn_k", "attn_v") if bias else ():
            add(f"blk.{i}.{kind}.bias", (shapes[kind][0],), Q.F32)
        if arch == "qwen3":
            add(f"blk.{i}.attn_q_norm.weight", (HD,), Q.F32, 0.1)
            add(f"blk.{i}.attn_k_norm.weight", (HD,), Q.F32, 0.1)
        add(f"blk.{i}.attn_norm.weight", (H_,), Q.F32, 0.1)
        add(f"blk.{i}.ffn_norm.weight", (H_,), Q.F32, 0.1)
    add("output_norm.weight", (H_,), Q.F32, 0.1)
    add("output.weight", (VOCAB, H_), Q.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


class FP32Linear(torch.nn.Module):
    def __init__(self, w, b):
        super().__init__()
        self.w, self.b = w, (b.detach().float() if b is not None else None)

    def forward(self, x):
        return torch.nn.functional.linear(x.float(), self.w, self.b).to(x.dtype)


def gguf_dequantized(path):
    r = gguf.GGUFReader(str(path))
    return {t.name: torch.from_numpy(np.array(gguf.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(
        [int(d) for d in reversed(t.shape)])) for t in r.tensors}


def hf_to_gguf(name):
    from rvv_inductor.gguf_load import _LINEAR
    if name == "lm_head":
        return "output.weight"
    i, rest = name.split(".")[2], ".".join(name.split(".")[3:])
    kind = {v: k for k, v in _LINEAR.items()}[rest]
    return f"blk.{i}.{kind}.weight"


@pytest.mark.installed
def test_load_bit_exact_and_runs(tmp_path):
    from test_transformers import bf16_ulp, teacher_forced_logits

    path = write_gguf(tmp_path / "tiny.gguf")
    # The FP path (the INT8-activation default is tested in test_int8_activations.py and
    # against llama.cpp in test_llamacpp.py): logits within 4 BF16 ulps.
    model = load_gguf(path, activations="bf16")
    ref_w = gguf_dequantized(path)
    quant = {n: m for n, m in model.named_modules() if isinstance(m, regional.RVVQuantLinear)}
    # every Q8_0/Q4_0 Linear is quantized, the BF16 ffn_down stays a plain Linear
    assert len(quant) == LAYERS * 6 + 1
    assert all(type(m.mlp.down_proj) is torch.nn.Linear for m in model.model.layers)
    assert quant["model.layers.0.self_attn.v_proj"].format == "int4"
    assert quant["model.layers.0.self_attn.q_proj"].format == "int8"
    ref = load_gguf(path)   # (RVVLinear holds a lock: no deepcopy)
    for name, layer in quant.items():
        w = ref_w[hf_to_gguf(name)]
        assert torch.equal(layer.dequantized(), w), f"{name}: dequantized weights differ from gguf's"
        parent, _, child = name.rpartition(".")
        setattr(ref.get_submodule(parent) if parent else ref, child, FP32Linear(w, layer.bias))
    torch.manual_seed(1)
    tokens = torch.randint(0, VOCAB, (1, 8 + 16))
    want = teacher_forced_logits(ref, tokens)
    got = teacher_forced_logits(model, tokens)
    tol = 4 * bf16_ulp(want.abs().max().item())
    print(f"max logit difference {(got - want).abs().max().item():.4g} (tol {tol:.4g})")
    assert (got - want).abs().max().item() <= tol
    top2 = want.topk(2, dim=-1).values
    decisive = (top2[..., 0] - top2[..., 1]) > tol
    assert decisive.any() and bool((want.argmax(-1) == got.argmax(-1))[decisive].all())


def test_q4_0_nibble_order(tmp_path):
    """Q4_0: byte j of a block holds element j (low nibble) and j + 16 (high nibble)."""
    from rvv_inductor.gguf_load import _blocks
    data = np.linspace(-1, 1, 2 * 64, dtype=np.float32).reshape(2, 64)
    raw = gguf.quantize(data, Q.Q4_0)
    t = type("T", (), {"data": raw, "tensor_type": Q.Q4_0})
    values, scales = _blocks(t, 2, 64)
    d = scales.view(np.float16).astype(np.float32).repeat(32, axis=1)
    want = gguf.dequantize(raw, Q.Q4_0).reshape(2, 64)
    assert np.array_equal((values.astype(np.float32) - 8) * d, want)


def test_bad_files(tmp_path):
    with pytest.raises(GGUFError, match="architecture 'gpt2'"):
        load_gguf(write_gguf(tmp_path / "gpt2.gguf", arch="gpt2"))
    # TQ2_0: a GGML type gguf knows and this package does not run (Q4_1, Q5_0, Q5_1 and the
    # K-quants it does: test_gguf_kquants.py)
    with pytest.raises(GGUFError, match="blk.0.ffn_up.weight has type TQ2_0"):
        load_gguf(write_gguf(tmp_path / "tq20.gguf", override={"blk.0.ffn_up.weight": Q.TQ2_0}))
    good = write_gguf(tmp_path / "good.gguf")
    raw = good.read_bytes()
    for cut in (len(raw) - 1000, len(raw) // 2, 100):
        bad = tmp_path / f"cut{cut}.gguf"
        bad.write_bytes(raw[:cut])
        with pytest.raises(GGUFError, match="truncated"):
            load_gguf(bad)


def transformers_gguf_model(monkeypatch, path):
    """transformers' own loading of the file (FP32, dequantized by transformers/gguf)."""
    import importlib.metadata

    import transformers.modeling_utils as mu
    monkeypatch.setattr(gguf, "__version__", importlib.metadata.version("gguf"), raising=False)
    monkeypatch.setattr(mu, "is_accelerate_available", lambda *a, **k: True)
    return transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                             dtype=torch.float32).eval()


@pytest.mark.parametrize("arch", ["qwen2", "llama", "qwen3"])
def test_matches_transformers_gguf_loading(tmp_path, monkeypatch, arch):
    """Every weight equals transformers' dequantized one: bit for bit for the Q8_0/Q4_0
    Linears and BF16 tensors, and BF16(round to nearest even) of it for the F32 tensors
    (embedding, norms, biases), which load_gguf stores in BF16; logits agree with a twin of
    transformers' model as in test_load_bit_exact_and_runs (4 BF16 ulps)."""
    from test_transformers import bf16_ulp, teacher_forced_logits

    path = write_gguf(tmp_path / f"{arch}.gguf", arch=arch)
    theirs = transformers_gguf_model(monkeypatch, path)
    assert theirs.config.model_type == arch and theirs.config.vocab_size == VOCAB
    if arch == "qwen3":  # heads of 128 in a width of 256 (4 heads): q_proj [512, 256], q/k norms
        assert theirs.config.head_dim == QWEN3_HEAD_DIM != H // HEADS
    model = load_gguf(path, activations="bf16")
    assert type(model) is type(theirs)
    ref_sd = theirs.state_dict()
    quant = {n: m for n, m in model.named_modules() if isinstance(m, regional.RVVQuantLinear)}
    assert len(quant) == LAYERS * 6 + 1
    for name, layer in quant.items():
        assert torch.equal(layer.dequantized(), ref_sd[name + ".weight"]), f"{name}: differs from transformers'"
    checked = 0
    for name, p in model.state_dict().items():
        if name in ref_sd and p.dtype == torch.bfloat16 and not name.endswith("packed_weight"):
            assert torch.equal(p, ref_sd[name].to(torch.bfloat16)), f"{name}: differs from transformers'"
            checked += 1
    assert checked >= 1 + LAYERS * 3 + 1  # embedding, ffn_down and both norms per layer, final norm

    ref = type(theirs)(theirs.config).to(torch.bfloat16).eval()
    ref.load_state_dict({k: v.to(torch.bfloat16) for k, v in ref_sd.items()})
    for name, layer in quant.items():
        parent, _, child = name.rpartition(".")
        setattr(ref.get_submodule(parent) if parent else ref, child,
                FP32Linear(ref_sd[name + ".weight"], ref_sd.get(name + ".bias")))
    torch.manual_seed(2)
    tokens = torch.randint(0, VOCAB, (1, 8 + 16))
    want = teacher_forced_logits(ref, tokens)
    got = teacher_forced_logits(model, tokens)
    tol = 4 * bf16_ulp(want.abs().max().item())
    print(f"{arch}: max logit difference to transformers' GGUF model {(got - want).abs().max().item():.4g} "
          f"(tol {tol:.4g})")
    assert (got - want).abs().max().item() <= tol
    top2 = want.topk(2, dim=-1).values
    decisive = (top2[..., 0] - top2[..., 1]) > tol
    assert decisive.any() and bool((want.argmax(-1) == got.argmax(-1))[decisive].all())


def test_llama_unpermute(tmp_path):
    """Llama q/k rows: load_gguf undoes llama.cpp's converter permutation (written here
    independently: rows (head, half, i) of the HF layout are stored as (head, i, half))."""
    path = write_gguf(tmp_path / "llama.gguf", arch="llama", override={"blk.0.attn_q.weight": Q.F32,
                                                                       "blk.0.attn_k.weight": Q.BF16})
    model = load_gguf(path)
    file_w = gguf_dequantized(path)
    for kind, heads, mod in (("attn_q", HEADS, model.model.layers[0].self_attn.q_proj),
                             ("attn_k", KV, model.model.layers[0].self_attn.k_proj)):
        stored = file_w[f"blk.0.{kind}.weight"]
        n, k = stored.shape
        half = n // heads // 2
        want = torch.empty_like(stored)
        for h in range(heads):
            for part in range(2):
                for i in range(half):
                    want[h * 2 * half + part * half + i] = stored[h * 2 * half + i * 2 + part]
        assert torch.equal(mod.weight, want.to(torch.bfloat16)), kind
    # a quantized q_proj (layer 1): the same permutation of whole rows of blocks
    stored = file_w["blk.1.attn_q.weight"]
    half = H // HEADS // 2
    idx = [h * 2 * half + i * 2 + part for h in range(HEADS) for part in range(2) for i in range(half)]
    assert torch.equal(model.model.layers[1].self_attn.q_proj.dequantized(), stored[idx])


def test_more_bad_files(tmp_path):
    with pytest.raises(GGUFError, match="blk.0.ffn_up.weight has type IQ3_S"):
        block, size = gguf.GGML_QUANT_SIZES[Q.IQ3_S]
        iq3 = np.random.default_rng(0).integers(0, 256, (FF, H // block * size), dtype=np.uint8)
        load_gguf(write_gguf(tmp_path / "iq3s.gguf", raw={"blk.0.ffn_up.weight": (Q.IQ3_S, iq3)}))
    with pytest.raises(GGUFError, match="attn_q.weight is \\[128, 256\\], the model expects \\[256, 256\\]"):
        small = gguf.quantize(np.zeros((128, H), np.float32), Q.Q8_0)
        load_gguf(write_gguf(tmp_path / "shape.gguf", raw={"blk.1.attn_q.weight": (Q.Q8_0, small)}))
    with pytest.raises(GGUFError, match="missing from the file: blk.1.ffn_norm.weight"):
        load_gguf(write_gguf(tmp_path / "drop.gguf", drop=("blk.1.ffn_norm.weight",)))
    raw = write_gguf(tmp_path / "good.gguf").read_bytes()
    for name, data in (("magic", b"XXXX" + raw[4:]), ("header", raw[:8] + b"\xff" * 64 + raw[72:]),
                       ("empty", b"")):
        bad = tmp_path / f"{name}.gguf"
        bad.write_bytes(data)
        with pytest.raises(GGUFError, match="not a readable GGUF file"):
            load_gguf(bad)


def test_serving_load_packs_the_tied_lm_head(tmp_path):
    """What `rvv_inductor serve FILE.gguf` loads (serve.load_gguf_packed): a file without
    output.weight ties lm_head to the embedding, which load_gguf leaves an nn.Linear on
    ATen; serving packs it (and ffn_down, BF16 in the file) so no projection stays on ATen
    and the vocabulary matrix is held once. Logits as load_gguf's plain model gives them."""
    from test_transformers import bf16_ulp, teacher_forced_logits

    from rvv_inductor import serve

    path = write_gguf(tmp_path / "tied.gguf", drop=("output.weight",))
    model, report = serve.load_gguf_packed(path)
    assert model.config.tie_word_embeddings
    assert not [n for n, m in model.named_modules() if type(m) is torch.nn.Linear]
    assert isinstance(model.lm_head, regional.RVVLinear) and model.lm_head.format == "bf16"
    assert report.tied and not report.fell_back
    assert len(report.taken) == LAYERS * 7 + 1 and len(report.formats) == len(report.taken)
    assert {f for _, f, _, _ in report.formats} == {"bf16", "int8", "int4"}
    plain = load_gguf(path)
    assert type(plain.lm_head) is torch.nn.Linear
    torch.manual_seed(2)
    tokens = torch.randint(0, VOCAB, (1, 8 + 16))  # test_transformers' PROMPT + STEPS
    want = teacher_forced_logits(plain, tokens)
    got = teacher_forced_logits(model, tokens)
    assert (got - want).abs().max().item() <= 4 * bf16_ulp(want.abs().max().item())



# ---------------------------------------------------------------------------------------
# Damaged and unsupported files (gguf_checks): a GGUFError naming what is wrong before any
# model is built; never another exception, never a hang.


class Hung(BaseException):
    """time_limit's exception: a BaseException, so that load_gguf's own ``except Exception``
    around GGUFReader cannot turn a hang into a GGUFError."""


@contextlib.contextmanager
def time_limit(seconds, what):
    def fire(signum, frame):
        raise Hung(f"{what}: still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    # a hang inside C code, where the alarm's Python handler never runs: end the process
    faulthandler.dump_traceback_later(3 * seconds, exit=True)
    try:
        yield
    finally:
        signal.alarm(0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def no_model_built(monkeypatch):
    """Fails the test if load_gguf gets as far as a transformers config: a bad file must be
    refused before anything is built."""
    def built(*args, **kwargs):
        raise AssertionError("load_gguf built a model config for a bad file")

    for name in ("Qwen2Config", "LlamaConfig", "Qwen3Config"):
        monkeypatch.setattr(transformers, name, built)


@pytest.fixture(scope="module")
def good_gguf(tmp_path_factory):
    return write_gguf(tmp_path_factory.mktemp("gguf") / "good.gguf")


def value_offset(reader, key):
    """Where metadata ``key``'s value starts: after the key's u64 length, the key and the
    value's u32 type (the GGUF layout, independent of gguf_checks)."""
    f = reader.get_field(key)
    at = f.offset + 8 + len(key.encode()) + 4
    value = f.parts[-1].tobytes()
    assert bytes(reader.data[at:at + len(value)]) == value, key
    return at


def type_offset(t):
    """Where tensor ``t``'s u32 type is in its tensor info: after the name's u64 length,
    the name, the u32 dimension count and the u64 dimensions."""
    return t.field.offset + 8 + len(t.name.encode()) + 4 + 8 * len(t.shape)


def patched(src, dst, at, data):
    raw = bytearray(src.read_bytes())
    raw[at:at + len(data)] = data
    dst.write_bytes(bytes(raw))
    return dst


def refused(path, match, seconds=60):
    """load_gguf(path) raises a GGUFError matching ``match`` that names the file, within
    ``seconds``."""
    with time_limit(seconds, path.name), pytest.raises(GGUFError, match=match) as e:
        load_gguf(path)
    assert str(e.value).startswith(f"{path}: "), str(e.value)
    return str(e.value)


@pytest.mark.parametrize("qtype", ["IQ2_XS", "IQ3_S", "TQ2_0", "MXFP4"])
def test_unsupported_tensor_types_are_named(tmp_path, no_model_built, qtype):
    """A type outside SUPPORTED_TYPES is refused naming the tensor and its type (never
    dequantized: no model config is even made)."""
    from rvv_inductor.gguf_load import SUPPORTED_TYPES

    block, size = gguf.GGML_QUANT_SIZES[Q[qtype]]
    data = np.random.default_rng(0).integers(0, 256, (FF, H // block * size), dtype=np.uint8)
    path = write_gguf(tmp_path / f"{qtype}.gguf", raw={"blk.0.ffn_up.weight": (Q[qtype], data)})
    msg = refused(path, f"tensor blk.0.ffn_up.weight has type {qtype}; supported: ")
    assert all(s in msg for s in SUPPORTED_TYPES), msg


def test_tensor_type_unknown_to_gguf(tmp_path, good_gguf, no_model_built):
    """A type number gguf does not know (31: the removed Q4_0_4_4) names the tensor too,
    where GGUFReader alone raises a bare ValueError."""
    t = next(t for t in gguf.GGUFReader(str(good_gguf)).tensors if t.name == "blk.0.ffn_up.weight")
    path = patched(good_gguf, tmp_path / "t31.gguf", type_offset(t), struct.pack("<I", 31))
    refused(path, "tensor blk.0.ffn_up.weight has type 31")


def test_flipped_counts_regressions(tmp_path, good_gguf, no_model_built):
    """The two damaged copies seen: a flipped byte made block_count 4,278,190,081 (load_gguf
    hung in transformers' config, which builds per-layer lists) and another made head_count
    65,284 (ZeroDivisionError from the RoPE setup: head_dim 256 // 65284 = 0)."""
    reader = gguf.GGUFReader(str(good_gguf))
    t0 = time.perf_counter()
    path = patched(good_gguf, tmp_path / "layers.gguf", value_offset(reader, "qwen2.block_count"),
                   struct.pack("<I", 4278190081))
    refused(path, r"metadata qwen2\.block_count = 4278190081, but the file's tensors hold 2 \(blocks blk\.0 \.\. "
                  r"blk\.1\); blk\.2 is missing")
    path = patched(good_gguf, tmp_path / "heads.gguf", value_offset(reader, "qwen2.attention.head_count"),
                   struct.pack("<I", 65284))
    refused(path, r"metadata qwen2\.attention\.head_count = 65284 does not divide qwen2\.embedding_length = 256")
    print(f"both refused in {time.perf_counter() - t0:.2f} s")


def test_serve_checks_the_file_before_its_tokenizer(tmp_path, good_gguf, no_model_built):
    """serve FILE.gguf loads its tokenizer from the file's metadata before load_gguf runs:
    serve.check_model runs the same checks first (torch-free), so the flipped block_count
    is a ServeError at once instead of a hang inside transformers."""
    from rvv_inductor import serve

    reader = gguf.GGUFReader(str(good_gguf))
    path = patched(good_gguf, tmp_path / "layers.gguf", value_offset(reader, "qwen2.block_count"),
                   struct.pack("<I", 4278190081))
    t0 = time.perf_counter()
    with pytest.raises(serve.ServeError, match=r"block_count = 4278190081"):
        serve.check_model(str(path), None)
    assert time.perf_counter() - t0 < 30
    assert serve.check_model(str(good_gguf), None) == good_gguf.resolve()


# (key, packed value written over the stored one, what the GGUFError says)
_U32, _F32 = struct.Struct("<I"), struct.Struct("<f")
METADATA_CASES = [
    ("qwen2.embedding_length", _U32.pack(255),
     r"embedding_length = 255, but token_embd\.weight is \[512, 256\] \(256 columns\)"),
    ("qwen2.vocab_size", _U32.pack(511), r"vocab_size = 511, but token_embd\.weight has 512 rows"),
    ("qwen2.block_count", _U32.pack(3), r"block_count = 3, but the file's tensors hold 2 .*; blk\.2 is missing"),
    ("qwen2.block_count", _U32.pack(1), r"block_count = 1, but the file has tensors of blk\.1"),
    ("qwen2.block_count", _U32.pack(0), r"block_count = 0, expected a positive count"),
    ("qwen2.attention.head_count", _U32.pack(3), r"head_count = 3 does not divide qwen2\.embedding_length = 256"),
    ("qwen2.attention.head_count", _U32.pack(512), r"head_count = 512 does not divide"),
    ("qwen2.attention.head_count", _U32.pack(256), r"head_count = 256 gives heads of 1 values .*even head size"),
    ("qwen2.attention.head_count", _U32.pack(8),
     r"head_count_kv = 2: 2 heads of 32 \(qwen2\.embedding_length = 256 / qwen2\.attention\.head_count = 8\) "
     r"imply 64 rows in blk\.0\.attn_k\.weight, which has 128"),
    ("qwen2.attention.head_count_kv", _U32.pack(3), r"head_count_kv = 3 does not divide .*head_count = 4"),
    ("qwen2.attention.head_count_kv", _U32.pack(4),
     r"head_count_kv = 4: 4 heads of 64 .* imply 256 rows in blk\.0\.attn_k\.weight, which has 128"),
    ("qwen2.feed_forward_length", _U32.pack(1024),
     r"feed_forward_length = 1024, but blk\.0\.ffn_gate\.weight has 512 rows"),
    ("qwen2.context_length", _U32.pack(2**24 + 1), r"context_length = 16777217, expected at most 16777216"),
    ("qwen2.context_length", _U32.pack(0), r"context_length = 0, expected a positive count"),
    ("qwen2.rope.freq_base", _F32.pack(math.nan), r"freq_base = nan, expected a finite value in \[1, 1e\+15\]"),
    ("qwen2.rope.freq_base", _F32.pack(0.5), r"freq_base = 0\.5, expected a finite value"),
    ("qwen2.attention.layer_norm_rms_epsilon", _F32.pack(0.0), r"epsilon = 0\.0, expected a finite value in \(0, 1\)"),
    ("qwen2.attention.layer_norm_rms_epsilon", _F32.pack(-math.inf), r"epsilon = -inf, expected a finite value"),
]


def test_metadata_against_tensors(tmp_path, good_gguf, no_model_built):
    """Each count, dimension and float the model is built from, given a value the tensors
    contradict (or out of its range): a GGUFError naming the key, the value and what the
    tensors say."""
    reader = gguf.GGUFReader(str(good_gguf))
    for i, (key, value, match) in enumerate(METADATA_CASES):
        path = patched(good_gguf, tmp_path / f"m{i}.gguf", value_offset(reader, key), value)
        refused(path, match)
    # a value type that is not a count's: FLOAT32 (6) in head_count's type field
    path = patched(good_gguf, tmp_path / "type.gguf", value_offset(reader, "qwen2.attention.head_count") - 4,
                   struct.pack("<I", 6))
    refused(path, r"metadata qwen2\.attention\.head_count is FLOAT32, expected an integer")


@pytest.mark.parametrize("method, key, put, match", [
    ("add_head_count", "qwen2.attention.head_count", lambda w, k: w.add_string(k, "4"),
     r"head_count is STRING, expected an integer"),
    ("add_block_count", "qwen2.block_count", lambda w, k: w.add_array(k, [1, 1]),
     r"block_count is an array of \w+, expected an integer"),
    ("add_block_count", "qwen2.block_count", lambda w, k: w.add_bool(k, True), r"block_count is BOOL"),
    ("add_embedding_length", "qwen2.embedding_length", None, r"has no 'qwen2\.embedding_length'"),
    ("add_head_count_kv", "qwen2.attention.head_count_kv", None,
     r"head_count_kv absent \(taken as qwen2\.attention\.head_count\): 4 heads of 64 .* imply 256 rows"),
    ("add_rope_freq_base", "qwen2.rope.freq_base", lambda w, k: w.add_uint32(k, 10000),
     r"freq_base is UINT32, expected a number"),
], ids=["string", "array", "bool", "missing", "kv-absent", "int-float"])
def test_metadata_value_types(tmp_path, monkeypatch, no_model_built, method, key, put, match):
    """Metadata of the wrong GGUF type (or absent): a GGUFError naming the key, where
    load_gguf's int()/float() would raise ValueError or TypeError."""
    monkeypatch.setattr(gguf.GGUFWriter, method, lambda w, *args: put(w, key) if put else None)
    refused(write_gguf(tmp_path / "t.gguf"), match)


def test_tensors_against_the_model(tmp_path, no_model_built):
    """Missing, misshapen and misplaced tensors, before a model is built (load_gguf used to
    find these while filling it)."""
    refused(write_gguf(tmp_path / "bias.gguf", drop=("blk.0.attn_q.bias",)),
            r"tensors missing from the file: blk\.0\.attn_q\.bias$")
    # Llama with biases gets attention_bias, which includes o_proj's
    refused(write_gguf(tmp_path / "llama.gguf", arch="llama", bias=True),
            r"tensors missing from the file: blk\.0\.attn_output\.bias, blk\.1\.attn_output\.bias$")
    wide = np.zeros((H, 2 * FF), np.float32).view(np.uint8)
    refused(write_gguf(tmp_path / "down.gguf", raw={"blk.1.ffn_down.weight": (Q.F32, wide)}),
            r"blk\.1\.ffn_down\.weight is \[256, 1024\], the model expects \[256, 512\] "
            r"\(qwen2\.embedding_length = 256, qwen2\.feed_forward_length = 512\)")


@pytest.fixture(scope="module")
def good_qwen3(tmp_path_factory):
    return write_gguf(tmp_path_factory.mktemp("gguf") / "qwen3.gguf", arch="qwen3")


def test_qwen3_shapes_against_metadata(tmp_path, good_qwen3, no_model_built):
    """qwen3: head_dim is attention.key_length (128 here, where embedding_length / head_count
    is 64); a file whose tensors disagree with it, or with the head counts, is refused at
    open in one line naming the key or tensor, before a model is built."""
    reader = gguf.GGUFReader(str(good_qwen3))
    u32 = struct.Struct("<I").pack
    for i, (key, value, match) in enumerate([
        ("qwen3.attention.key_length", u32(64),
         r"head_count_kv = 2: 2 heads of 64 \(qwen3\.attention\.key_length = 64\) imply 128 rows in "
         r"blk\.0\.attn_k\.weight, which has 256"),
        ("qwen3.attention.key_length", u32(127), r"key_length = 127; RoPE needs an even head size"),
        ("qwen3.attention.value_length", u32(64), r"value_length = 64 differs from qwen3\.attention\.key_length = 128"),
        ("qwen3.attention.head_count", u32(8),
         r"attn_q\.weight is \[512, 256\], the model expects \[1024, 256\] \(qwen3\.attention\.head_count = 8 "
         r"heads of 128 \(qwen3\.attention\.key_length = 128\)"),
    ]):
        path = patched(good_qwen3, tmp_path / f"q{i}.gguf", value_offset(reader, key), value)
        if key.endswith("key_length"):   # value_length too: one head size throughout
            patched(path, path, value_offset(reader, "qwen3.attention.value_length"), value)
        msg = refused(path, match)
        assert "\n" not in msg, msg
    for name, shape, match in (
            ("blk.1.attn_k_norm.weight", (64,), r"blk\.1\.attn_k_norm\.weight is \[64\], the model expects \[128\] "
                                                r"\(heads of 128 \(qwen3\.attention\.key_length\)\)"),
            ("blk.0.attn_output.weight", (H, H), r"attn_output\.weight is \[256, 256\], the model expects \[256, 512\]")):
        data = np.zeros(shape, np.float32).view(np.uint8)
        refused(write_gguf(tmp_path / "raw.gguf", arch="qwen3", raw={name: (Q.F32, data)}), match)
    refused(write_gguf(tmp_path / "nonorm.gguf", arch="qwen3", drop=("blk.1.attn_q_norm.weight",)),
            r"tensors missing from the file: blk\.1\.attn_q_norm\.weight$")
    refused(write_gguf(tmp_path / "bias.gguf", arch="qwen3", bias=True),
            r"tensor blk\.0\.attn_q\.bias has no place in a qwen3 model")
    # a qwen2 file with heads of another size than embedding_length / head_count: refused, not misread
    path = write_gguf(tmp_path / "qwen2.gguf", dims=dict(HEAD_DIM=128))
    msg = refused(path, r"metadata qwen2\.attention\.key_length = 128: a qwen2 model has heads of "
                        r"qwen2\.embedding_length / qwen2\.attention\.head_count = 256 / 4 values \(heads of another "
                        r"size load only for qwen3\)")
    assert "\n" not in msg, msg


def with_byte_array(raw, reader, key):
    """The file ``raw`` with one more metadata entry, ``key``: an array of UINT8 (0, 1, ...)
    put before the tensor infos, as long as makes the entry a multiple of the 32-byte
    alignment, so the tensor data keep their offsets. Returns (bytes, the array's length,
    offset of its u64 length)."""
    head = 8 + len(key) + 4 + 4 + 8   # key length, key, ARRAY, UINT8, array length
    n = -head % 32 or 32
    kv = struct.pack("<Q", len(key)) + key.encode() + struct.pack("<IIQ", 9, 0, n) + bytes(range(n))
    at = reader.tensors[0].field.offset
    count = struct.unpack_from("<Q", raw, 16)[0]
    out = raw[:16] + struct.pack("<Q", count + 1) + raw[24:at] + kv + raw[at:]
    return out, n, at + head - 8


def test_array_length_past_the_end(tmp_path, good_gguf):
    """A metadata array whose length is flipped high: GGUFReader alone loops over it far
    past the end of the file (empty views, one per missing element: 2^28 of them here,
    hours and gigabytes under QEMU); load_gguf refuses it first, naming the entry."""
    raw = good_gguf.read_bytes()
    data, n, at = with_byte_array(raw, gguf.GGUFReader(str(good_gguf)), "test.flags")
    ok = tmp_path / "array.gguf"
    ok.write_bytes(data)
    assert gguf.GGUFReader(str(ok)).get_field("test.flags").contents() == list(range(n))
    with time_limit(60, ok.name):
        assert load_gguf(ok).config.num_hidden_layers == LAYERS
    bad = bytearray(data)
    bad[at + 3] = 0x10   # n -> n + 2^28 elements
    path = tmp_path / "array-bad.gguf"
    path.write_bytes(bytes(bad))
    refused(path, rf"array 'test\.flags' of {n + 2**28} elements of type 0 needs {n + 2**28} bytes")


def _tensor_bytes(reader):
    return {t.name: (int(t.tensor_type), t.shape.tolist(), t.data.tobytes()) for t in reader.tensors}


def _float_metadata(reader):
    """rms eps and RoPE base as load_gguf takes them (its defaults when absent)."""
    out = []
    for key, default in (("qwen2.attention.layer_norm_rms_epsilon", 1e-6), ("qwen2.rope.freq_base", 10000.0)):
        f = reader.get_field(key)
        out.append(default if f is None else f.contents())
    return out


def test_damaged_copies(tmp_path, good_gguf):
    """The file cut at many offsets and with single bytes damaged across its header,
    metadata and tensor infos (deterministic: every 3rd byte before the tensor data with
    one bit flipped, bit (offset / 3) % 8; every 5th set to 0xFF). Each copy gives a
    GGUFError naming the file or a model, within 60 s; no other exception. The expectation
    for a model comes from gguf's reader of the damaged copy: if it holds the same tensors
    (type, shape, bytes) and the same rms eps and RoPE base, the logits of a 2-token input
    equal the intact file's exactly; if only those floats differ, they are finite; with
    different tensors (a flipped data offset, say) the copy is merely a model of the same
    dimensions, its numbers being garbage."""
    raw = good_gguf.read_bytes()
    ref_reader = gguf.GGUFReader(str(good_gguf))
    data_start = ref_reader.data_offset
    assert max(t.data_offset + t.n_bytes for t in ref_reader.tensors) == len(raw)  # every cut loses data
    ref_tensors, ref_floats = _tensor_bytes(ref_reader), _float_metadata(ref_reader)
    tokens = torch.tensor([[3, 7]])
    ref_model = load_gguf(good_gguf)
    with torch.no_grad():
        ref_logits = ref_model(tokens, use_cache=False).logits.float()
    dims = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "intermediate_size", "vocab_size")
    ref_dims = [getattr(ref_model.config, d) for d in dims]
    del ref_model

    failures, counts = [], {"cut": 0, "error": 0, "same": 0, "finite": 0, "garbage": 0}
    t0 = time.perf_counter()
    cut = tmp_path / "cut.gguf"
    cuts = list(range(0, data_start, 5)) + [data_start + k * (len(raw) - data_start) // 16 for k in range(16)]
    for n in cuts + [len(raw) - 1]:
        cut.write_bytes(raw[:n])
        try:
            with time_limit(60, cut.name):
                load_gguf(cut)
            failures.append(f"cut at {n}: loaded")
        except GGUFError as e:
            if not str(e).startswith(f"{cut}: ") or "truncated" not in str(e):
                failures.append(f"cut at {n}: unclear: {e}")
            counts["cut"] += 1
        except Exception as e:  # noqa: BLE001  (collected: every failing copy is listed)
            failures.append(f"cut at {n}: {type(e).__name__}: {e}")

    path = tmp_path / "flip.gguf"
    path.write_bytes(raw)
    variants = [(o, raw[o] ^ (1 << (o // 3 % 8))) for o in range(0, data_start, 3)] + \
        [(o, 0xFF) for o in range(1, data_start, 5) if raw[o] != 0xFF]
    with open(path, "r+b") as f:
        for off, byte in variants:
            f.seek(off)
            f.write(bytes([byte]))
            f.flush()
            try:
                kind = _damaged_outcome(path, tokens, ref_tensors, ref_floats, ref_logits, dims, ref_dims)
                counts[kind] += 1
            except Exception as e:  # noqa: BLE001
                failures.append(f"byte {off} = {byte:#04x}: {type(e).__name__}: {e}")
            finally:
                f.seek(off)
                f.write(raw[off:off + 1])
                f.flush()
    print(f"{len(cuts) + 1} cuts, {len(variants)} damaged bytes in {time.perf_counter() - t0:.0f} s: {counts}")
    assert not failures, f"{len(failures)} bad outcomes:\n" + "\n".join(failures[:20])
    # both ways out were taken: damage the checks refuse, and damage that does not matter
    assert counts["error"] > 0 and counts["same"] > 0


def _damaged_outcome(path, tokens, ref_tensors, ref_floats, ref_logits, dims, ref_dims):
    """What test_damaged_copies expects of one damaged copy (see there): "error", "same",
    "finite" or "garbage"; an AssertionError or any other exception is a failure."""
    with time_limit(60, f"{path.name}"):
        try:
            model = load_gguf(path)
        except GGUFError as e:
            assert str(e).startswith(f"{path}: "), str(e)
            return "error"
        assert [getattr(model.config, d) for d in dims] == ref_dims, "a model of other dimensions"
        with torch.no_grad():
            logits = model(tokens, use_cache=False).logits.float()
    reader = gguf.GGUFReader(str(path))
    if _tensor_bytes(reader) != ref_tensors:
        return "garbage"
    assert bool(logits.isfinite().all()), "non-finite logits from intact tensors"
    if _float_metadata(reader) != ref_floats:
        return "finite"
    assert torch.equal(logits, ref_logits), "intact tensors and floats, other logits"
    return "same"
