"""calibration.py: the achieved-bandwidth fit against the published board numbers,
recomputed here from the published figures and the models' dimensions."""
from __future__ import annotations

import pytest

from rvv_inductor import policy
from rvv_inductor.demo import calibration


def test_linear_params_match_qwen25_1_5b_by_hand():
    # q, o: 1536x1536; k, v: 256x1536; gate, up, down: 8960x1536; lm_head 151936x1536
    per_layer = 2 * 1536 * 1536 + 2 * 256 * 1536 + 3 * 8960 * 1536
    assert calibration.QWEN25_1_5B == 28 * per_layer + 151936 * 1536
    assert calibration.QWEN25_1_5B * 2 == pytest.approx(3.087e9, rel=1e-3)  # "~3.1 GB" per BF16 token


def test_policy_constant_is_the_fit():
    fit = 3.83 * calibration.QWEN25_1_5B * 18 / 32  # published tok/s x Q4_0 bytes per token
    assert calibration.fit_bandwidth() == pytest.approx(fit, rel=1e-12)
    assert policy.K1_DRAM_ACHIEVED_BYTES_PER_S == pytest.approx(fit, rel=5e-3)
    assert policy.K1_DRAM_ACHIEVED_BYTES_PER_S < policy.K1_DRAM_BYTES_PER_S


def test_reference_is_reproduced_and_others_within_tolerance():
    s = calibration.summary(calibration.fit_bandwidth())
    ref = next(r for r in s["rows"] if r["key"] == calibration.REFERENCE)
    assert ref["error"] == pytest.approx(0.0, abs=1e-12)
    # sgl-kernel BF16: 711.34 ms/token for 3.087 GB -> model 1/(3.087e9/B) tok/s
    sgl = next(r for r in s["rows"] if r["key"] == "sgl-bf16")
    assert sgl["predicted_tok_s"] == pytest.approx(calibration.fit_bandwidth() / (calibration.QWEN25_1_5B * 2))
    assert sgl["error"] == pytest.approx(sgl["predicted_tok_s"] * 0.71134 - 1)
    assert s["max_abs_error"] == max(abs(r["error"]) for r in s["rows"] if r["key"] != calibration.REFERENCE)
    assert s["within_tolerance"] == (s["max_abs_error"] <= 0.30)


def test_a_bad_bandwidth_is_reported_outside_tolerance():
    s = calibration.summary(policy.K1_DRAM_BYTES_PER_S)  # the peak predicts ~2.5x too fast
    assert not s["within_tolerance"]
    assert "OUTSIDE" in calibration.markdown(s)


def test_unknown_reference():
    with pytest.raises(KeyError, match="no published board number"):
        calibration.fit_bandwidth("nope")


def test_dram_bound_fit_is_the_geometric_mean_of_the_bf16_programs():
    # The three BF16 decodes' implied bandwidths, written out: tok/s x 2 bytes x 1.544e9 weights.
    implied = [1.320 * 2 * calibration.QWEN25_1_5B, 1.405 * 2 * calibration.QWEN25_1_5B,
               1000 / 711.34 * 2 * calibration.QWEN25_1_5B]
    gm = (implied[0] * implied[1] * implied[2]) ** (1 / 3)
    assert calibration.fit_bandwidth_dram_bound() == pytest.approx(gm, rel=1e-12)
    assert policy.K1_DRAM_FIT_BYTES_PER_S == pytest.approx(gm, rel=5e-4)
    f = calibration.fits()
    assert f["conservative"]["bandwidth"] == pytest.approx(calibration.fit_bandwidth())
    d = f["dram_bound"]
    # Residuals on every row, the fitted ones included; worst over the rows not fitted.
    for r in d["rows"]:
        assert r["error"] == pytest.approx(gm / r["weight_bytes"] / r["published_tok_s"] - 1)
    others = [abs(r["error"]) for r in d["rows"] if r["key"] not in calibration.DRAM_BOUND]
    assert d["max_abs_error"] == pytest.approx(max(others))
    import math
    assert d["rms_log_error"] == pytest.approx(math.sqrt(sum(math.log1p(r["error"]) ** 2 for r in d["rows"])
                                                         / len(d["rows"])))
    # The conservative fit flatters DRAM-bound estimates least: it is the lower bandwidth.
    assert f["conservative"]["bandwidth"] < d["bandwidth"] < policy.K1_DRAM_BYTES_PER_S
    with pytest.raises(ValueError):
        calibration.fit_bandwidth_dram_bound(())


def _cycles(t):  # the cycle model, written out: CPI 1, vector instructions by their beats
    return (t["insns"] - t["vector_insns"] + t["vsetvl"]) * 1.0 + t["vbeats"]


def test_compute_check_is_the_committed_counts():
    """calibration.COMPUTE_PUBLISHED's counted values, recomputed from the raw plugin counts
    in bench/results/calibration/ with the arithmetic written out here: per run, serial =
    the opening thread's cycles beyond the median other thread, parallel = the busiest other
    thread; 22 layers = L1 + 21 x (L2 - L1)."""
    import json
    import statistics
    from pathlib import Path

    d = Path(__file__).resolve().parents[3] / "bench" / "results" / "calibration"
    (c,) = calibration.COMPUTE_PUBLISHED
    assert c.tok_s == 7.47 and c.prompt == 512 and set(c.counted) == {8, 4}
    for threads, want in c.counted.items():
        per = []
        for layers in (1, 2):
            r = json.loads((d / f"counts-tinyllama-q2_k-L{layers}-t{threads}.json").read_text())["regions"]["3"]
            ts = {k: _cycles(t) for k, t in r["threads"].items() if t["insns"] > 0}
            assert len(ts) == threads
            owner = str(r["owner_vcpu"])
            others = [v for k, v in ts.items() if k != owner]
            per.append({"serial_cycles": max(0.0, ts[owner] - statistics.median(others)),
                        "parallel_cycles": max(others), "dram_bytes": r["dram_read_bytes"] + r["dram_write_bytes"]})
        for k in ("serial_cycles", "parallel_cycles", "dram_bytes"):
            got = per[0][k] + 21 * (per[1][k] - per[0][k])
            assert want[k] == pytest.approx(got, rel=1e-5, abs=1e3), (threads, k)
    # The error the reports print: prompt / (max(serial, 0) + max(parallel, DRAM at 3.325 GB/s)).
    for row in calibration.compute_checks():
        k = c.counted[row["threads"]]
        s = max(0.0, k["serial_cycles"]) / 1.6e9 + max(k["parallel_cycles"] / 1.6e9, k["dram_bytes"] / 3.325e9)
        assert row["predicted_tok_s"] == pytest.approx(512 / s)
        assert row["error"] == pytest.approx(512 / s / 7.47 - 1)
    errs = {r["threads"]: r["error"] for r in calibration.compute_checks()}
    assert 0.1 < errs[8] < 0.3 and -0.5 < errs[4] < -0.3  # +18% at 8 threads, -42% at 4
