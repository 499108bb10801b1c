"""inductor/cache_sizes.py: where Inductor's L1d/L2 sizes come from on RISC-V."""
from __future__ import annotations

import pytest

from rvv_inductor import policy
from rvv_inductor.inductor import cache_sizes


@pytest.mark.parametrize("text,size", [("32768", 32768), ("32K", 32768), ("48k\n", 49152), (" 2M ", 2 << 20),
                                       ("lots", None), ("", None), ("1G", None)])
def test_parse_size(text, size):
    assert cache_sizes._parse_size(text) == size


def _no_overrides(monkeypatch):
    for name in ("RVV_INDUCTOR_L1D_BYTES", "RVV_INDUCTOR_L2_BYTES"):
        monkeypatch.delenv(name, raising=False)


def test_env_must_be_a_positive_size(monkeypatch):
    _no_overrides(monkeypatch)
    monkeypatch.setenv("RVV_INDUCTOR_L1D_BYTES", "lots")
    with pytest.raises(ValueError, match="RVV_INDUCTOR_L1D_BYTES"):
        cache_sizes.resolve()
    monkeypatch.setenv("RVV_INDUCTOR_L1D_BYTES", "0")
    with pytest.raises(ValueError, match="positive"):
        cache_sizes.resolve()


def _index(root, i, level, kind, size):
    d = root / f"index{i}"
    d.mkdir(parents=True)
    (d / "level").write_text(f"{level}\n")
    (d / "type").write_text(f"{kind}\n")
    (d / "size").write_text(f"{size}\n")


def test_sysfs(tmp_path):
    _index(tmp_path, 0, 1, "Data", "32K")
    _index(tmp_path, 1, 1, "Instruction", "64K")
    _index(tmp_path, 2, 2, "Unified", "1024K")
    assert cache_sizes._from_sysfs(tmp_path) == (32768, 1 << 20)
    assert cache_sizes._from_sysfs(tmp_path / "missing") == (None, None)


def test_device_tree(tmp_path):
    (tmp_path / "cpu@0").mkdir()
    (tmp_path / "cpu@0" / "d-cache-size").write_bytes((65536).to_bytes(4, "big"))
    (tmp_path / "l2-cache0").mkdir()
    (tmp_path / "l2-cache0" / "cache-size").write_bytes((524288).to_bytes(4, "big"))
    assert cache_sizes._from_device_tree(tmp_path) == (65536, 524288)
    assert cache_sizes._from_device_tree(tmp_path / "missing") == (None, None)


def test_resolution_order(monkeypatch):
    _no_overrides(monkeypatch)
    monkeypatch.setattr(cache_sizes, "_from_sysfs", lambda: (None, None))
    monkeypatch.setattr(cache_sizes, "_from_device_tree", lambda: (65536, None))
    assert cache_sizes.resolve() == (65536, policy.K1_L2_BYTES, "L1d from device-tree, L2 from K1 default")
    monkeypatch.setattr(cache_sizes, "_from_sysfs", lambda: (None, 1 << 20))
    monkeypatch.setenv("RVV_INDUCTOR_L1D_BYTES", "48K")
    assert cache_sizes.resolve() == (48 * 1024, 1 << 20, "L1d from env, L2 from sysfs")


def test_wrapper_fills_only_zeros(monkeypatch):
    _no_overrides(monkeypatch)
    monkeypatch.setattr(cache_sizes, "resolve", lambda: (111, 222, "test"))
    wrapped = cache_sizes.get_capabilities_wrapper(lambda: {"l1d_cache_size": 0, "l2_cache_size": 999, "x": 1})
    assert wrapped() == {"l1d_cache_size": 111, "l2_cache_size": 999, "x": 1}
    full = cache_sizes.get_capabilities_wrapper(lambda: {"l1d_cache_size": 5, "l2_cache_size": 6})
    assert full() == {"l1d_cache_size": 5, "l2_cache_size": 6}
