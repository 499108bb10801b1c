"""Progress on stderr that shows the run is alive while one long call (an emulated
compile can take minutes) blocks the main thread: a heartbeat thread redraws the bar
with the elapsed time (every second on a terminal, every 30 s into a log)."""
from __future__ import annotations

import re
import sys
import threading
import time

_SPIN = "|/-\\"
_FRACTION = re.compile(r"(\d+)/(\d+)")


class Progress:
    def __init__(self, text: str, stream=None) -> None:
        self._out = stream or sys.stderr
        self._tty = self._out.isatty()
        self._text = text
        self._t0 = self._stage_t0 = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._n = 0
        self._draw(newline=not self._tty)
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def stage(self, text: str) -> None:
        with self._lock:
            if self._tty:
                self._out.write("\n")
            self._text, self._stage_t0 = text, time.monotonic()
        self._draw(newline=not self._tty)

    def done(self) -> None:
        self._stop.set()
        self._thread.join()
        if self._tty:
            self._out.write("\n")
        self._out.write(f"  done in {self._fmt(time.monotonic() - self._t0)} (emulated wall time)\n")
        self._out.flush()

    @staticmethod
    def _fmt(s: float) -> str:
        return f"{int(s) // 60}m{int(s) % 60:02d}s"

    def _bar(self) -> str:
        m = _FRACTION.search(self._text)
        if not m or int(m.group(2)) == 0:
            return ""
        done = (int(m.group(1)) - 1) / int(m.group(2))  # the numbered item is in progress
        w = 20
        return "[" + "#" * int(done * w) + "-" * (w - int(done * w)) + "] "

    def _draw(self, newline: bool) -> None:
        with self._lock:
            el = self._fmt(time.monotonic() - self._stage_t0)
            spin = _SPIN[self._n % 4] if self._tty else "-"
            line = f"  {spin} {self._bar()}{self._text}  {el}"
            self._out.write(("\r" + line + "\033[K") if self._tty else line + "\n")
            self._out.flush()
            self._n += 1

    def _beat(self) -> None:
        period = 1.0 if self._tty else 30.0
        while not self._stop.wait(period):
            self._draw(newline=not self._tty)
