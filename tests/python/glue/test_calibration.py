"""calibration.py: the achieved-bandwidth fit against the published board numbers,
recomputed here from the published figures and the models' dimensions."""
from __future__ import annotations

import pytest

from rvv_inductor import calibration, policy


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
