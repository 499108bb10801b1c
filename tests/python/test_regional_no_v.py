"""compile_linears on a riscv64 CPU without V (scripts/rv64 --no-v, the matrix leg): every
layer keeps ATen, with the reason, and the model computes exactly what eager computes."""
from __future__ import annotations

import copy

import pytest
import torch

from rvv_inductor import cpu, regional, runtime
from rvv_inductor.reasons import Policy

pytestmark = [pytest.mark.matrix,
              pytest.mark.skipif(not cpu.detect().is_riscv64 or cpu.detect().has_v,
                                 reason="runs on riscv64 without V (scripts/rv64 --no-v); with V: test_regional.py")]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(1024, 2048)
        self.down = torch.nn.Linear(2048, 1024, bias=False)
        self.proj = torch.nn.Parameter(torch.randn(1024, 1024) / 32)  # an F.linear weight

    def forward(self, x):
        h = self.down(torch.relu(self.up(x)))
        return torch.nn.functional.linear(h, self.proj)


def test_no_v_keeps_aten_and_results(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    ref = Net().to(torch.bfloat16).eval()
    model = copy.deepcopy(ref)
    report = regional.compile_linears(model)
    assert report.taken == [] and report.functional == []
    assert {name: why.reason for name, why in report.fell_back} == {"up": Policy.NO_V, "down": Policy.NO_V}
    assert str(dict(report.fell_back)["up"]) == "cpu: no V extension"
    assert isinstance(model.up, torch.nn.Linear) and not hasattr(model, "_rvv_functional_linear")
    x = torch.randn(3, 1024).to(torch.bfloat16)
    with torch.no_grad():
        assert torch.equal(model(x), ref(x))
    assert runtime.artifact_keys() == []
