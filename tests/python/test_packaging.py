"""A board user's install path (docs/board-installation.md), run as written: the wheel built
by Debian's build backend (python3-scikit-build-core; no build isolation, no PyPI) with the
platform compiler (g++ in the riscv64 world), installed into a fresh virtual environment
that sees the system's site packages (Debian's torch, transformers, gguf), and used from
there with no checkout on sys.path:

- the wheel holds the runtime only (no demo), the C++ core and operator kernels, the
  kernel headers, and `rvv-generate` in its scripts, so that it lands on the environment's
  PATH beside `rvv-inductor`;
- `rvv-inductor info`, the torch.backends autoload, the C++ operator kernels;
- `compile_linears` on a small model, against an FP64 reference;
- the suite's own tests marked "installed" (conftest.py), run in that environment against
  the installed package: `load_gguf` on a small file (test_gguf), `serve` answering
  /v1/models and completions without a Hugging Face cache (test_serve), and `export`
  followed by the installed `rvv-generate` running the package (test_export's INT8
  package). scripts/test leaves those tests out of its checkout run (RVV_DEFER_INSTALLED),
  so they run once, here.
"""
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The sources a user's `pip install .` builds from (tools/: rvv-generate).
SOURCES = ("pyproject.toml", "CMakeLists.txt", "csrc", "python", "cmake", "tools", "README.md")
INSTALLED_TESTS = ("tests/python/test_gguf.py", "tests/python/test_serve.py", "tests/python/test_export.py")
HAS_LIBTORCH_DEV = Path("/usr/include/torch/csrc/inductor/aoti_package/model_package_loader.h").is_file()


def _pip(python, *args, timeout):
    r = subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory, watchdog):
    if shutil.which("g++") is None:
        pytest.fail("g++ is missing in this environment (scripts/setup installs it)")
    if not HAS_LIBTORCH_DEV:
        pytest.fail("libtorch-dev is missing in this environment (scripts/setup installs it)")
    src = tmp_path_factory.mktemp("src")
    # A clean copy, so no build tree of the checkout leaks in.
    for item in SOURCES:
        p = REPO / item
        (shutil.copytree if p.is_dir() else shutil.copy2)(p, src / item)
    out = tmp_path_factory.mktemp("wheel")
    _pip(sys.executable, "wheel", "--no-build-isolation", "--no-deps", "--no-index", "--wheel-dir", str(out),
         str(src), timeout=2400)
    watchdog()  # the build (g++ under emulation) gets the whole timeout; the install its own
    (whl,) = out.glob("rvv_inductor-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """(bin directory, the installed package's directory) of a fresh environment holding
    the wheel; Debian's pip (python3-pip) installs into it, as docs/board-installation.md says."""
    env_dir = tmp_path_factory.mktemp("venv")
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(env_dir)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    python = env_dir / "bin" / "python"
    _pip(python, "install", "--no-deps", "--no-index", str(wheel), timeout=600)
    r = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                       capture_output=True, text=True, timeout=120)
    return env_dir / "bin", Path(r.stdout.strip()) / "rvv_inductor"


def _env(bin_dir, **extra):
    """No checkout on sys.path, no checkout library; the environment's bin/ first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RVV_INDUCTOR_LIB", "RVV_GENERATE")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", **extra)
    return env


def _run(venv, code, *args, **env_extra):
    bin_dir, _ = venv
    return subprocess.run([str(bin_dir / "python"), "-c", code, *args], capture_output=True, text=True,
                          env=_env(bin_dir, **env_extra), cwd="/", timeout=900)


def test_the_wheel_is_the_runtime_and_its_commands(wheel):
    """No demo/ (the demo and the K1 estimate run from the repository); the libraries, the
    headers, the `rvv-inductor` entry point, and rvv-generate in the wheel's scripts
    (pip installs those into the environment's bin/; `bin/` inside site-packages would be
    off PATH)."""
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith("rvv_inductor/demo/")]
    for need in ("rvv_inductor/librvv_inductor_core.so", "rvv_inductor/librvv_inductor_ops.so",
                 "rvv_inductor/loaders.py", "rvv_inductor/serve.py"):
        assert need in names, need
    # Every file of the kernels' include tree (headers and the .inl tables they include).
    csrc = REPO / "csrc"
    headers = {f"rvv_inductor/include/{p.relative_to(csrc)}" for p in (csrc / "rvv_inductor").rglob("*") if p.is_file()}
    assert len(headers) > 40 and not headers - set(names), sorted(headers - set(names))
    assert [n for n in names if re.fullmatch(r"rvv_inductor-[^/]+\.data/scripts/rvv-generate", n)], names
    assert not [n for n in names if n.endswith("/bin/rvv-generate") or n == "bin/rvv-generate"]
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "rvv-inductor = rvv_inductor.__main__:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_installed_commands_are_on_path(venv):
    bin_dir, _ = venv
    env = _env(bin_dir)
    assert shutil.which("rvv-generate", path=env["PATH"]) == str(bin_dir / "rvv-generate")
    assert shutil.which("rvv-inductor", path=env["PATH"]) == str(bin_dir / "rvv-inductor")
    r = subprocess.run(["rvv-inductor", "info"], capture_output=True, text=True, env=env, cwd="/", timeout=600)
    assert r.returncode == 0 and "vlen" in r.stdout.lower(), r.stdout + r.stderr
    # The runner refuses a missing package with its one-line error (it starts, links libtorch).
    r = subprocess.run(["rvv-generate", "/nonexistent.pt2", "--prompt-ids", "1"], capture_output=True, text=True,
                       env=env, cwd="/", timeout=600)
    assert r.returncode == 2 and "nonexistent.pt2" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = _run(venv, "import sys; from rvv_inductor.__main__ import main; sys.exit(main(['demo', '--help']))")
    assert r.returncode == 2 and "scripts/demo" in r.stderr, (r.returncode, r.stderr)


def test_installed_package_detects_cpu_and_ships_headers(venv):
    _, pkg = venv
    code = ("import rvv_inductor, rvv_inductor._native as n, rvv_inductor.cpu as c;"
            "from rvv_inductor import paths;"
            "print(n.lib()._name); print(paths.include_dir()); print(c.detect().vlen)")
    r = _run(venv, code)
    assert r.returncode == 0, r.stderr
    lib, inc, vlen = r.stdout.split()
    assert lib.startswith(str(pkg)), "the installed library, not the checkout's"
    assert inc.startswith(str(pkg)) and (Path(inc) / "rvv_inductor" / "rvv" / "micro_gemm_bf16.h").is_file()
    if "RV64_VLEN" in os.environ and os.environ.get("RV64_NO_V") != "1":
        assert int(vlen) == int(os.environ["RV64_VLEN"])


AUTOLOADED = "import torch, sys; m = sys.modules.get('rvv_inductor'); print(bool(m and m.is_enabled()));"


def test_env_var_enables_through_torch_autoload(venv):
    # The torch.backends entry point exists only for an installed distribution. (Without
    # the variable it does nothing: the next test's process checks that.)
    r = _run(venv, AUTOLOADED, RVV_INDUCTOR_ENABLE="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


def test_installed_package_runs_the_cpp_operator_kernels(venv):
    """With LibTorch's headers installed (libtorch-dev), the wheel builds
    librvv_inductor_ops.so beside the core and the operators run it."""
    code = (AUTOLOADED + "import rvv_inductor.ops as o; print(o.kernels());"
            "x = torch.ones(1, 64, dtype=torch.bfloat16);"
            "from rvv_inductor import cpu, packed;"
            "wp = packed.pack(torch.ones(64, 64, dtype=torch.bfloat16), cpu.effective().block_n);"
            "print(float(o.linear_packed(x, wp, None, 64)[0, 0]))")
    r = _run(venv, code)
    assert r.returncode == 0, r.stderr
    enabled, kernels, value = r.stdout.split()
    assert enabled == "False", "enabled at `import torch` without RVV_INDUCTOR_ENABLE=1"
    assert kernels == "c++" and float(value) == 64.0


# compile_linears on a small BF16 model through Inductor (the generated code includes the
# installed headers): each layer within test_regional's FP32-accumulation bound of an FP64
# product (its check_layer; tests/python is put on sys.path, the package is the installed one).
COMPILE_LINEARS = """
import copy, os, sys, torch, rvv_inductor
sys.path.insert(0, sys.argv[1])
from test_regional import check_layer
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)).to(torch.bfloat16).eval()
ref = copy.deepcopy(m)
x = torch.randn(3, 256, dtype=torch.bfloat16)
report = rvv_inductor.compile_linears(m)
assert len(report.taken) == 2 and not report.fell_back, report
with torch.no_grad():
    check_layer(m[0], ref[0], x)
    check_layer(m[2], ref[2], torch.relu(ref[0](x)))  # the second layer's input as eager computes it
    assert m(x).shape == (3, 256)
print("ok", os.path.dirname(rvv_inductor.__file__))
"""


# Slow: the installed suite's load_gguf and export compile through Inductor with the
# installed headers too; this adds a BF16 compile_linears against FP64.
@pytest.mark.slow
def test_compile_linears_from_the_installed_package(venv, tmp_path):
    _, pkg = venv
    r = _run(venv, COMPILE_LINEARS, str(REPO / "tests" / "python"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.split() == ["ok", str(pkg)]


def test_the_suite_passes_against_the_installed_package(venv):
    """The tests marked "installed" (load_gguf, serve, export + rvv-generate), in the
    environment: its python, its rvv-generate on PATH, the installed package checked to be
    the one imported (RVV_INSTALLED_PACKAGE, conftest.py). Every selected test must pass:
    a skip here would hide the installed path."""
    bin_dir, pkg = venv
    r = subprocess.run([str(bin_dir / "python"), "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:logging", "-q",
                        "-rfEs", "-m", "installed", *INSTALLED_TESTS], capture_output=True, text=True, cwd=REPO,
                       timeout=3000, env=_env(bin_dir, RVV_INSTALLED_PACKAGE=str(pkg), RVV_DEFER_INSTALLED="0",
                                              RVV_GENERATE=str(bin_dir / "rvv-generate")))
    print(r.stdout[-4000:])
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    summary = r.stdout.strip().splitlines()[-1]
    m = re.search(r"(\d+) passed", summary)
    assert m and int(m.group(1)) == len(INSTALLED_TESTS), summary
    assert not re.search(r"skipped|xfail|error", summary), summary
