"""`pip install .` builds the C++ core with the platform compiler (g++ in the riscv64
world) and ships the kernel headers; the installed package works without the checkout."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.fail("g++ is missing in this environment")
    src = tmp_path_factory.mktemp("src")
    # Build from a clean copy so no build tree of the checkout leaks in.
    for item in ("pyproject.toml", "CMakeLists.txt", "csrc", "python", "cmake", "README.md"):
        p = REPO / item
        (shutil.copytree if p.is_dir() else shutil.copy2)(p, src / item)
    target = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                        "--no-index", "--break-system-packages", "--target", str(target), str(src)],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return target


def _run(target, code, **env_extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RVV_INDUCTOR_LIB")}
    env.update(PYTHONPATH=str(target), **env_extra)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd="/", timeout=600)


def test_installed_package_detects_cpu_and_ships_headers(installed):
    code = ("import rvv_inductor, rvv_inductor._native as n, rvv_inductor.cpu as c;"
            "from rvv_inductor import paths;"
            "print(n.lib()._name); print(paths.include_dir()); print(c.detect().vlen)")
    r = _run(installed, code)
    assert r.returncode == 0, r.stderr
    lib, inc, vlen = r.stdout.split()
    assert lib.startswith(str(installed)), "the installed library, not the checkout's"
    assert inc.startswith(str(installed)) and (Path(inc) / "rvv_inductor" / "rvv" / "micro_gemm_bf16.h").is_file()
    if "RV64_VLEN" in os.environ and os.environ.get("RV64_NO_V") != "1":
        assert int(vlen) == int(os.environ["RV64_VLEN"])


def test_the_wheel_is_the_runtime_only(installed):
    """No demo/ (the demo and the K1 estimate run from the repository); the demo verb says
    so, and the runtime's verbs are there."""
    assert not (installed / "rvv_inductor" / "demo").exists()
    assert (installed / "rvv_inductor" / "loaders.py").is_file() and (installed / "rvv_inductor" / "serve.py").is_file()
    r = _run(installed, "import sys; from rvv_inductor.__main__ import main; sys.exit(main(['demo', '--help']))")
    assert r.returncode == 2 and "scripts/demo" in r.stderr, (r.returncode, r.stderr)
    r = _run(installed, "import sys; from rvv_inductor.__main__ import main; sys.exit(main(['info']))")
    assert r.returncode == 0, r.stderr


def test_env_var_enables_through_torch_autoload(installed):
    # The torch.backends entry point only exists for an installed distribution, which
    # --target provides (its .dist-info is on the path).
    r = _run(installed, "import torch, sys; m = sys.modules.get('rvv_inductor');"
                        "print(bool(m and m.is_enabled()))", RVV_INDUCTOR_ENABLE="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"
    r = _run(installed, "import torch, sys; m = sys.modules.get('rvv_inductor');"
                        "print(bool(m and m.is_enabled()))")
    assert r.stdout.strip() == "False"


def test_installed_package_runs_the_cpp_operator_kernels(installed):
    """Where LibTorch's headers are installed (libtorch-dev, as in this root filesystem),
    the wheel builds librvv_inductor_ops.so beside the core and the operators run it."""
    if not Path("/usr/include/torch/csrc/stable/library.h").is_file():
        pytest.fail("libtorch-dev is missing in this environment (scripts/setup installs it)")
    code = ("import torch, rvv_inductor.ops as o; print(o.kernels());"
            "x = torch.ones(1, 64, dtype=torch.bfloat16);"
            "from rvv_inductor import cpu, packed;"
            "wp = packed.pack(torch.ones(64, 64, dtype=torch.bfloat16), cpu.effective().block_n);"
            "print(float(o.linear_packed(x, wp, None, 64)[0, 0]))")
    r = _run(installed, code)
    assert r.returncode == 0, r.stderr
    kernels, value = r.stdout.split()
    assert kernels == "c++" and float(value) == 64.0
    assert (installed / "rvv_inductor" / "librvv_inductor_ops.so").is_file()
