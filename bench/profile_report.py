#!/usr/bin/env python3
"""Where a counted region's instructions go, by function and by library.

Input: the ``profile=FILE`` output of the rvvcount plugin (bench/plugin/rvvcount.cc): one
line per code location, ``insns<TAB>file<TAB>file_offset<TAB>guest_vaddr``. Each file
offset is turned into the ELF virtual address of that file (its PT_LOAD headers) and named
by ``llvm-symbolizer`` (the symbol tables the file has: a stripped Debian library still
names its exported functions; the rest is "?? in <library>").

    bench/profile_report.py PROFILE [--sysroot DIR] [--search DIR]... [--top 40] [--json OUT]

``--sysroot`` is prefixed to paths that do not exist as given (a profile taken in a
chroot names files as the guest saw them); ``--search DIR`` finds a file that is gone
(an AOTInductor package's ``.so``, extracted to a temporary directory that the runner
deleted) by its name under DIR. Host tools: llvm-readelf-19 and
llvm-symbolizer-19 (``scripts/setup`` installs llvm-19).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys


def tool(name: str) -> str:
    for cand in (f"{name}-19", name):
        path = shutil.which(cand)
        if path:
            return path
    sys.exit(f"profile_report: {name}-19 not found (scripts/setup installs llvm-19)")


def read_profile(path: str) -> list[tuple[int, str, int]]:
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4:
                sys.exit(f"profile_report: {path}:{n}: expected 4 tab-separated fields")
            rows.append((int(parts[0]), parts[1], int(parts[2], 16)))
    return rows


def load_segments(elf: str) -> list[tuple[int, int, int]]:
    """(p_offset, p_vaddr, p_filesz) of each PT_LOAD segment."""
    out = subprocess.run([tool("llvm-readelf"), "-lW", elf], capture_output=True, text=True)
    segs = []
    for line in out.stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
    return segs


def to_vaddr(segs, off: int) -> int | None:
    for p_off, p_vaddr, p_filesz in segs:
        if p_off <= off < p_off + p_filesz:
            return off - p_off + p_vaddr
    return None


def symbolize(elf: str, addrs: list[int]) -> dict[int, str]:
    """Function name per address (``llvm-symbolizer``'s first line per address)."""
    if not addrs:
        return {}
    inp = "".join(f"0x{a:x}\n" for a in addrs)
    out = subprocess.run([tool("llvm-symbolizer"), f"--obj={elf}", "--functions=linkage", "--demangle",
                          "--no-inlines", "--output-style=GNU"], input=inp, capture_output=True, text=True)
    lines = out.stdout.splitlines()
    names, i = {}, 0
    for a in addrs:  # GNU style: "function\nfile:line" per address
        name = lines[i] if i < len(lines) else "??"
        names[a] = name
        i += 2
    return names


def short(name: str, width: int = 110) -> str:
    # Template arguments say little in a table; keep the head and the function's own name.
    s = re.sub(r"\s+", " ", name)
    return s if len(s) <= width else s[: width - 3] + "..."


def find_by_name(name: str, dirs: list[str]) -> str | None:
    for d in dirs:
        for root, _, files in os.walk(d):
            if name in files:
                return os.path.join(root, name)
    return None


def report(profile: str, sysroot: str | None, top: int, search: list[str] | None = None) -> dict:
    rows = read_profile(profile)
    by_file = collections.defaultdict(list)
    for insns, path, off in rows:
        by_file[path].append((insns, off))
    funcs = collections.Counter()
    libs = collections.Counter()
    total = 0
    for path, locs in by_file.items():
        real = path
        if not os.path.exists(real) and sysroot:
            real = os.path.join(sysroot, path.lstrip("/"))
        lib = os.path.basename(path.replace(" (deleted)", ""))
        if not os.path.isfile(real) and search:
            real = find_by_name(lib, search) or real
        n_lib = sum(i for i, _ in locs)
        libs[lib] += n_lib
        total += n_lib
        if not os.path.isfile(real):
            funcs[(f"?? in {lib} (file not found)", lib)] += n_lib
            continue
        segs = load_segments(real)
        addr_of = {off: to_vaddr(segs, off) for _, off in locs}
        names = symbolize(real, sorted({a for a in addr_of.values() if a is not None}))
        for insns, off in locs:
            a = addr_of[off]
            name = names.get(a, "??") if a is not None else "??"
            if name in ("??", ""):
                name = f"?? in {lib}"
            funcs[(name, lib)] += insns
    return {"total_insns": total,
            "libraries": [{"library": k, "insns": v} for k, v in libs.most_common()],
            "functions": [{"function": k[0], "library": k[1], "insns": v} for k, v in funcs.most_common(top)]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--sysroot")
    ap.add_argument("--search", action="append", default=[], help="find missing files by name under DIR")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--json", help="also write the report as JSON")
    a = ap.parse_args(argv)
    r = report(a.profile, a.sysroot, a.top, a.search)
    t = r["total_insns"] or 1
    print(f"total instructions in regions: {r['total_insns']:,}")
    print("\nby library:")
    for x in r["libraries"]:
        print(f"  {x['insns']:>14,}  {100 * x['insns'] / t:5.1f}%  {x['library']}")
    print(f"\nby function (top {a.top}):")
    for x in r["functions"]:
        print(f"  {x['insns']:>14,}  {100 * x['insns'] / t:5.1f}%  {short(x['function'])}  [{x['library']}]")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
