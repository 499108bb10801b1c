"""Command line: ``python3 -m rvv_inductor {info,verify,demo,serve}``."""
from __future__ import annotations

import json
import sys

from . import _native, cpu
from ._native import NativeLibraryError
from .export import main as export_main
from .export import verify_main as verify_package
from .serve import main as serve_main
from .verify import main as verify_main


def _info(argv: list[str]) -> int:
    d = cpu.detect()
    try:
        e = cpu.effective()
        err = None
    except cpu.CpuOverrideError as ex:
        e, err = None, str(ex)
    try:
        march = d.march
    except NativeLibraryError:  # off riscv64, without a host build of the C++ core
        march = None
    print(json.dumps({"detected": d.__dict__, "march": march,
                      "effective": e.__dict__ if e else None, "override_error": err,
                      "operator_kernels": _native.operator_kernels()}, indent=2))
    return 1 if err else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: python3 -m rvv_inductor {info,verify,demo,serve,export} [args]"
    if not argv or argv[0] in ("-h", "--help"):
        print(usage)
        print("  info    what the CPU detector reports (and RVV_INDUCTOR_CPU's effect)")
        print("  verify  inspect an Inductor cache directory: routing, kernels, vector instructions")
        print("  demo    eager vs regional RVV vs whole-model compile on a Qwen2 decoder (demo --help)")
        print("  serve   transformers' OpenAI-compatible server, Linear layers on RVV (serve --help)")
        print("  export  an AOTInductor package (.pt2) of a decoder's decode step for rvv-generate (export --help)")
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "info":
        return _info(rest)
    if cmd == "verify" and rest and rest[0].endswith(".pt2"):
        return verify_package(rest)
    if cmd == "export":
        return export_main(rest)
    if cmd == "verify":
        return verify_main(rest)
    if cmd == "demo":
        try:
            # lazy: the demo is not in the installed wheel, and the other commands must not need it
            from .demo import main as demo_main
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.demo":
                raise
            print("rvv_inductor: the demo runs from the repository (scripts/demo, or python3 -m rvv_inductor demo "
                  "with its python/ on PYTHONPATH); the installed package is the runtime only "
                  "(docs/architecture.md, 'The package boundary')", file=sys.stderr)
            return 2
        return demo_main(rest)
    if cmd == "serve":
        return serve_main(rest)
    print(f"unknown command {cmd!r}\n{usage}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
