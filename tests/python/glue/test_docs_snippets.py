"""The documentation's runnable snippets run, and its relative links lead somewhere.

A shell or Python snippet in README.md or docs/*.md that is cheap and needs no torch and no
emulation is marked with an HTML comment on the line right before its opening fence:

    <!-- runnable -->                 runs as it is on the host
    <!-- runnable: needs-core -->     the same, but it loads the C++ core (skipped without one)

Each marked snippet runs from the repository root with PYTHONPATH=python: sh/bash ones with
`bash -e`, python ones with this interpreter (the host's python3 in the host tier), each
with a timeout. Snippets run on an x86_64 host only (the glue tests also run inside the
emulated riscv64 world, where a python3 start alone takes seconds); the link checks run
everywhere. See docs/testing-and-ci.md, "Runnable snippets in the documentation".
"""
from __future__ import annotations

import atexit
import dataclasses
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PAGES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
TIMEOUT_S = 60
MIN_SNIPPETS = 8  # fewer means the markers were lost, not that the docs got simpler
LANGS = {"sh": "bash", "bash": "bash", "shell": "bash", "python": "python", "py": "python"}
FLAGS = {"needs-core"}

MARKER = re.compile(r"^ {0,3}<!--\s*runnable\s*(?::\s*(?P<flags>[^>]*?))?\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")


@dataclasses.dataclass(frozen=True)
class Snippet:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str  # "bash" or "python"
    code: str
    flags: frozenset

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def _blocks(lines: list[str]):
    """(start index of the opening fence, info string, body lines) of every fenced block."""
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group("fence"), i
        body = []
        i += 1
        while i < len(lines):
            close = FENCE.match(lines[i])
            if close and close.group("fence")[0] == fence[0] and len(close.group("fence")) >= len(fence) \
                    and not close.group("info").strip():
                break
            body.append(lines[i])
            i += 1
        yield start, m.group("info").strip(), body
        i += 1


def parse(page: Path) -> tuple[list[Snippet], list[str]]:
    """The marked snippets of a page, and what is wrong with its markers."""
    lines = page.read_text(encoding="utf-8").splitlines()
    rel = page.relative_to(REPO)
    blocks = {start: (info, body) for start, info, body in _blocks(lines)}
    inside = set()
    for start, (_, body) in blocks.items():
        inside.update(range(start, start + len(body) + 2))
    snippets, problems = [], []
    for i, text in enumerate(lines):
        m = MARKER.match(text)
        if not m or i in inside:
            continue
        flags = frozenset(f.strip() for f in (m.group("flags") or "").split(",") if f.strip())
        if flags - FLAGS:
            problems.append(f"{rel}:{i + 1}: unknown flag(s) {sorted(flags - FLAGS)} (known: {sorted(FLAGS)})")
        if i + 1 not in blocks:
            problems.append(f"{rel}:{i + 1}: a runnable marker must be followed directly by a code fence")
            continue
        info, body = blocks[i + 1]
        lang = LANGS.get(info.split()[0].lower() if info else "")
        if lang is None:
            problems.append(f"{rel}:{i + 2}: a runnable snippet must be sh, bash or python, not {info!r}")
            continue
        if not "".join(body).strip():
            problems.append(f"{rel}:{i + 2}: an empty runnable snippet")
            continue
        snippets.append(Snippet(page, i + 2, lang, "\n".join(body) + "\n", flags))
    return snippets, problems


def all_snippets() -> list[Snippet]:
    return [s for page in PAGES for s in parse(page)[0]]


SNIPPETS = all_snippets()


def test_pages_exist():
    assert (REPO / "README.md").is_file()
    assert len(PAGES) > 5, f"docs/ has too few pages: {[str(p) for p in PAGES]}"


def test_markers_are_well_formed():
    problems = [p for page in PAGES for p in parse(page)[1]]
    assert not problems, "\n".join(problems)


def test_enough_snippets_are_marked():
    # A test over zero snippets passes silently; this one does not.
    assert len(SNIPPETS) >= MIN_SNIPPETS, f"only {len(SNIPPETS)} runnable snippets marked (want >= {MIN_SNIPPETS})"
    assert any(s.page.name == "README.md" and s.page.parent == REPO for s in SNIPPETS), "README.md marks none"
    assert {s.lang for s in SNIPPETS} == {"bash", "python"}, "want both shell and python snippets marked"


def test_readme_starts_with_the_two_commands():
    # The fresh-machine commands come first (CI runs the second; scripts refer to both).
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    first = next(_blocks(lines))
    assert first[1] == "sh"
    assert [ln.split()[0] for ln in first[2]] == ["scripts/demo", "scripts/test"], first[2]


_BIN = tempfile.mkdtemp(prefix="snippet-bin-")
os.symlink(sys.executable, os.path.join(_BIN, "python3"))
atexit.register(shutil.rmtree, _BIN, True)


def _env() -> dict:
    """The checkout's package first; the shell snippets' `python3` is the interpreter that
    runs these tests (Debian's, in scripts/test), not whatever comes first on PATH (a
    pyenv shim on some machines, without Debian's python3-* packages)."""
    path = os.environ.get("PYTHONPATH")
    py = str(REPO / "python")
    return dict(os.environ, PYTHONPATH=py + (os.pathsep + path if path else ""),
                PATH=_BIN + os.pathsep + os.environ.get("PATH", ""))


def _core_loads() -> bool:
    from rvv_inductor import _native

    try:
        _native.lib()
        return True
    except _native.NativeLibraryError:
        return False


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.id for s in SNIPPETS])
def test_snippet_runs(snippet: Snippet):
    if platform.machine() != "x86_64":
        pytest.skip("documentation snippets run on the x86_64 host tier")
    if "needs-core" in snippet.flags and not _core_loads():
        pytest.skip("no loadable C++ core (build/host) for a needs-core snippet")
    if snippet.lang == "bash":
        argv = ["bash", "-e", "-o", "pipefail", "-c", snippet.code]
    else:
        argv = [sys.executable, "-c", snippet.code]
    try:
        r = subprocess.run(argv, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{snippet.id}: still running after {TIMEOUT_S} s; a runnable snippet must be cheap:\n"
                    f"{snippet.code}")
    assert r.returncode == 0, (f"{snippet.id} ({snippet.lang}) exited {r.returncode}:\n{snippet.code}\n"
                               f"--- stdout (tail)\n{r.stdout[-2000:]}\n--- stderr (tail)\n{r.stderr[-2000:]}")


# ---- links -----------------------------------------------------------------------------

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?(?P<target>[^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(?P<target>\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
CODE_SPAN = re.compile(r"(`+).+?\1")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(?P<text>.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose_lines(page: Path) -> list[tuple[int, str]]:
    """(1-based line number, text) of every line outside fenced code blocks."""
    lines = page.read_text(encoding="utf-8").splitlines()
    inside = set()
    for start, _, body in _blocks(lines):
        inside.update(range(start, start + len(body) + 2))
    return [(i + 1, t) for i, t in enumerate(lines) if i not in inside]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: inline markup dropped, lower case, punctuation other
    than '-' and '_' removed, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.replace("`", "").lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LN" or cat in ("Mn", "Mc", "Me", "Pc"):
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, text in _prose_lines(page):
        m = HEADING.match(text)
        if not m:
            continue
        base = slug(m.group("text"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[tuple[int, str]]:
    out = []
    for n, text in _prose_lines(page):
        if REF_DEF.match(text):
            out.append((n, REF_DEF.match(text).group("target")))
            continue
        for m in LINK.finditer(CODE_SPAN.sub("", text)):
            out.append((n, m.group("target")))
    return out


def _shown(p: Path) -> Path:
    return p.relative_to(REPO) if p.is_relative_to(REPO) else p


def link_problems(page: Path, root: Path = REPO) -> list[str]:
    """Every relative link of ``page`` whose file, or whose heading in a .md file, is missing."""
    problems = []
    for n, target in links(page):
        if SCHEME.match(target):
            continue  # http(s), mailto: not checked here (no network)
        path, _, frag = target.partition("#")
        if not path:
            dest = page
        else:
            dest = Path(os.path.normpath((root / path.lstrip("/")) if path.startswith("/") else (page.parent / path)))
            if not dest.exists():
                problems.append(f"{_shown(page)}:{n}: link to {target!r}: {_shown(dest)} does not exist")
                continue
        if frag and dest.suffix == ".md" and dest.is_file() and frag not in anchors(dest):
            problems.append(f"{_shown(page)}:{n}: link to {target!r}: no heading with anchor #{frag} in {_shown(dest)}")
    return problems


def test_slug_matches_github():
    assert slug("Quantized weights: `weights=\"int8\"` / `\"int4\"`") == "quantized-weights-weightsint8--int4"
    assert slug("INT8 activations for M ≥ 2 (`gemm_x8`, `quant_x8.h`)") == "int8-activations-for-m--2-gemm_x8-quant_x8h"
    assert slug("The demo's estimate: three columns") == "the-demos-estimate-three-columns"
    assert slug("At Qwen2.5-1.5B dimensions") == "at-qwen25-15b-dimensions"


def test_link_checker_finds_broken_links(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "other.md").write_text("# Other page\n## A `code` heading\n## A `code` heading\n")
    page = tmp_path / "docs" / "probe.md"
    page.write_text("# Probe\n[ok](#probe) [ok](../other.md#a-code-heading-1) [ok](/other.md)\n"
                    "[bad](no/such/file.md) [bad anchor](#nope) [bad anchor](../other.md#b)\n"
                    "`[not a link](x)` <!-- runnable -->\n```sh\n[in code](nowhere)\n```\n")
    problems = link_problems(page, root=tmp_path)
    assert len(problems) == 3, problems
    assert "no/such/file.md" in problems[0] and "#nope" in problems[1] and "#b" in problems[2]


def test_marker_checks_catch_mistakes(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    page = tmp_path / "p.md"
    page.write_text("<!-- runnable -->\ntext\n<!-- runnable: fast -->\n```sh\ntrue\n```\n"
                    "<!-- runnable -->\n```text\nx\n```\n<!-- runnable -->\n```python\nprint(1)\n```\n"
                    "    <!-- runnable -->\n```sh\n<!-- runnable -->\n```\n")
    snippets, problems = parse(page)
    assert [(s.line, s.lang) for s in snippets] == [(4, "bash"), (12, "python")]
    assert len(problems) == 3, problems  # no fence; unknown flag; not a shell/python fence


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_relative_links_resolve(page: Path):
    assert links(page), f"{page.relative_to(REPO)} has no links at all"
    problems = link_problems(page)
    assert not problems, "\n".join(problems)


def test_every_docs_page_is_in_the_index():
    index = REPO / "docs" / "README.md"
    linked = {os.path.normpath(index.parent / t.partition("#")[0]) for _, t in links(index) if not SCHEME.match(t)}
    missing = [p.name for p in PAGES[1:] if p != index and os.path.normpath(p) not in linked]
    assert not missing, f"docs pages not linked from docs/README.md: {missing}"
