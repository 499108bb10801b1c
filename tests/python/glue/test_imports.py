"""The package's import structure: no cycle (also none hidden in function-level imports),
every module importable alone in a fresh interpreter, and torch loaded only by the
modules that need it."""
from __future__ import annotations

import ast
import concurrent.futures
import importlib.util
import os
import subprocess
import sys

from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[3] / "python"
PKG = PYTHON_DIR / "rvv_inductor"

# Modules that must import without torch: the host's python3 (bench/report.py, the host
# tier) and `python3 -m rvv_inductor` before any compile rely on it.
TORCH_FREE = {
    "rvv_inductor", "rvv_inductor.__main__", "rvv_inductor._native", "rvv_inductor._patching",
    "rvv_inductor.cpu", "rvv_inductor.integration", "rvv_inductor.policy", "rvv_inductor.reasons",
    "rvv_inductor.verify", "rvv_inductor.inductor", "rvv_inductor.inductor.cache_sizes",
    "rvv_inductor.inductor.kernel_marker", "rvv_inductor.inductor.paths", "rvv_inductor.inductor.prefix_overlay",
    "rvv_inductor.demo", "rvv_inductor.demo.estimate", "rvv_inductor.demo.models", "rvv_inductor.demo.progress",
    "rvv_inductor.demo.report", "rvv_inductor.demo.worker", "rvv_inductor.demo.llamacpp",
    "rvv_inductor.calibration", "rvv_inductor.serve", "rvv_inductor.serve_requests", "rvv_inductor.gguf_checks",
    "rvv_inductor.weight_spec",
}


def module_names() -> list[str]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(PYTHON_DIR).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append(".".join(parts))
    return out


def _file(name: str):
    base = PYTHON_DIR.joinpath(*name.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def imports_of(name: str, modules: set[str]) -> set[str]:
    """The package's modules that `name` imports anywhere in its text (function bodies
    included), resolved as Python does: `from . import x` is module `pkg.x` when that is a
    module, else an attribute of `pkg` itself."""
    is_pkg = _file(name).name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(_file(name).read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level \
                else node.module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        out |= {t for t in targets if t in modules and t != name}
    return out


def test_no_import_cycle():
    modules = set(module_names())
    graph = {m: imports_of(m, modules) for m in modules}
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for dep in sorted(graph[m]):
            if state.get(dep) == 1:
                cycle = path[path.index(dep):] + [dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, path + [dep])
        state[m] = 2

    for m in sorted(modules):
        if m not in state:
            visit(m, [m])


def test_runtime_does_not_load_inductor_codegen():
    """The regional runtime picks buckets and runs artifacts: no Inductor code generation."""
    modules = set(module_names())
    for name in ("rvv_inductor.runtime", "rvv_inductor.regional", "rvv_inductor.functional_linear"):
        assert not any(dep.startswith("rvv_inductor.inductor.") and dep != "rvv_inductor.inductor.paths"
                       for dep in imports_of(name, modules)), (name, imports_of(name, modules))
        text = _file(name).read_text()
        assert "torch._inductor" not in text, name


def _has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


def _import_alone(name: str, env: dict) -> str | None:
    """What is wrong with `import name` in a fresh interpreter, or None."""
    code = f"import sys, {name}\nprint('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        return f"{name}: import failed:\n{r.stderr}"
    if name in TORCH_FREE and r.stdout.strip() != "False":
        return f"{name}: imported torch"
    return None


def test_each_module_imports_alone(py_env):
    """Each module in its own fresh interpreter (several at once: under emulation each
    torch import takes ~10 s); without torch installed, the torch-free ones."""
    names = [n for n in module_names() if n in TORCH_FREE or _has_torch()]
    assert TORCH_FREE <= set(module_names()), TORCH_FREE - set(module_names())
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        problems = [p for p in pool.map(lambda n: _import_alone(n, py_env), names) if p]
    assert not problems, "\n".join(problems)
