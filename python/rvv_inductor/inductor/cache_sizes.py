"""Real L1d/L2 sizes for Inductor's GEMM template on RISC-V.

``CppGemmTemplate`` asserts ``torch.cpu.get_capabilities()["l1d_cache_size"] > 0`` (and
L2), but torch's cpuinfo reports 0 on RISC-V: the most common RISC-V Inductor failure
upstream ("Expect L1_cache_size > 0 but got 0"). We fill in the zeros, in this order:

1. ``RVV_INDUCTOR_L1D_BYTES`` / ``RVV_INDUCTOR_L2_BYTES`` (validated positive integers);
2. sysfs ``/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}``;
3. the device tree (``/proc/device-tree/cpus/cpu@0/d-cache-size`` and its L2 node);
4. the SpacemiT K1's sizes (``policy.K1_L1D_BYTES``, ``policy.K1_L2_BYTES``).

Non-zero values reported by torch are never replaced. Under QEMU user mode /sys is the
host's; on riscv64 hardware it describes the real CPU. The source is logged.
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from ..policy import K1_L1D_BYTES, K1_L2_BYTES

log = logging.getLogger("rvv_inductor")


def _parse_size(text: str) -> int | None:
    m = re.fullmatch(r"\s*(\d+)\s*([KkMm]?)\s*", text)
    if not m:
        return None
    n = int(m.group(1))
    return n * {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]


def _from_env() -> tuple[int | None, int | None]:
    out = []
    for name in ("RVV_INDUCTOR_L1D_BYTES", "RVV_INDUCTOR_L2_BYTES"):
        raw = os.environ.get(name)
        if raw is None:
            out.append(None)
            continue
        size = _parse_size(raw)
        if not size or size <= 0:
            raise ValueError(f"{name}={raw!r}: expected a positive size such as 32768 or 32K")
        out.append(size)
    return out[0], out[1]


def _from_sysfs(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> tuple[int | None, int | None]:
    l1d = l2 = None
    try:
        for idx in sorted(root.glob("index*")):
            level = (idx / "level").read_text().strip()
            kind = (idx / "type").read_text().strip()
            size = _parse_size((idx / "size").read_text())
            if level == "1" and kind in ("Data", "Unified"):
                l1d = size
            elif level == "2" and kind in ("Data", "Unified"):
                l2 = size
    except OSError:
        pass
    return l1d, l2


def _read_be32(path: Path) -> int | None:
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    return int.from_bytes(raw[:4], "big") if len(raw) >= 4 else None


def _from_device_tree(root: Path = Path("/proc/device-tree/cpus")) -> tuple[int | None, int | None]:
    l1d = _read_be32(root / "cpu@0" / "d-cache-size")
    l2 = None
    for node in sorted(root.glob("*l2*")) + sorted(root.glob("cpu@0/l2-cache*")):
        l2 = _read_be32(node / "cache-size") or l2
    return l1d, l2


def resolve() -> tuple[int, int, str]:
    """(l1d_bytes, l2_bytes, source description)."""
    env_l1, env_l2 = _from_env()
    sys_l1, sys_l2 = _from_sysfs()
    dt_l1, dt_l2 = _from_device_tree()
    sources = []

    def pick(*cands):
        for value, name in cands:
            if value:
                sources.append(name)
                return value
        raise AssertionError("unreachable: the K1 default is always last")

    l1 = pick((env_l1, "env"), (sys_l1, "sysfs"), (dt_l1, "device-tree"), (K1_L1D_BYTES, "K1 default"))
    l2 = pick((env_l2, "env"), (sys_l2, "sysfs"), (dt_l2, "device-tree"), (K1_L2_BYTES, "K1 default"))
    return l1, l2, f"L1d from {sources[0]}, L2 from {sources[1]}"


def get_capabilities_wrapper(original):
    """torch.cpu.get_capabilities with zero cache sizes replaced by real ones."""
    cached: dict = {}

    def get_capabilities(*args, **kwargs):
        caps = dict(original(*args, **kwargs))
        if caps.get("l1d_cache_size", 0) > 0 and caps.get("l2_cache_size", 0) > 0:
            return caps
        if not cached:
            l1, l2, how = resolve()
            cached.update(l1=l1, l2=l2)
            log.info("rvv_inductor: cache sizes %d / %d bytes (%s)", l1, l2, how)
        if caps.get("l1d_cache_size", 0) <= 0:
            caps["l1d_cache_size"] = cached["l1"]
        if caps.get("l2_cache_size", 0) <= 0:
            caps["l2_cache_size"] = cached["l2"]
        return caps

    get_capabilities.__wrapped__ = original
    return get_capabilities
