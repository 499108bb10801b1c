"""The demo's command line and report arithmetic, without torch: every bad input gets one
clear message and a non-zero exit, never a traceback; the estimate and the count
extrapolation against hand-computed values; the modes a worker knows."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rvv_inductor import policy
from rvv_inductor.demo import estimate, report, worker


def demo(env: dict, *args, **extra_env):
    e = dict(env, **extra_env)
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
def test_bad_checkpoint(tmp_path, case, py_env):
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
    assert_clean_error(demo(py_env, "--model", path, "--out", str(tmp_path / "out")), 3, needle)


def test_too_little_memory(tmp_path, py_env):
    r = demo(py_env, "--config", "qwen2.5-1.5b", "--out", str(tmp_path), RVV_DEMO_MEMAVAILABLE=str(2**30))
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
def test_bad_arguments(tmp_path, args, code, needle, py_env):
    assert_clean_error(demo(py_env, *args, "--out", str(tmp_path)), code, needle)


def test_estimate_arithmetic():
    lin = {"insns": 1.6e9, "vector_insns": 1.0e9, "vsetvl": 0, "vbeats": 2.0e9,
           "dram_read_bytes": policy.K1_DRAM_BYTES_PER_S, "dram_write_bytes": 0}
    rest = {"insns": 1.6e9, "vector_insns": 0, "vsetvl": 0, "vbeats": 0, "dram_read_bytes": 0, "dram_write_bytes": 0}
    e = estimate.step_estimate(lin, rest, tokens=2)
    # Linear: (0.6e9 scalar + 2e9 beats) / (1.6e9 * 8) = 0.203 s compute < 1 s memory.
    # Rest: 1.6e9 / 1.6e9 = 1 s on one core. Two tokens in 2 s.
    assert e["linear_bound"] == "memory"
    assert e["linear_s"] == pytest.approx(1.0)
    assert e["rest_s"] == pytest.approx(1.0)
    assert e["tok_s"] == pytest.approx(1.0)
    assert estimate.bandwidth_bound_tok_s(3.1e9, 1) == pytest.approx(policy.K1_DRAM_BYTES_PER_S / 3.1e9)


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


def test_modes_and_regions():
    assert list(worker.MODES) == ["eager", "regional", "whole"]
    assert not worker.MODES["eager"].teacher_forced and worker.MODES["regional"].teacher_forced
    assert not worker.MODES["whole"].linear_separable
    ids = {worker.region_id(kind, b) for kind in (worker.DECODE_REST, worker.DECODE_LINEAR, worker.PREFILL_REST,
                                                  worker.PREFILL_LINEAR) for b in range(worker.MAX_COUNTED_BATCHES)}
    assert ids == set(range(1, 17))  # rvv_count_region's ids, each used once
