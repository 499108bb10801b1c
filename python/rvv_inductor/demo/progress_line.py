"""The line a demo worker prints while one long call (an emulated compile can take minutes)
blocks its main thread: tqdm draws each stage's line (its bar when the stage names an
item "i/n", the elapsed time, the time the whole run has left: ``progress.Plan``), and a
heartbeat thread redraws it (every second on a terminal, every 30 s into a log), since
nothing calls ``update`` while the compile runs."""
from __future__ import annotations

import os
import re
import shutil
import sys
import threading
import time

from tqdm import tqdm

from .progress import fmt_duration

_FRACTION = re.compile(r"(\d+)/(\d+)")


class _Lines:
    """A log's view of tqdm's output: tqdm redraws one line in place ("\r"); into a log
    (or beside another worker on the same terminal) each redraw becomes a whole line."""

    def __init__(self, out) -> None:
        self._out = out

    def write(self, s: str) -> None:
        line = s.replace("\r", "").replace("\x1b[A", "").rstrip("\n")
        if line.strip():
            self._out.write(line + "\n")

    def flush(self) -> None:
        self._out.flush()


class _StageBar(tqdm):
    """tqdm with one more field for the line: ``run_left``, the whole run's time left."""

    def __init__(self, *args, eta=None, **kwargs) -> None:
        self._run_left = eta  # () -> str, or None
        super().__init__(*args, **kwargs)

    @property
    def format_dict(self):
        d = super().format_dict
        left = ""
        if getattr(self, "_run_left", None) is not None:
            try:
                left = f"  | {self._run_left()}"
            except (OSError, ValueError, KeyError):  # a plan file being rewritten: skip once
                pass
        d.update(run_left=left)
        return d


class Progress:
    def __init__(self, text: str, stream=None, eta=None) -> None:
        self._out = stream or sys.stderr
        self._eta = eta  # () -> str: the whole run's time left, shown after each line
        # scripts/demo's side-by-side workers share one terminal: each then prints whole lines
        self._tty = self._out.isatty() and os.environ.get("RVV_DEMO_PLAIN_PROGRESS") != "1"
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._bar = self._open(text)
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def _open(self, text: str) -> tqdm:
        """One tqdm line per stage; "workload 2/3" in the text: item 2 of 3 in progress."""
        m = _FRACTION.search(text)
        total = int(m.group(2)) if m and int(m.group(2)) > 0 else None
        fmt = ("  {bar:20} " if total else "  ") + "{desc}  {elapsed}{run_left}"
        # The width as shutil reads it (with its fallback): a pty that reports 0 columns
        # would make tqdm drop the format. In a log the line is already there when the
        # stage ends: no closing copy (leave).
        cols = shutil.get_terminal_size().columns if self._tty else 400
        return _StageBar(total=total, initial=int(m.group(1)) - 1 if total else 0, desc=text, bar_format=fmt,
                         ascii="-#", file=self._out if self._tty else _Lines(self._out), leave=self._tty,
                         ncols=cols, mininterval=0, eta=self._eta)

    def stage(self, text: str) -> None:
        with self._lock:
            self._bar.close()
            self._bar = self._open(text)

    def done(self) -> None:
        self._stop.set()
        self._thread.join()
        with self._lock:
            self._bar.close()
        self._out.write(f"  done in {fmt_duration(time.monotonic() - self._t0)} (emulated wall time)\n")
        self._out.flush()

    def _beat(self) -> None:
        period = 1.0 if self._tty else 30.0
        while not self._stop.wait(period):
            with self._lock:
                self._bar.refresh()
