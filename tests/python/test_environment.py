"""Smoke tests that prove the emulated riscv64 world is what the rest relies on."""
import platform
import subprocess
import sys

import pytest


def test_torch_is_debian_2_14_1_on_riscv64():
    import torch

    assert platform.machine() == "riscv64"
    assert torch.__version__.split("+")[0] == "2.14.1"
    # Inductor compiles generated C++ against these headers (libtorch-dev).
    from torch.utils.cpp_extension import include_paths

    assert any((__import__("pathlib").Path(p) / "ATen" / "ATen.h").exists() for p in include_paths())


@pytest.mark.matrix
def test_detection_matches_qemu_configuration(emulated):
    from rvv_inductor import cpu

    info = cpu.detect()
    assert info.is_riscv64
    if emulated is None:
        pytest.skip("native run: no emulator configuration to compare with")
    assert info.has_v == emulated["v"]
    assert info.vlen == emulated["vlen"]
    assert info.has_zvfbfmin == emulated["bf16"]
    assert info.has_zvfbfwma == emulated["bf16"]


@pytest.mark.matrix
def test_detection_in_a_fresh_process_does_not_die(emulated):
    # With V off, detection must answer "no" instead of killing the process with SIGILL.
    code = "from rvv_inductor import cpu; i = cpu.detect(); print(int(i.has_v), i.vlen)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    has_v, vlen = map(int, out.stdout.split())
    if emulated is not None:
        assert has_v == int(emulated["v"]) and vlen == emulated["vlen"]


@pytest.mark.matrix
def test_override_claiming_missing_bf16_is_a_clear_error(emulated, monkeypatch):
    from rvv_inductor import cpu

    if cpu.detect().hw_bf16:
        pytest.skip("this CPU has BF16 vector hardware; nothing to refuse")
    monkeypatch.setenv("RVV_INDUCTOR_CPU", "v,zvfbfwma")
    with pytest.raises(cpu.CpuOverrideError, match="zvfbfwma"):
        cpu.effective()
