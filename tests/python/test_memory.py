"""Memory of compile_linears: tied embeddings served from the packed lm_head (one
vocabulary matrix), originals freed layer by layer, and models built on the meta device
whose weights are read one Linear at a time (``load=``), checked against the plain model.

The full-size numbers (Qwen2.5-1.5B dimensions, peak RSS per mode) come from
``bench/memory.py`` (bench/results/memory/); here the mechanisms are checked at small
dimensions: which tensors exist, which are freed when, and that the numbers are right.
"""
from __future__ import annotations

import copy
import gc
import weakref

import pytest
import torch

import rvv_inductor
from rvv_inductor import cpu, heap, regional

pytestmark = [pytest.mark.skipif(not cpu.detect().is_riscv64 or not cpu.detect().has_v,
                                 reason="needs riscv64 with V (emulated or native)"),
              pytest.mark.usefixtures("inductor_cache")]  # tests/python/conftest.py

transformers = pytest.importorskip("transformers")

VOCAB, HIDDEN = 1024, 256


def config(tied: bool = True):
    return transformers.Qwen2Config(hidden_size=HIDDEN, intermediate_size=512, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                                    max_position_embeddings=128, tie_word_embeddings=tied)


def eager_model(tied: bool = True, seed: int = 0):
    torch.manual_seed(seed)
    m = transformers.Qwen2ForCausalLM(config(tied)).to(torch.bfloat16).eval()
    m.requires_grad_(False)
    if tied:
        assert m.lm_head.weight is m.model.embed_tokens.weight
    return m


def storages(model) -> dict[int, int]:
    """data_ptr -> bytes of every distinct storage the model's tensors (parameters, buffers,
    packed weights) live in: what the model holds in memory."""
    out = {}
    for t in list(model.parameters()) + list(model.buffers()):
        if t.device.type == "cpu" and t.numel():
            s = t.untyped_storage()
            out[s.data_ptr()] = s.nbytes()
    return out


def logits(model, tokens):
    """Prefill, then three M=1 decode steps (the decode path of the tied embedding)."""
    out = []
    with torch.no_grad():
        r = model(tokens[:, :6], use_cache=True)
        out.append(r.logits[:, -1])
        for t in range(6, tokens.shape[1]):
            r = model(tokens[:, t:t + 1], past_key_values=r.past_key_values, use_cache=True)
            out.append(r.logits[:, -1])
    return torch.stack(out, 1).float()


def bf16_ulp(x: float) -> float:
    import math

    return 2.0 ** (math.floor(math.log2(x)) - 7)


def assert_close_logits(got, want):
    """The tolerance of test_transformers: 4 BF16 ulps at the largest logit."""
    tol = 4 * bf16_ulp(want.abs().max().item())
    assert (got - want).abs().max().item() <= tol, ((got - want).abs().max().item(), tol)


TOKENS = torch.randint(0, VOCAB, (1, 9), generator=torch.Generator().manual_seed(3))


# -- tied embeddings -----------------------------------------------------------------------

def test_tied_bf16_one_table_and_same_logits():
    eager = eager_model()
    rvv = copy.deepcopy(eager)
    table = rvv.model.embed_tokens.weight
    table_ref = weakref.ref(table)
    del table
    report = rvv_inductor.compile_linears(rvv)
    assert report.tied == [("model.embed_tokens", "lm_head")]
    emb = rvv.model.embed_tokens
    assert isinstance(emb, regional.RVVTiedEmbedding) and emb.linear is rvv.lm_head
    assert list(emb.parameters(recurse=False)) == [] and list(emb.buffers(recurse=False)) == []
    gc.collect()
    assert table_ref() is None, "the original [V, H] table is still alive"
    # The model holds the packed weights, biases and norms: nothing of V x H but lm_head's.
    vocab_bytes = [b for b in storages(rvv).values() if b >= VOCAB * HIDDEN * 2]
    assert vocab_bytes == [rvv.lm_head.packed_bytes], vocab_bytes
    assert sum(storages(rvv).values()) < sum(storages(eager).values()) * 1.01
    # Lookups are the table's rows, bit for bit, for any index shape.
    ids = torch.tensor([[0, 5, VOCAB - 1], [7, 7, 1]])
    with torch.no_grad():
        assert torch.equal(emb(ids), eager.model.embed_tokens(ids))
        assert torch.equal(emb(ids.to(torch.int32)), eager.model.embed_tokens(ids))
    assert_close_logits(logits(rvv, TOKENS), logits(eager, TOKENS))
    # The checkpoint keeps both keys, equal to the plain model's.
    sd, sd0 = rvv.state_dict(), eager.state_dict()
    assert torch.equal(sd["model.embed_tokens.weight"], sd0["model.embed_tokens.weight"])
    assert torch.equal(sd["lm_head.weight"], sd0["lm_head.weight"])


def test_tied_embedding_bad_indices():
    rvv = eager_model()
    rvv_inductor.compile_linears(rvv)
    emb = rvv.model.embed_tokens
    with pytest.raises(IndexError, match="out of range"):
        emb(torch.tensor([VOCAB]))
    with pytest.raises(IndexError, match="out of range"):
        emb(torch.tensor([-1]))
    with pytest.raises(RuntimeError, match="Long, Int"):
        emb(torch.tensor([1.0]))
    assert emb(torch.zeros(0, dtype=torch.long)).shape == (0, HIDDEN)


@pytest.mark.parametrize("fmt,keep", [("int8", ()), ("int4", ()), ("int4", "lm_head")])
def test_tied_quantized_reads_dequantized_rows(fmt, keep):
    eager = eager_model()
    rvv = copy.deepcopy(eager)
    report = rvv_inductor.compile_linears(rvv, weights=fmt, keep_bf16=keep)
    assert report.tied == [("model.embed_tokens", "lm_head")]
    emb, head = rvv.model.embed_tokens, rvv.lm_head
    ids = torch.tensor([3, 0, VOCAB - 1, 3, 200])
    if keep:
        assert head.format == "bf16"
        want = eager.model.embed_tokens.weight[ids]
    else:
        assert isinstance(head, regional.RVVQuantLinear)
        # Exactly the dequantized weight (q - z) * s, rounded to bf16 as the model's dtype.
        want = head.dequantized()[ids].to(torch.bfloat16)
        assert not torch.equal(want, eager.model.embed_tokens.weight[ids])  # it really is quantized
    with torch.no_grad():
        assert torch.equal(emb(ids), want)
        assert torch.equal(emb(ids), head.weight[ids])
    # The logits of the plain model whose embedding table is those rows and whose Linear
    # layers multiply with the exact dequantized weights (test_quantized's reference).
    from test_quantized import dequantized_twin

    ref = dequantized_twin(rvv, eager)
    with torch.no_grad():
        ref.model.embed_tokens.weight = torch.nn.Parameter(head.weight.clone(), requires_grad=False)
    assert_close_logits(logits(rvv, TOKENS), logits(ref, TOKENS))


@pytest.mark.parametrize("fmt", ["bf16", "int8"])
def test_tied_updates_keep_both_consistent(fmt):
    """Every way of changing either side changes both, as in the plain tied model."""
    eager = eager_model()
    rvv = copy.deepcopy(eager)
    rvv_inductor.compile_linears(rvv, weights=fmt)
    emb, head = rvv.model.embed_tokens, rvv.lm_head
    ids = torch.tensor([1, 2, 900])
    x = torch.randn(1, HIDDEN, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    g = torch.Generator().manual_seed(9)

    def new_table():
        return (torch.randn(VOCAB, HIDDEN, generator=g) * 0.05).to(torch.bfloat16)

    def check(table):
        with torch.no_grad():
            rows = emb(ids)          # syncs an in-place change first
            y = head(x)
        stored = head.weight         # the table as the layer stores it (quantized: rounded)
        if fmt == "bf16":
            assert torch.equal(stored, table)
            w = stored.double()
        else:
            w = head.dequantized().double()
            assert torch.equal(stored, head.dequantized().to(torch.bfloat16))
            assert (stored.float() - table.float()).abs().max().item() <= table.float().abs().max().item() / 100
        assert torch.equal(rows, stored[ids])
        ref = x.double() @ w.T
        mag = x.double().abs() @ w.abs().T
        assert bool(((y.double() - ref).abs() <= 2.0**-8 * ref.abs() + HIDDEN * 2.0**-23 * mag + 1e-30).all())
        assert torch.equal(rvv.state_dict()["model.embed_tokens.weight"], stored)
        assert torch.equal(rvv.state_dict()["lm_head.weight"], stored)

    with torch.no_grad():
        t = new_table()
        emb.weight.copy_(t)              # in place through the embedding
        check(t)
        t = new_table()
        head.weight.copy_(t)             # in place through lm_head
        check(t)
        t = new_table()
        emb.weight = torch.nn.Parameter(t, requires_grad=False)  # assignment: both stay tied
        check(t)
        t = new_table()
        head.weight = torch.nn.Parameter(t, requires_grad=False)
        check(t)
    t = new_table()
    rvv.load_state_dict({**rvv.state_dict(), "model.embed_tokens.weight": t, "lm_head.weight": t})
    check(t)
    t = new_table()
    sd = rvv.state_dict()
    del sd["lm_head.weight"]             # a checkpoint saved without the tied key
    sd["model.embed_tokens.weight"] = t
    missing, unexpected = rvv.load_state_dict(sd, strict=False)
    assert missing == ["lm_head.weight"] and not unexpected
    check(t)
    # transformers re-tying (it sets lm_head.weight to the embedding's weight): still one table.
    rvv.tie_weights()
    assert isinstance(rvv.model.embed_tokens, regional.RVVTiedEmbedding) and rvv.model.embed_tokens.linear is head
    check(t)
    with pytest.raises(ValueError, match="does not fit"):
        emb.weight = torch.nn.Parameter(torch.zeros(VOCAB + 1, HIDDEN, dtype=torch.bfloat16))
    check(t)


def test_untied_model_unchanged():
    rvv = eager_model(tied=False)
    report = rvv_inductor.compile_linears(rvv)
    assert report.tied == [] and type(rvv.model.embed_tokens) is torch.nn.Embedding


# -- freeing as we go ------------------------------------------------------------------------

def test_originals_freed_layer_by_layer(monkeypatch):
    """While layer j is packed, the original weights of the layers packed before it are gone
    (nothing but the model held them): packing never holds more than one extra layer."""
    rvv = eager_model()
    linears = {n: weakref.ref(m.weight) for n, m in rvv.named_modules() if isinstance(m, torch.nn.Linear)}
    packed_so_far, alive_seen = [], []
    real = regional.RVVLinear._repack

    def spy(self, w):
        gc.collect()
        alive_seen.append([n for n in packed_so_far if linears[n]() is not None])
        real(self, w)
        packed_so_far.append(next(n for n, r in linears.items() if r() is w))

    monkeypatch.setattr(regional.RVVLinear, "_repack", spy)
    report = rvv_inductor.compile_linears(rvv, weights="int8")
    monkeypatch.undo()
    assert len(packed_so_far) == len(linears) == len(report.taken)
    assert packed_so_far[0] == "lm_head"  # largest first
    assert all(a == [] for a in alive_seen), alive_seen
    gc.collect()
    assert all(r() is None for r in linears.values())


# -- models on the meta device, weights read one Linear at a time -----------------------------

def meta_model(tied: bool = True):
    with torch.device("meta"):
        m = transformers.Qwen2ForCausalLM(config(tied))
    # inv_freq is computed in __init__, not stored in checkpoints: build it on the CPU (and
    # convert it to bf16 with the rest, as eager_model does).
    m.model.rotary_emb = type(m.model.rotary_emb)(config=m.config)
    m = m.to(torch.bfloat16).eval()
    m.requires_grad_(False)
    return m


@pytest.mark.parametrize("fmt", ["bf16", "int4"])
def test_meta_model_with_loader_callable(fmt):
    eager = eager_model()
    want_model = copy.deepcopy(eager)
    rvv_inductor.compile_linears(want_model, weights=fmt)
    source = {k: v.clone() for k, v in eager.state_dict().items()}
    linear_names = {n + ".weight" for n, m in eager.named_modules() if isinstance(m, torch.nn.Linear)}
    calls, handed_out = [], []

    def load(name, meta):
        gc.collect()
        # Every Linear weight handed out before this call was packed and dropped.
        calls.append((name, [n for n, r in handed_out if r() is not None and n in linear_names]))
        t = source[name].clone()
        handed_out.append((name, weakref.ref(t)))
        return t

    model = meta_model()
    report = rvv_inductor.compile_linears(model, weights=fmt, load=load)
    assert report.tied == [("model.embed_tokens", "lm_head")]
    names = [n for n, _ in calls]
    assert len(names) == len(set(names)), "a tensor was read twice"
    assert set(names) == set(source) - {"lm_head.weight"}
    assert names[0] == "model.embed_tokens.weight"  # the tied lm_head, largest, first
    assert all(alive == [] for _, alive in calls), calls
    assert not [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if t.is_meta]
    # The same layers as compile_linears on the materialised model: the same logits, exactly.
    assert torch.equal(logits(model, TOKENS), logits(want_model, TOKENS))
    assert report.loaded_bytes == sum(v.numel() * v.element_size() for k, v in source.items()
                                      if k != "lm_head.weight")


def test_meta_model_from_safetensors(tmp_path):
    from safetensors.torch import save_file

    eager = eager_model(tied=False, seed=4)
    want_model = copy.deepcopy(eager)
    rvv_inductor.compile_linears(want_model, weights="int8", keep_bf16="lm_head")
    sd = eager.state_dict()
    # Two shards (a directory), one of them in float32: converted to the model's bf16.
    keys = sorted(sd)
    save_file({k: sd[k].contiguous() for k in keys[::2]}, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file({k: sd[k].float().contiguous() for k in keys[1::2]}, str(tmp_path / "model-00002-of-00002.safetensors"))
    model = meta_model(tied=False)
    report = rvv_inductor.compile_linears(model, weights="int8", keep_bf16="lm_head", load=tmp_path)
    assert report.tied == []
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())
    assert torch.equal(logits(model, TOKENS), logits(want_model, TOKENS))


def test_meta_model_bad_input(tmp_path):
    model = meta_model()
    with pytest.raises(ValueError, match="meta device.*load="):
        rvv_inductor.compile_linears(model)
    assert type(model.lm_head) is torch.nn.Linear  # nothing changed
    with pytest.raises(ValueError, match="neither a safetensors file nor a directory"):
        rvv_inductor.compile_linears(model, load=tmp_path / "missing")
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(ValueError, match="not a valid safetensors file"):
        rvv_inductor.compile_linears(model, load=tmp_path / "bad.safetensors")
    with pytest.raises(ValueError, match="no tensor named model.embed_tokens.weight or lm_head.weight"):
        rvv_inductor.compile_linears(meta_model(), load=lambda name, meta: {}[name])
    with pytest.raises(ValueError, match="gave shape"):
        rvv_inductor.compile_linears(meta_model(), load=lambda name, meta: torch.zeros(3))
    # Without the rotary module rebuilt: its inv_freq is not in any checkpoint.
    with torch.device("meta"):
        raw = transformers.Qwen2ForCausalLM(config())
    with pytest.raises(ValueError, match="non-persistent buffers.*inv_freq"):
        rvv_inductor.compile_linears(raw.to(torch.bfloat16), load=tmp_path)


# -- freed heap memory goes back to the OS -------------------------------------------------

def _rss_anon_kib() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    pytest.fail("no RssAnon in /proc/self/status")


def test_packing_leaves_no_freed_layers_resident():
    """Loading and packing the Linears of a decoder at Qwen2.5-1.5B layer dimensions (three
    layers, a small vocabulary), one at a time from the meta device, grows the resident set
    by the packed bytes plus at most one layer's transient. Without heap.release_freed
    glibc kept freed originals resident under the packed copies (~60 MiB per layer here,
    ~2 GiB over the whole 1.5B model in BF16)."""
    from rvv_inductor.demo import models

    if not heap.release_freed():
        pytest.skip("this C library has no malloc_trim (not glibc)")
    cfg = dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=3, num_attention_heads=12,
               num_key_value_heads=2, vocab_size=2048, tie_word_embeddings=True, max_position_embeddings=256)
    # The same steps once on one small layer first, so that first-use costs (imports, and
    # under QEMU the translated code, which counts as anonymous memory) are not measured.
    warm, warm_load = models.build_lazy({"seed": 0, "config": dict(cfg, hidden_size=256, intermediate_size=1024,
                                                                      num_hidden_layers=1, num_attention_heads=2)})
    rvv_inductor.compile_linears(warm, load=warm_load)
    del warm, warm_load
    gc.collect()
    heap.release_freed()
    before = _rss_anon_kib()
    model, load = models.build_lazy({"seed": 0, "config": cfg})
    report = rvv_inductor.compile_linears(model, load=load)
    gc.collect()
    grown = (_rss_anon_kib() - before) * 1024
    largest = 8960 * 1536 * 2
    rest = sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers())
               if not any(t is m.packed_weight for m in model.modules() if isinstance(m, regional.RVVLinear)))
    # Slack: the pool the loader reads from (2 MiB), Python objects and, under QEMU, code.
    assert grown <= report.packed_bytes + rest + largest + (16 << 20), (
        f"resident set grew {grown / 2**20:.0f} MiB for {report.packed_bytes / 2**20:.0f} MiB packed "
        f"+ {rest / 2**20:.0f} MiB other tensors")
    # The packed layers hold what the eagerly built model holds.
    eager = models.build({"seed": 0, "config": cfg})
    for name in ("model.layers.0.mlp.down_proj", "model.layers.2.self_attn.k_proj", "lm_head"):
        assert torch.equal(model.get_submodule(name).weight, eager.get_submodule(name).weight), name
