"""The demo's input checks: every bad input gets one clear message and a non-zero exit,
never a traceback; plus the report's arithmetic against hand-computed values."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from rvv_inductor.demo import estimate, models, report


def demo(*args, env=None):
    e = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "rvv_inductor", "demo", *args], capture_output=True, text=True,
                          env=e, timeout=600)


def assert_clean_error(r, code, *needles):
    out = r.stdout + r.stderr
    assert r.returncode == code, out
    assert "Traceback" not in out, out
    for n in needles:
        assert n in out, out


def write_config(d, **over):
    cfg = dict(model_type="qwen2", hidden_size=64, intermediate_size=128, num_hidden_layers=1,
               num_attention_heads=4, num_key_value_heads=2, vocab_size=256, torch_dtype="bfloat16")
    cfg.update(over)
    (d / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("case", ["nodir", "noconfig", "badjson", "arch", "quant", "dtype", "noweights",
                                  "truncated", "badheader"])
def test_bad_checkpoint(tmp_path, case):
    d = tmp_path / "ckpt"
    d.mkdir()
    good_tensor = {"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}
    if case != "noconfig":
        write_config(d, **{"arch": {"model_type": "mamba"}, "quant": {"quantization_config": {"bits": 4}},
                           "dtype": {"torch_dtype": "int8"}}.get(case, {}))
    if case == "badjson":
        (d / "config.json").write_text("{not json")
    if case not in ("noweights",):
        hdr = json.dumps(good_tensor).encode()
        body = len(hdr).to_bytes(8, "little") + hdr + b"\0\0\0\0"
        if case == "truncated":
            body = body[:-3]
        if case == "badheader":
            body = (10**9).to_bytes(8, "little") + b"{}"
        (d / "model.safetensors").write_bytes(body)
    path = str(tmp_path / "missing") if case == "nodir" else str(d)
    needle = {"nodir": "no such directory", "noconfig": "config.json is missing", "badjson": "not valid JSON",
              "arch": "'mamba' is not supported", "quant": "quantized checkpoints", "dtype": "'int8' are not",
              "noweights": "no *.safetensors", "truncated": "truncated or corrupt",
              "badheader": "truncated or corrupt"}[case]
    assert_clean_error(demo("--model", path, "--out", str(tmp_path / "out")), 3, needle)


def test_too_little_memory(tmp_path):
    r = demo("--config", "qwen2.5-1.5b", "--out", str(tmp_path), env={"RVV_DEMO_MEMAVAILABLE": str(2**30)})
    assert_clean_error(r, 3, "needs about", "GiB is available")


@pytest.mark.parametrize("args,code,needle", [
    (["--modes", "eager,turbo"], 3, "unknown mode"),
    (["--batch", "0"], 2, "positive integers"),
    (["--config", "qwen9"], 2, "invalid choice"),
    (["--steps", "0"], 3, "--steps"),
    (["--count-layers", "2,1"], 3, "A < B"),
    (["--count-layers", "1,2,3"], 3, "A < B"),
    (["--config", "tiny", "--count-layers", "1,3"], 3, "<= 2 (the model's depth)"),
])
def test_bad_arguments(tmp_path, args, code, needle):
    assert_clean_error(demo(*args, "--out", str(tmp_path)), code, needle)


def test_param_count_matches_transformers():
    transformers = pytest.importorskip("transformers")
    cfg = models.config_dict("tiny", 1)
    m = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**cfg))
    assert models.param_count(cfg) == sum(p.numel() for p in m.parameters())


def test_checkpoint_round_trip(tmp_path):
    """--model loads exactly the weights a checkpoint holds (saved by transformers)."""
    transformers = pytest.importorskip("transformers")
    cfg = dict(models.config_dict("tiny", 1), hidden_size=128, intermediate_size=256, vocab_size=512,
               num_attention_heads=4)
    torch.manual_seed(1)
    ref = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**cfg)).to(torch.bfloat16)
    ref.save_pretrained(tmp_path, safe_serialization=True)
    assert models.inspect_checkpoint(str(tmp_path))["hidden_size"] == 128
    got = models.build({"seed": 5, "model_dir": str(tmp_path)})
    sd = got.state_dict()
    for k, v in ref.state_dict().items():
        assert torch.equal(sd[k], v), k


def test_agreement_arithmetic():
    e = torch.zeros(1, 2, 4)
    e[0, 0] = torch.tensor([8.0, 1.0, 0.0, 0.0])   # decisive (margin 7)
    e[0, 1] = torch.tensor([8.0, 7.99, 0.0, 0.0])  # a near-tie: not decisive
    o = e.clone()
    o[0, 1] = torch.tensor([7.9, 8.0, 0.0, 0.0])   # flips the near-tie only
    (a,) = report.agreement({(1, 2): e.bfloat16()}, {(1, 2): o.bfloat16()})
    # BF16 spacing at 8 is 2**(3-7) = 1/16, so 4 ulps = 0.25. Below 8 the spacing is 1/32:
    # 7.99 rounds to 8.0 (a tie with 8) and 7.9 to 7.90625, so the largest difference is 0.09375.
    assert a["tolerance"] == 0.25
    assert a["max_abs_diff"] == 0.09375
    assert (a["decisive"], a["decisive_agree"], a["argmax_agree_all"]) == (1, 1, 1)


def test_estimate_arithmetic():
    lin = {"insns": 1.6e9, "vector_insns": 1.0e9, "vsetvl": 0, "vbeats": 2.0e9,
           "dram_read_bytes": 10.7e9, "dram_write_bytes": 0}
    rest = {"insns": 1.6e9, "vector_insns": 0, "vsetvl": 0, "vbeats": 0, "dram_read_bytes": 0, "dram_write_bytes": 0}
    e = estimate.step_estimate(lin, rest, tokens=2)
    # Linear: (0.6e9 scalar + 2e9 beats) / (1.6e9 * 8) = 0.203 s compute < 1 s memory.
    # Rest: 1.6e9 / 1.6e9 = 1 s on one core. Two tokens in 2 s.
    assert e["linear_bound"] == "memory"
    assert e["linear_s"] == pytest.approx(1.0)
    assert e["rest_s"] == pytest.approx(1.0)
    assert e["tok_s"] == pytest.approx(1.0)
    assert estimate.bandwidth_bound_tok_s(3.1e9, 1) == pytest.approx(10.7 / 3.1)


def test_count_extrapolation(tmp_path):
    """Counts at 1 and 3 layers give the counts at 28: fixed + 28 * per_layer, per counter."""
    def counts(layers):
        return {"regions": {"1": {"insns": 1000 + layers * 50, "dram_read_bytes": 7 + layers * 2, "calls": 3},
                            "2": {"insns": 5 * layers}}}
    runs = [{"spec": "spec-count-L1.json", "tag": "-L1", "layers": 1},
            {"spec": "spec-count-L3.json", "tag": "-L3", "layers": 3}]
    cspec = {"runs": runs, "dims": {"num_hidden_layers": 28}}
    assert report.load_regions(tmp_path, "eager", cspec) is None  # nothing counted yet
    (tmp_path / "counts-eager-L1.json").write_text(json.dumps(counts(1)))
    assert report.load_regions(tmp_path, "eager", cspec) is None  # one of the two runs is missing
    (tmp_path / "counts-eager-L3.json").write_text(json.dumps(counts(3)))
    got = report.load_regions(tmp_path, "eager", cspec)
    assert got["1"]["insns"] == pytest.approx(1000 + 28 * 50)
    assert got["1"]["dram_read_bytes"] == pytest.approx(7 + 28 * 2)
    assert got["2"]["insns"] == pytest.approx(5 * 28) and got["2"]["vbeats"] == 0
    # Without --count-layers the single run is used as counted.
    (tmp_path / "counts-eager.json").write_text(json.dumps(counts(28)))
    one = report.load_regions(tmp_path, "eager", {"dims": {"num_hidden_layers": 28}})
    assert one["1"]["insns"] == 1000 + 28 * 50
