"""Per-step counting inside ``python3 -m rvv_inductor serve`` for bench/serve_bench.py
``--workload mixed`` (a benchmark hook, not part of the package).

Python imports ``sitecustomize`` at start-up from the first directory on its path that has
one; the benchmark puts this directory first on the server's PYTHONPATH, with
``RVV_STEP_LOG=FILE``. Without that variable this module does nothing.

When transformers' continuous-batching module is imported, its batch processor is wrapped:
- every scheduling step that has work (``prepare_next_batch`` returned True, then the
  forward and ``update_batch``) runs inside its own rvvcount region, ids 17, 18, ... (1..16
  are the control thread's level windows; the plugin takes 1..2047). The region opens
  before ``prepare_next_batch`` and is closed right after it when there is nothing to do
  (the id is then reused), so a step's count includes its scheduling. The plugin charges
  every thread's work while a region is open (HTTP, tokenizer, model).
- each counted step appends one JSON line to FILE: its region id, the level label the
  benchmark put in FILE.level, and per request in the batch: id, query tokens, tokens
  already in its cache, whether the step gave it a token;
- ``add_request`` appends an arrival line (request id, prompt tokens, the step count so far).
Counting is on while FILE.level exists; the markers come from ``rvv_serve_mark`` in the
LD_PRELOADed bench/serve_region.c (one thread opens and closes each region, as the plugin
wants: the generation loop's thread)."""
import importlib.abc
import importlib.util
import json
import os
import sys

_LOG = os.environ.pop("RVV_STEP_LOG", None)
_TARGET = "transformers.generation.continuous_batching.continuous_api"
FIRST_ID, LAST_ID = 17, 2047


class _State:
    next_id = FIRST_ID
    open_id = 0
    steps = 0
    out = None
    mark = None


def _level():
    try:
        with open(_LOG + ".level") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _write(obj):
    _State.out.write(json.dumps(obj, separators=(",", ":")) + "\n")
    _State.out.flush()


def _patch(mod):
    import ctypes

    _State.mark = ctypes.CDLL(None).rvv_serve_mark
    _State.mark.argtypes = (ctypes.c_int, ctypes.c_int)
    _State.out = open(_LOG, "a", buffering=1)
    proc = mod.ContinuousBatchProcessor
    prepare, update = proc.prepare_next_batch, proc.update_batch
    add = mod.ContinuousBatchingManager.add_request

    def prepare_next_batch(self):
        lvl = _level()
        if lvl is None or _State.next_id > LAST_ID:
            return prepare(self)
        _State.open_id = _State.next_id
        _State.mark(_State.open_id, 1)
        ok = False
        try:
            ok = prepare(self)
        finally:
            if not ok:  # nothing to do (or an error): the region closes empty, its id is reused
                _State.mark(_State.open_id, 0)
                _State.open_id = 0
        return ok

    def update_batch(self):
        batch = [(f.state.request_id, f.query_length, f.state.position_offset - f.query_length, bool(f.has_new_token))
                 for f in self.inputs_and_outputs.requests_in_batch] if _State.open_id else None
        try:
            return update(self)
        finally:
            if _State.open_id:
                rid = _State.open_id
                _State.mark(rid, 0)
                _State.open_id = 0
                _State.next_id += 1
                _State.steps += 1
                _write({"step": rid, "level": _level(), "batch": batch})

    def add_request(self, input_ids, *a, **k):
        rid = add(self, input_ids, *a, **k)
        lvl = _level()
        if lvl is not None:
            _write({"arrival": rid, "level": lvl, "prompt": len(input_ids), "after_steps": _State.steps,
                    "max_new_tokens": k.get("max_new_tokens")})
        return rid

    proc.prepare_next_batch = prepare_next_batch
    proc.update_batch = update_batch
    mod.ContinuousBatchingManager.add_request = add_request


class _Finder(importlib.abc.MetaPathFinder):
    """Patches the module right after it executes (once)."""

    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        loader.exec_module = exec_module
        return spec


if _LOG:
    sys.meta_path.insert(0, _Finder())
