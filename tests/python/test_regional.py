"""compile_linears: regional RVV Linear layers with module-owned packed weights, checked
against an eager copy of the same model that receives the same weight updates."""
from __future__ import annotations

import copy
import random
import threading

import pytest
import torch

import rvv_inductor
from rvv_inductor import cpu, regional, runtime
from rvv_inductor.policy import Gate
from rvv_inductor.reasons import Policy

pytestmark = pytest.mark.skipif(not cpu.detect().is_riscv64 or not cpu.detect().has_v,
                                reason="needs riscv64 with V (emulated or native)")


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(1024, 2048, bias=True)
        self.down = torch.nn.Linear(2048, 1024, bias=False)
        self.o1 = torch.nn.Linear(1024, 1024, bias=False)
        self.o2 = torch.nn.Linear(1024, 1024, bias=False)  # same shape as o1: same artifact
        self.small = torch.nn.Linear(64, 64, bias=False)  # below the gate
        self.fp32 = torch.nn.Linear(1024, 1024, bias=False)  # not BF16

    def forward(self, x, s, f):
        h = self.o2(self.o1(self.down(torch.relu(self.up(x)))))
        return h, self.small(s), self.fp32(f)


def make():
    torch.manual_seed(0)
    m = Block()
    m.to(torch.bfloat16)
    m.fp32.float()
    return m.eval()


def bound(x, w, b, y_ref):
    mag = x.double().abs() @ w.double().abs().T + (b.double().abs() if b is not None else 0)
    return x.shape[-1] * 2.0**-24 * mag * 1.01 + 2.0**-8 * y_ref.abs() + 1e-30


def check_layer(layer_rvv, layer_ref, x):
    with torch.no_grad():
        got = layer_rvv(x)
        w, b = layer_ref.weight, layer_ref.bias
        ref = x.double() @ w.double().T + (b.double() if b is not None else 0)
    assert bool(((got.double() - ref).abs() <= bound(x, w, b, ref)).all())


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.mktemp("inductor")))
        torch._dynamo.reset()
        ref = make()
        model = copy.deepcopy(ref)
        report = regional.compile_linears(model)
        yield model, ref, report
        rvv_inductor.disable()
        torch._dynamo.reset()


def test_report_and_packed_memory(compiled):
    model, ref, report = compiled
    assert sorted(n for n, _, _ in report.taken) == ["down", "o1", "o2", "up"]
    reasons = dict(report.fell_back)
    assert reasons["small"].reason is Policy.GATE and str(reasons["small"]).startswith("gate:")
    assert reasons["fp32"].reason is Policy.NOT_BF16 and "dtype" in str(reasons["fp32"])
    assert isinstance(model.up, regional.RVVLinear) and isinstance(model.small, torch.nn.Linear)
    assert report.param_bytes == 2 * (1024 * 2048 * 2 + 1024 * 1024 * 2)
    assert report.packed_overhead <= 0.01
    # The original weights are not kept: the RVV layers own no [N, K] tensor.
    for layer in (model.up, model.down, model.o1, model.o2):
        assert [n for n, _ in layer.named_parameters()] == (["bias"] if layer.bias is not None else [])
    assert "RVV" in str(report)


def test_regional_gate_is_its_own(compiled, monkeypatch):
    from rvv_inductor.inductor import routing

    # compile_linears used the regional gate (N, K >= 128) and left enable()'s whole-graph gate alone.
    assert routing.get_gate() == Gate()
    # The user's override narrows it; the keys it does not set keep the regional defaults.
    monkeypatch.setenv("RVV_INDUCTOR_REGIONAL_GATE", "min_n=4096")
    report = regional.compile_linears(make())
    assert report.taken == []
    assert str(dict(report.fell_back)["up"]) == "gate: N=2048 < 4096"
    monkeypatch.setenv("RVV_INDUCTOR_REGIONAL_GATE", "min_k=2048")
    report = regional.compile_linears(make())
    assert [n for n, _, _ in report.taken] == ["down"]
    for bad, msg in (("min_x=1", "unknown key"), ("min_n=lots", "not a number"), ("min_k=-1", ">= 0")):
        monkeypatch.setenv("RVV_INDUCTOR_REGIONAL_GATE", bad)
        with pytest.raises(ValueError, match=f"RVV_INDUCTOR_REGIONAL_GATE.*{msg}"):
            regional.compile_linears(make())


def test_buckets_artifacts_and_results(compiled):
    model, ref, _ = compiled
    torch.manual_seed(1)
    frames0 = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    keys0 = set(runtime.artifact_keys())
    for m in (1, 3, 4, 2):  # buckets 1, 4, 4, 2
        x = torch.randn(m, 1024).to(torch.bfloat16)
        with torch.no_grad():
            h, s, f = model(x, torch.randn(m, 64).to(torch.bfloat16), torch.randn(m, 1024))
            want, _, _ = ref(x, torch.zeros(m, 64).to(torch.bfloat16), torch.zeros(m, 1024))
        assert h.shape == (m, 1024)
        torch.testing.assert_close(h.float(), want.float(), rtol=2**-6, atol=2**-6)
        for name in ("up", "down", "o1"):
            check_layer(getattr(model, name), getattr(ref, name),
                        torch.randn(m, getattr(ref, name).in_features).to(torch.bfloat16))
    keys = set(runtime.artifact_keys()) - keys0
    shapes = ((2048, 1024, True), (1024, 2048, False), (1024, 1024, False))
    # One artifact per (N, K, bucket, bias), shared by o1 and o2; one-row calls run the
    # operator's kernel directly: no artifact, but recorded.
    assert keys == {(n, k, b, bias) for b in (2, 4) for n, k, bias in shapes}
    assert {(n, k, 1, bias) for n, k, bias in shapes} <= set(runtime.direct_keys())
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - frames0 == len(keys)
    # Prefill-sized M (> 128) is split into 128-row chunks of the M=128 artifact.
    x = torch.randn(130, 1024).to(torch.bfloat16)
    check_layer(model.o1, ref.o1, x)


def test_weight_updates_are_never_stale(compiled):
    """Random sequences of updates and forwards, compared with eager receiving the same."""
    model, ref, _ = compiled
    rng = random.Random(3)
    with torch.no_grad():  # compile every (layer, bucket) used below first
        for name in ("up", "down", "o1"):
            for m in (1, 2, 3):
                getattr(model, name)(torch.zeros(m, getattr(ref, name).in_features, dtype=torch.bfloat16))
    frames0 = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for step in range(10):
        name = rng.choice(["up", "down", "o1"])
        layer, layer_ref = getattr(model, name), getattr(ref, name)
        kind = rng.choice(["copy_", "mul_", "assign", "load_state_dict", "forward"])
        new = (torch.randn_like(layer_ref.weight.float()) * 0.05).to(torch.bfloat16)
        with torch.no_grad():
            if kind == "copy_":
                layer.weight.copy_(new)
                layer_ref.weight.copy_(new)
            elif kind == "mul_":
                layer.weight.mul_(2)
                layer_ref.weight.mul_(2)
            elif kind == "assign":
                layer.weight = torch.nn.Parameter(new)
                layer_ref.weight = torch.nn.Parameter(new)
            elif kind == "load_state_dict":
                sd = {k: v.clone() for k, v in ref.state_dict().items()}
                sd[f"{name}.weight"] = new
                model.load_state_dict(sd)
                ref.load_state_dict(sd)
        m = rng.choice([1, 2, 3])
        check_layer(layer, layer_ref, torch.randn(m, layer_ref.in_features).to(torch.bfloat16))
    # Updates never trigger a recompile: the weight is a graph input.
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == frames0
    # state_dict gives back the original [N, K] layout, bit for bit.
    sd = model.state_dict()
    for k, v in ref.state_dict().items():
        assert torch.equal(sd[k], v), k


def test_bad_input(compiled):
    model, ref, _ = compiled
    with pytest.raises(ValueError, match="does not fit"):
        model.o1.weight = torch.nn.Parameter(torch.zeros(512, 1024, dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match="size mismatch|does not fit"):
        sd = model.state_dict()
        sd["o1.weight"] = torch.zeros(512, 1024, dtype=torch.bfloat16)
        model.load_state_dict(sd)
    # fp32 activation and a non-contiguous one: correct results through the fallback / copy.
    x = torch.randn(3, 1024)
    with torch.no_grad():
        torch.testing.assert_close(model.o1(x), torch.nn.functional.linear(x, ref.o1.weight.float()),
                                   rtol=1e-5, atol=1e-5)
    xt = torch.randn(1024, 3).to(torch.bfloat16).T
    check_layer(model.o1, ref.o1, xt)


def test_module_contract_on_the_fast_path(compiled):
    """What forward reads without nn.Module.__getattr__ still follows the module: the
    weight inside inference_mode (no version counter there) and its in-place changes, a
    new bias, .to() of the bias; the weight view is not one of the module's parameters."""
    model, ref, _ = compiled
    layer, layer_ref = model.up, ref.up
    x = torch.randn(1, 1024).to(torch.bfloat16)
    with torch.inference_mode():
        w = layer.weight  # materialised inside inference mode: still tracks in-place changes
        assert torch.equal(w, layer_ref.weight)
        w.mul_(0.5)
        layer_ref.weight.data.mul_(0.5)
        check_layer(layer, layer_ref, x)
    assert [n for n, _ in layer.named_parameters()] == ["bias"]
    new_bias = torch.randn(2048).to(torch.bfloat16)
    layer.bias = torch.nn.Parameter(new_bias.clone(), requires_grad=False)
    layer_ref.bias = torch.nn.Parameter(new_bias.clone(), requires_grad=False)
    for m in (1, 3):
        check_layer(layer, layer_ref, torch.randn(m, 1024).to(torch.bfloat16))
    with pytest.raises(TypeError):
        layer.bias = new_bias  # a plain tensor is not a parameter, as for nn.Linear
    # A deep copy is an independent layer with its own lock and the same results.
    twin = copy.deepcopy(layer)
    assert twin._lock is not layer._lock and twin.packed_weight.data_ptr() != layer.packed_weight.data_ptr()
    with torch.no_grad():
        assert torch.equal(twin(x), layer(x))
    # A bias of another dtype takes the F.linear fallback with the same result.
    layer.bias.data = layer.bias.data.float()
    with torch.no_grad():
        got = layer(x)
        want = torch.nn.functional.linear(x.float(), layer_ref.weight.float(), layer_ref.bias.float())
    torch.testing.assert_close(got.float(), want, rtol=2**-7, atol=2**-7)
    layer.bias.data = layer.bias.data.to(torch.bfloat16)


def test_row_strided_activation_does_not_recompile(compiled):
    """lm_head after a prefill sees the last position of each sequence: rows P*K apart."""
    model, ref, _ = compiled
    x = torch.randn(2, 5, 1024).to(torch.bfloat16)
    check_layer(model.o1, ref.o1, x[:, -1].contiguous())  # the bucket-2 artifact exists now
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    check_layer(model.o1, ref.o1, x[:, -1:, :])
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs


def test_two_threads_share_a_layer(compiled):
    model, ref, _ = compiled
    errors = []

    def work(seed):
        try:
            g = torch.Generator().manual_seed(seed)
            for _ in range(3):
                check_layer(model.o2, ref.o2, torch.randn(2, 1024, generator=g).to(torch.bfloat16))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in (10, 11)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


class Projection(torch.nn.Module):
    """Not an nn.Linear: owns its weight and calls F.linear in its own forward."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(2048, 1024) / 32)
        self.bias = torch.nn.Parameter(torch.randn(2048) / 32)
        self.table = torch.nn.Parameter(torch.randn(8, 8))  # 2-D, but below the gate

    def forward(self, x):
        return torch.nn.functional.linear(x, self.weight, self.bias)


class WithProjection(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = Projection()
        self.emb = torch.nn.Embedding(4096, 1024)  # 2-D weight, never an F.linear weight


def test_functional_linear_layers(compiled):
    torch.manual_seed(3)
    ref = WithProjection().to(torch.bfloat16).eval()
    model = copy.deepcopy(ref)
    report = regional.compile_linears(model)
    assert report.functional == [("proj.weight", 2048, 1024)]
    table = dict(report.fell_back)["proj.table"]
    assert table.reason is Policy.GATE and "F.linear weight" in str(table)
    assert "emb.weight" not in dict(report.fell_back)
    state = model.proj._rvv_functional_linear
    g = torch.Generator().manual_seed(4)
    x = torch.randn(1, 1024, generator=g).to(torch.bfloat16)

    check_layer(model.proj, ref.proj, x)
    assert state.calls_rvv == 1 and (2048, 1024, 1, True) in runtime.direct_keys()
    # The report announced the packed copy's size before it was built.
    assert report.functional_packed_bytes == state.packed_bytes() >= 2048 * 1024 * 2
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    # In-place update, new Parameter, load_state_dict: never stale, never recompiled.
    with torch.no_grad():
        model.proj.weight.mul_(2)
        ref.proj.weight.mul_(2)
    check_layer(model.proj, ref.proj, x)
    w = torch.randn(2048, 1024, generator=g).to(torch.bfloat16)
    model.proj.weight = torch.nn.Parameter(w.clone())
    ref.proj.weight = torch.nn.Parameter(w.clone())
    check_layer(model.proj, ref.proj, x)
    with torch.no_grad():
        ref.proj.bias.add_(1)
    model.load_state_dict(ref.state_dict())
    check_layer(model.proj, ref.proj, x)
    assert state.calls_rvv == 4
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs
    # An fp32 activation is not ours: ATen runs the call and raises exactly as it would.
    aten0 = state.calls_aten
    xf = torch.randn(2, 1024, generator=g)
    for mod in (model.proj, ref.proj):
        with pytest.raises(RuntimeError):
            mod(xf)
    assert state.calls_aten == aten0 + 1
    # With autograd, ATen as well (linear_packed has no backward), and gradients flow.
    xg = torch.randn(1, 1024, generator=g).to(torch.bfloat16).requires_grad_()
    model.proj(xg).sum().backward()
    assert state.calls_aten == aten0 + 2 and xg.grad is not None
    # A weight of another shape: a new artifact for the new shape, correct results.
    model.proj.weight = torch.nn.Parameter(torch.randn(1024, 1024, generator=g).to(torch.bfloat16))
    model.proj.bias = torch.nn.Parameter(torch.randn(1024, generator=g).to(torch.bfloat16))
    ref.proj.weight, ref.proj.bias = (torch.nn.Parameter(model.proj.weight.detach().clone()),
                                      torch.nn.Parameter(model.proj.bias.detach().clone()))
    check_layer(model.proj, ref.proj, x)
    assert (1024, 1024, 1, True) in runtime.direct_keys()
