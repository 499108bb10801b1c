"""The glue tests: the pure-Python parts of rvv_inductor, runnable without torch (the host
tier runs them with the host's python3, the torch tier again inside riscv64). A test that
needs the C++ core skips when no build of it loads; none needs torch."""
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PYTHON_DIR = REPO / "python"
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


@pytest.fixture
def py_env():
    """Environment for a fresh `python3` that must import this checkout's package."""
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=f"{PYTHON_DIR}{os.pathsep + path if path else ''}")


@pytest.fixture
def native():
    """The C++ core through ctypes, or a skip when no build of it loads here."""
    from rvv_inductor import _native

    try:
        return _native.lib()
    except _native.NativeLibraryError as e:
        pytest.skip(f"no loadable C++ core: {e}")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An Inductor cache directory that the routing log goes to."""
    from rvv_inductor import reasons

    log_dir = tmp_path / "rvv_inductor"
    log_dir.mkdir()
    monkeypatch.setattr(reasons, "_log_path", lambda: log_dir / reasons.LOG_NAME)
    return tmp_path
