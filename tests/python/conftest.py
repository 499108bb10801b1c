"""Shared pytest setup for the emulated (or native riscv64) PyTorch tier.

scripts/rv64 exports how QEMU was configured (RV64_VLEN, RV64_BF16, RV64_NO_V): that is
the independent truth detection is checked against. On a native riscv64 host these are
absent and the expectations come from the hardware itself.
"""
import faulthandler
import os
import platform
import sys

import pytest

# One test (its fixtures' setup included) may take this long under emulation; then the
# process prints every thread's stack and exits, so a hang fails its shard at once instead
# of using up CI's time. The slowest test takes ~8 min on an idle 2-core machine.
TEST_TIMEOUT_S = float(os.environ.get("RVV_TEST_TIMEOUT", "1500"))


_watchdog_out = None  # stderr as it was before pytest captured it (as pytest's faulthandler plugin)


# Tests marked "installed" also run against the installed wheel (test_packaging.py runs them
# in a fresh virtual environment). scripts/test sets RVV_DEFER_INSTALLED=1 for its checkout
# run, which then leaves them to that run instead of paying for them twice; a plain pytest
# run keeps them. In the installed run RVV_INSTALLED_PACKAGE names the package directory
# that must be the one imported (a checkout on sys.path would make the run meaningless).
DEFER_INSTALLED = os.environ.get("RVV_DEFER_INSTALLED") == "1"
# Tests marked "slow" are expensive emulated checks whose paths other tests mostly cover
# (docs/testing-and-ci.md lists them and what each adds). scripts/test's bounded torch tier,
# which CI runs, sets RVV_SKIP_SLOW=1 and so deselects them; `scripts/test --full` and a
# plain pytest run keep them.
SKIP_SLOW = os.environ.get("RVV_SKIP_SLOW") == "1"
INSTALLED_PACKAGE = os.environ.get("RVV_INSTALLED_PACKAGE")


def pytest_configure(config):
    global _watchdog_out
    config.addinivalue_line("markers", "matrix: also run at VLEN 128, with V off and with BF16 hardware")
    config.addinivalue_line("markers", "installed: also run against the installed wheel (test_packaging.py)")
    config.addinivalue_line("markers", "slow: left out of the bounded tier CI runs (scripts/test --full runs it)")
    _watchdog_out = os.fdopen(os.dup(sys.stderr.fileno()), "w")
    if INSTALLED_PACKAGE:
        import rvv_inductor

        got = os.path.realpath(os.path.dirname(rvv_inductor.__file__))
        if got != os.path.realpath(INSTALLED_PACKAGE):
            raise pytest.UsageError(f"RVV_INSTALLED_PACKAGE={INSTALLED_PACKAGE}, but rvv_inductor comes from {got}")


def pytest_collection_modifyitems(config, items):
    def leave_out(marker):
        out = [i for i in items if i.get_closest_marker(marker)]
        if out:
            items[:] = [i for i in items if not i.get_closest_marker(marker)]
            config.hook.pytest_deselected(items=out)

    if DEFER_INSTALLED:
        leave_out("installed")
    if SKIP_SLOW:
        leave_out("slow")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _arm_watchdog()
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def _arm_watchdog():
    if TEST_TIMEOUT_S > 0:
        faulthandler.dump_traceback_later(TEST_TIMEOUT_S, exit=True, file=_watchdog_out or sys.stderr)


_file_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    _file_seconds[path] = _file_seconds.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """Seconds per test file (setup, call and teardown): scripts/test's shard weights
    (torch_test_minutes) are read off this."""
    if len(_file_seconds) > 1:
        terminalreporter.write_sep("=", "seconds per file")
        for path, s in sorted(_file_seconds.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{s:8.1f}  {path}")


@pytest.fixture(scope="session")
def watchdog():
    """A callable that restarts the running test's watchdog: for a fixture made of several
    long steps (test_export's exports), each step gets TEST_TIMEOUT_S, not their sum."""
    return _arm_watchdog


@pytest.fixture(scope="session")
def emulated():
    """The QEMU configuration, or None when running natively."""
    if "RV64_VLEN" not in os.environ or platform.machine() != "riscv64":
        return None
    return {
        "vlen": 0 if os.environ.get("RV64_NO_V") == "1" else int(os.environ["RV64_VLEN"]),
        "v": os.environ.get("RV64_NO_V") != "1",
        "bf16": os.environ.get("RV64_BF16") == "1",
    }


@pytest.fixture(scope="module")
def inductor_cache(tmp_path_factory):
    """A fresh Inductor cache directory and Dynamo state for one test module, and
    rvv_inductor disabled after it (modules use it autouse via pytestmark, or by name)."""
    import torch

    import rvv_inductor

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.mktemp("inductor")))
        torch._dynamo.reset()
        yield
        rvv_inductor.disable()
        torch._dynamo.reset()
