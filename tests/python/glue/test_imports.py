"""The package's import structure: no cycle (also none hidden in function-level imports),
every module importable alone in a fresh interpreter, torch loaded only by the modules
that need it, and every import inside a function saying why it is there (``# lazy:``)."""
from __future__ import annotations

import ast
import importlib.util
import io
import subprocess
import sys
import tokenize

from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[3] / "python"
PKG = PYTHON_DIR / "rvv_inductor"

# Modules that must import without torch: the host's python3 (bench/report.py, the host
# tier) and `python3 -m rvv_inductor` before any compile rely on it. (The demo's worker.py
# imports torch; the driver and the report read its tables in demo/modes.py.)
TORCH_FREE = {
    "rvv_inductor", "rvv_inductor.__main__", "rvv_inductor._native", "rvv_inductor._patching",
    "rvv_inductor.cpu", "rvv_inductor.integration", "rvv_inductor.policy", "rvv_inductor.reasons",
    "rvv_inductor.verify", "rvv_inductor.inductor", "rvv_inductor.inductor.cache_sizes",
    "rvv_inductor.inductor.kernel_marker", "rvv_inductor.paths", "rvv_inductor.inductor.prefix_overlay",
    "rvv_inductor.demo", "rvv_inductor.demo.estimate", "rvv_inductor.demo.models", "rvv_inductor.demo.progress",
    "rvv_inductor.demo.progress_line",
    "rvv_inductor.demo.report", "rvv_inductor.demo.modes", "rvv_inductor.demo.llamacpp",
    "rvv_inductor.demo.calibration", "rvv_inductor.serve", "rvv_inductor.serve_requests", "rvv_inductor.gguf_checks",
    "rvv_inductor.weight_spec", "rvv_inductor.export",
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
        assert not any(dep.startswith("rvv_inductor.inductor") for dep in imports_of(name, modules)), (
            name, imports_of(name, modules))
        text = _file(name).read_text()
        assert "torch._inductor" not in text, name


def _has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


# Each module is imported in a child forked from one interpreter, so a fresh interpreter's
# start (and, under emulation, ~10 s of torch import) is paid once per kind, not per
# module. For the torch-free modules the parent has imported nothing but the standard
# library, and the child checks torch stayed out; for the others the parent has imported
# torch, Inductor and transformers (third-party only), so each child still finds any of
# the package's own imports that are missing or circular.
_FORK_SERVER = r"""
import importlib, os, sys, traceback
mode, names = sys.argv[1], sys.argv[2:]
if mode == "torch":
    import torch, torch._dynamo, torch._inductor.config
    for extra in ("torch._inductor.lowering", "torch._inductor.select_algorithm",
                  "torch._inductor.codegen.cpp_template", "transformers"):
        try:
            importlib.import_module(extra)
        except ImportError:
            pass
assert not [m for m in sys.modules if m.split(".")[0] in ("rvv_inductor", "torch" if mode == "free" else "-")]
for name in names:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            sys.stderr.write(f"{name}: import failed:\n{traceback.format_exc()}\n")
            sys.stderr.flush()
            os._exit(1)
        os._exit(3 if mode == "free" and "torch" in sys.modules else 0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        what = "imported torch" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3 else "failed"
        print(f"FAILED {name}: {what} (wait status {status})", flush=True)
print("DONE", flush=True)
"""


def _import_each(mode: str, names: list[str], env: dict) -> str | None:
    """Problems importing each of ``names`` alone (mode "free": also torch must stay out), or None."""
    r = subprocess.run([sys.executable, "-c", _FORK_SERVER, mode, *names], capture_output=True, text=True,
                       env=env, timeout=1500)
    if r.returncode != 0 or "DONE" not in r.stdout or "FAILED" in r.stdout:
        return f"{r.stdout}\n{r.stderr}"
    return None


def test_each_module_imports_alone(py_env):
    """Each module on its own (see _FORK_SERVER); without torch installed, the torch-free ones."""
    assert TORCH_FREE <= set(module_names()), TORCH_FREE - set(module_names())
    problems = [_import_each("free", [n for n in module_names() if n in TORCH_FREE], py_env)]
    if _has_torch():
        problems.append(_import_each("torch", [n for n in module_names() if n not in TORCH_FREE], py_env))
    problems = [p for p in problems if p]
    assert not problems, "\n".join(problems)


def test_the_import_check_can_fail(py_env):
    """The fork server reports a module that does not import, and a torch-free module that
    imports torch."""
    assert "FAILED rvv_inductor.no_such_module: failed" in (_import_each("free", ["rvv_inductor.no_such_module"],
                                                                         py_env) or "")
    if _has_torch():
        assert "FAILED torch.nn: imported torch" in (_import_each("free", ["torch.nn"], py_env) or "")


# An import inside a function is there for a reason it states: a comment starting "# lazy:"
# on its line, or on the line directly above it or above the run of imports (consecutive
# statements of one body) it begins or belongs to. The reasons: a module that must import
# without torch (TORCH_FREE), `import rvv_inductor` not importing Inductor or transformers,
# or a measured or ordered effect that importing at the top would change.
LAZY = "# lazy:"


def unexplained_function_imports(source: str, name: str) -> list[str]:
    """``name:line`` of every import inside a function of ``source`` without its ``# lazy:``."""
    lines = source.splitlines()
    lazy_lines = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                  if tok.type == tokenize.COMMENT and tok.string.startswith(LAZY)}

    def comment_above(node: ast.stmt) -> bool:
        above = node.lineno - 1
        return above >= 1 and above in lazy_lines and lines[above - 1].lstrip().startswith(LAZY)

    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            body = getattr(node, field, None)
            if not isinstance(body, list) or not body or not isinstance(body[0], ast.AST):
                continue
            covered = False  # a "# lazy:" above the run of imports this statement belongs to
            for stmt in body:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    covered = covered or comment_above(stmt)
                    explained = covered or any(n in lazy_lines for n in range(stmt.lineno, stmt.end_lineno + 1))
                    if in_function and not explained:
                        out.append(f"{name}:{stmt.lineno}")
                else:
                    covered = False
        for child in ast.iter_child_nodes(node):
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(ast.parse(source), False)
    return sorted(set(out), key=lambda s: (s.rpartition(":")[0], int(s.rpartition(":")[2])))


def test_every_function_level_import_says_why():
    """Imports sit at the module top; one inside a function says why, in a ``# lazy:`` comment."""
    offenders = []
    for path in sorted(PKG.rglob("*.py")):
        offenders += unexplained_function_imports(path.read_text(), str(path.relative_to(PYTHON_DIR.parent)))
    assert not offenders, ("imports inside a function without a `# lazy: <why>` comment (on the line, or "
                           "above it or above its run of imports); move them to the top, or say why not:\n  "
                           + "\n  ".join(offenders))


def test_the_lazy_import_check_can_fail():
    """The check names each unexplained function-level import, and accepts the forms allowed."""
    source = '''import os


def explained():
    # lazy: torch; a reason
    import torch
    import numpy as np

    from . import heavy
    x = 1
    import json


def same_line():
    import json  # lazy: a reason


class C:
    import re

    def method(self):
        try:
            import gguf
        except ImportError:
            return None

        def inner():
            # lazy: a reason

            import torch
            import numpy  # lazy: a reason
            import csv
            return torch, numpy, csv

        # lazy: a reason, but not directly above the import
        y = 2  # lazy: a reason for code, not for the import below
        import math
        # a comment that is not a reason
        import time
        import tempfile  # a reason that is not "lazy"
        return gguf, inner, y, math, time, tempfile
'''
    assert unexplained_function_imports(source, "m.py") == [
        "m.py:11", "m.py:23", "m.py:30", "m.py:32", "m.py:37", "m.py:39", "m.py:40"]
