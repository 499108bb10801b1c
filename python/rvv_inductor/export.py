"""``python3 -m rvv_inductor export``: an AOTInductor package (``.pt2``) of a decoder's
decode and prefill steps, with every gated projection on the RVV micro-GEMMs, for
``rvv-generate`` (tools/rvv_generate), which runs it from C++ with no Python in the process.

What goes into the package:

* the AOTI model ``"decode"``: ``logits = step(input_ids [1, 1], cache_position [1])`` over
  a static KV cache of ``max_cache_len`` positions (batch 1). The cache lives inside the
  model as mutated buffers, so it persists from call to call in the loaded model. Its
  shared library holds the constants (weights, packed or quantized, and the cache).
* the AOTI model ``"prefill"`` (unless ``prefill_chunk`` is 0): the same step over a chunk
  of ``prefill_chunk`` prompt tokens (default ``policy.prefill_chunk``: from the K1 model,
  the smallest chunk whose GEMMs hide the weights' DRAM time), logits of one row only: a
  third input names it, so a prompt shorter than a chunk is one call with padding after
  it (the cache entries the padding writes lie past the prompt and are overwritten by the
  decode steps before any step reads them). Its shared
  library holds no constants: ``rvv-generate`` binds it to the decode model's tensors (the
  weights *and* the KV cache, by constant name, no copy), so what prefill writes into the
  cache is what decode reads. The export checks that the two compiles produced the same
  constants, name by name and byte by byte.
* ``extra/rvv_inductor.json``: what the runner checks before it loads anything (format
  version, the ISA the kernels were built for: ``march``, VLEN, and the model's limits).

How it compiles: ``torch.export`` (non-strict) of :class:`DecodeStep`, then
``torch._inductor.aot_compile`` under ``rvv_inductor.enable(weights=..., gate=...)`` with
``freezing=True``, so the frozen weights are prepacked (or quantized, INT8/INT4) and each
projection the gate admits becomes one of our RVV kernels. The files are packaged with
``torch.export.pt2_archive._package.package_pt2``.

Why not two ordinary AOTI models: each AOTI model in a package owns its constants, so a
prefill model would load its own copy of the weights *and of the KV cache* (mutated buffers
are per model), and could not hand its cache to the decode model. AOTI's runner can instead
be built on caller-owned constants (``AOTIModelContainerRunnerCpu(so, 1, constants)``), which
is what rvv-generate does with the decode model's.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import json
import os
import re
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from . import cpu, reasons, verify
from .inductor import kernel_marker
from .integration import enable
from .policy import ACTIVATIONS, PREFILL_CHUNK_MIN, WEIGHT_FORMATS, Gate, prefill_chunk_for, resolve_activations
from .policy import prefill_chunk as chunk_for

# This module imports without torch (`export --help`, and the host's tests of its package
# helpers): torch, transformers and the modules that load them are imported by the
# functions that use them, each saying so ("lazy").

FORMAT = "rvv-inductor-aoti/1"
MODEL_NAME = "decode"
PREFILL_NAME = "prefill"  # bound to the decode model's constants by rvv-generate
DEFAULT_PREFILL_CHUNK = None  # policy.prefill_chunk(weights, activations): 16-64 from the K1 model
# --weights for a GGUF source: every layer in the file's own format, packed from its blocks
# (the default for a .gguf source; a save_pretrained directory has no file formats).
FILE_WEIGHTS = "file"
META_FILE = "rvv_inductor.json"  # stored as extra/rvv_inductor.json in the archive
ROUTING_FILE = "routing.jsonl"    # extra/routing.jsonl: the compile's routing decisions
# ATen GEMMs in AOTInductor's C++ wrapper (the Python wrapper's extern_kernels.mm(...)).
AOTI_EXTERN_CALL = r"\baoti_torch_cpu_(mm|addmm|bmm|baddbmm)_out\(|\bat::(mm|addmm|bmm|baddbmm)_out\("

# The export gate: every projection of Qwen2.5-0.5B/1.5B (GQA k/v included) is >= 128 wide;
# unlike a whole-graph torch.compile, a package compiles each shape once, offline.
DEFAULT_GATE = "min_mnk=0,min_n=128,min_k=128"


class ExportError(Exception):
    """A bad source or option (the CLI prints it on one line and exits 2)."""


def _torch():
    import torch  # lazy: torch; this module must import without it

    return torch


def load_model(src: str, keep_file_formats: bool = False):
    """A BF16 causal LM from a save_pretrained directory or a GGUF file.

    A GGUF file's quantized Linears (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) become BF16
    Linears holding their exact dequantized weights: what the export traces, and what
    ATen runs for a layer the gate leaves out. With ``keep_file_formats`` the result is
    ``(model, file_weights)``, ``file_weights`` mapping each such weight's storage
    to the bytes ``load_gguf`` packed from the file's blocks (quant_lowering.FileWeight),
    so the package keeps every layer in the file's format; without, the export quantizes
    the BF16 weights again to ``--weights``."""
    torch = _torch()
    if not os.path.exists(src):
        raise ExportError(f"{src}: no such file or directory")
    if os.path.isdir(src):
        import transformers  # lazy: transformers; this module must import without it

        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16)
        except Exception as e:  # noqa: BLE001
            raise ExportError(f"{src}: cannot load a causal LM: {type(e).__name__}: {e}") from None
        return model.eval()
    if src.endswith(".gguf"):
        # lazy: torch; this module must import without it
        from .gguf_load import load_gguf
        from .regional import RVVQuantLinear

        from .inductor.quant_lowering import FileWeight  # lazy: Inductor; this module must import without torch

        model = load_gguf(src)
        file_weights = {}
        for name, mod in list(model.named_modules()):
            for cname, child in list(mod.named_children()):
                if isinstance(child, RVVQuantLinear):
                    lin = torch.nn.Linear(child.in_features, child.out_features, bias=child.bias is not None,
                                          dtype=torch.bfloat16)
                    with torch.no_grad():
                        lin.weight.copy_(child.dequantized().to(torch.bfloat16))
                        if child.bias is not None:
                            lin.bias.copy_(child.bias)
                    if keep_file_formats:
                        file_weights[lin.weight.data_ptr()] = FileWeight(child.format, child._layout,
                                                                         child.packed_weight)
                    setattr(mod, cname, lin)
        emb = model.get_input_embeddings()
        if not isinstance(emb, torch.nn.Embedding) or emb.weight.is_meta:
            # A tied embedding served from the packed lm_head: a plain table again.
            model.set_input_embeddings(torch.nn.Embedding.from_pretrained(
                model.lm_head.weight.detach().clone(), freeze=True))
        model = model.to(torch.bfloat16).eval()
        if keep_file_formats:
            # .to() kept every BF16 storage (the keys); a copy would silently re-quantize.
            live = {p.data_ptr() for p in model.parameters()}
            if not set(file_weights) <= live:
                raise ExportError(f"{src}: internal: a quantized layer's BF16 stand-in was copied")
            return model, file_weights
        return model
    raise ExportError(f"{src}: neither a model directory (save_pretrained) nor a .gguf file")


def decode_step(model, max_cache_len: int):
    """The exportable step: ``forward(input_ids [1, T], cache_position [T]) -> logits [1, 1, V]``
    (float32, the last position's: a prefill chunk needs no other), with a static KV cache
    held as module buffers.

    transformers' ``TorchExportableModuleWithStaticCache`` registers the cache tensors as
    buffers too, but its layers keep pointing at the original tensors, which non-strict
    ``torch.export`` then lifts as constants and Inductor refuses to mutate ("mutating a
    non-functional tensor with a functional tensor"). Here the layers are re-pointed at the
    module's buffers on every call, so the export sees buffer mutations."""
    torch = _torch()
    from transformers.cache_utils import StaticCache  # lazy: transformers; this module must import without it

    class DecodeStep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            config = model.config.get_text_config()
            self.cache = StaticCache(config=config, max_cache_len=max_cache_len)
            # lazy: transformers; this module must import without it
            from transformers.integrations.executorch import get_head_shapes

            heads, head_dim = get_head_shapes(config)
            self.cache.early_initialization(1, heads, head_dim, model.dtype, torch.device("cpu"))
            self.n_layers = len(self.cache.layers)
            for i, layer in enumerate(self.cache.layers):
                self.register_buffer(f"key_cache_{i}", layer.keys, persistent=False)
                self.register_buffer(f"value_cache_{i}", layer.values, persistent=False)
                self.register_buffer(f"cumulative_length_{i}", layer.cumulative_length, persistent=False)

        def forward(self, input_ids, cache_position, last=None):
            """``last`` (prefill: an int64 [1] row index): the row whose logits to return;
            None (decode): the last one."""
            for i, layer in enumerate(self.cache.layers):
                layer.keys = getattr(self, f"key_cache_{i}")
                layer.values = getattr(self, f"value_cache_{i}")
                layer.cumulative_length = getattr(self, f"cumulative_length_{i}")
                layer.cumulative_length.copy_(cache_position[0:1])
            out = self.model(input_ids=input_ids, attention_mask=None, past_key_values=self.cache,
                             cache_position=cache_position, use_cache=True,
                             logits_to_keep=1 if last is None else last)
            return out.logits.float()

    return DecodeStep().eval()


def _resolved_activations(weights: str, activations: str, formats=()) -> str:
    """What the package's prefill GEMMs do with X: "int8" or "bf16"; for a file's formats
    (weights "file") the one answer of all of them, else "mixed"."""
    if activations not in ACTIVATIONS:
        return "bf16"
    if weights == FILE_WEIGHTS:
        got = {resolve_activations(f, activations) for f in formats}
        return got.pop() if len(got) == 1 else "mixed" if got else "bf16"
    if weights == "bf16":
        return "bf16"
    return resolve_activations(weights, activations)


def _file_prefill_chunk(file_weights, activations: str) -> int:
    """The prefill chunk for a file's packed weights (quant_lowering.FileWeight): the largest
    of theirs (policy.prefill_chunk_for: bytes per weight as packed, the INT8 datapath for
    4-bit weights with INT8 activations), so that every GEMM of a call hides its weights'
    DRAM time."""
    from . import quantized  # lazy: the C++ core (format traits); this module must import without it

    chunks = [PREFILL_CHUNK_MIN]
    for fw in file_weights:
        x8 = resolve_activations(fw.fmt, activations) == "int8"
        bits = quantized.format_info(fw.fmt)["bits"]
        chunks.append(prefill_chunk_for(fw.layout.bytes / (fw.layout.n * fw.layout.k), 8 if bits <= 4 and x8 else 4))
    return max(chunks)


def target_isa() -> dict:
    """The ISA the generated kernels are compiled for (what the runner must find)."""
    info = cpu.effective()
    return {"march": info.march, "has_v": bool(info.has_v), "vlen": int(info.vlen),
            "zvfh": bool(info.has_zvfh), "zvfbfmin": bool(info.has_zvfbfmin), "zvfbfwma": bool(info.has_zvfbfwma)}


def export(model, out: str, *, weights: str = "bf16", group_size: int | None = None, max_cache_len: int = 256,
           prefill_chunk: int | None = DEFAULT_PREFILL_CHUNK, gate=None, keep_bf16=None, threads: int | None = None,
           attention: str = "rvv", activations: str = "auto", file_weights: dict | None = None) -> dict:
    """Export ``model``'s decode step (and, unless ``prefill_chunk`` is 0, its prefill step
    over chunks of that many tokens) to the package ``out``; return its metadata.
    ``activations``: how the INT8/INT4 GEMMs of the prefill step treat X ("auto", "int8" or
    "bf16", as in ``compile_linears``). ``weights="file"``: the layers named by
    ``file_weights`` (``load_model(FILE.gguf, keep_file_formats=True)``) keep the file's
    formats and bytes; the others stay BF16."""
    torch = _torch()
    from torch.export.pt2_archive._package import package_pt2  # lazy: torch; this module must import without it

    from .inductor import quant_lowering  # lazy: Inductor; this module must import without torch

    if not str(out).endswith(".pt2"):
        raise ExportError(f"{out}: the package name must end in .pt2")
    if (weights == FILE_WEIGHTS) != bool(file_weights):
        raise ExportError("weights='file' needs the file's packed weights (a .gguf source), and they need "
                          f"weights='file' (got weights={weights!r}, {len(file_weights or {})} file weights)")
    if weights == FILE_WEIGHTS and group_size is not None:
        raise ExportError("--group-size does not apply to --weights file: each layer keeps its file format's groups")
    formats = collections.Counter(fw.fmt for fw in (file_weights or {}).values())
    config = model.config.get_text_config()
    if prefill_chunk is None:
        if weights == FILE_WEIGHTS and activations in ACTIVATIONS:
            prefill_chunk = min(_file_prefill_chunk(file_weights.values(), activations), max_cache_len)
        elif weights in WEIGHT_FORMATS and activations in ACTIVATIONS:
            prefill_chunk = min(chunk_for(weights, activations), max_cache_len)
        else:
            prefill_chunk = 16  # enable() below names the bad value
    if max_cache_len < 2 or prefill_chunk < 0 or prefill_chunk > max_cache_len:
        raise ExportError(f"bad sizes: max_cache_len={max_cache_len}, prefill_chunk={prefill_chunk} "
                          "(0 <= prefill_chunk <= max_cache_len)")
    if prefill_chunk == 1:
        raise ExportError("prefill_chunk=1 is the decode step itself: give 0 (no prefill model) or >= 2")
    isa = target_isa()
    if not isa["has_v"]:
        raise ExportError("this CPU has no V extension: a package would hold no RVV kernels")
    if gate is None:
        gate = _parse_gate(DEFAULT_GATE)
    if attention not in ("rvv", "sdpa"):
        raise ExportError(f"attention={attention!r}: choose 'rvv' (our decode kernel) or 'sdpa' (ATen's)")
    step = decode_step(model, max_cache_len)
    steps = {MODEL_NAME: 1, **({PREFILL_NAME: prefill_chunk} if prefill_chunk else {})}
    t0 = time.time()
    from . import attention as rvv_attention  # lazy: torch; this module must import without it

    programs = {}
    with torch.no_grad(), (rvv_attention.use_in(model) if attention == "rvv" else contextlib.nullcontext()):
        for name, T in steps.items():
            ids = torch.zeros(1, T, dtype=torch.long)
            args = (ids, torch.arange(T, dtype=torch.long))
            if name == PREFILL_NAME:
                args += (torch.tensor([T - 1], dtype=torch.long),)
            programs[name] = torch.export.export(step, args, strict=False)
    t_export = time.time() - t0

    eos = model.generation_config.eos_token_id if model.generation_config is not None else None
    eos = [eos] if isinstance(eos, int) else list(eos or [])
    meta = {"format": FORMAT, "model": MODEL_NAME, "model_type": config.model_type,
            "vocab_size": int(config.vocab_size), "num_layers": int(config.num_hidden_layers),
            "max_cache_len": int(max_cache_len), "prefill_chunk": int(prefill_chunk), "weights": weights,
            "group_size": group_size, "activations": _resolved_activations(weights, activations, formats),
            "file_formats": dict(sorted(formats.items())),
            "eos_token_ids": eos, "attention": attention, **{f"isa_{k}": v for k, v in isa.items()},
            "gate": {"min_mnk": gate.min_mnk, "max_m": gate.max_m, "min_n": gate.min_n, "min_k": gate.min_k},
            "threads_at_compile": None}

    # weights="file": the spec stays BF16 (nothing is quantized); the file's layers come
    # from quant_lowering.file_weights below, with the spec's activations.
    enable(gate=gate, weights="bf16" if weights == FILE_WEIGHTS else weights, group_size=group_size,
           keep_bf16=keep_bf16, activations=activations)
    opts = {"aot_inductor.package": True, "freezing": True,
            # No precompiled header, so the generated code gets our vector exp (SiLU, softmax
            # outside the attention kernel): GCC 16 crashes on RVV intrinsics over a PCH that
            # declared them (vec_isa.build_arch_flags). One compile, so the PCH saves little.
            "cpp_cache_precompile_headers": False, "aot_inductor.precompile_headers": False,
            # What rvv-generate checks before it loads the model's code (read from the archive).
            "aot_inductor.metadata": {"rvv_format": FORMAT, "rvv_march": isa["march"], "rvv_vlen": str(isa["vlen"]),
                                      "rvv_max_cache_len": str(max_cache_len), "rvv_vocab_size": str(config.vocab_size),
                                      "rvv_prefill_chunk": str(prefill_chunk), "rvv_prefill_pads": "1",
                                      "rvv_eos_token_ids": ",".join(map(str, eos)),
                                      "rvv_weights": weights if weights != FILE_WEIGHTS else
                                      "file:" + "+".join(sorted(formats))}}
    if threads:
        opts["cpp.threads"] = int(threads)
    meta["threads_at_compile"] = int(threads) if threads else torch.get_num_threads()
    log = _routing_log()
    start = log.stat().st_size if log.is_file() else 0
    files, constants = {}, {}
    t0 = time.time()
    with torch.no_grad():
        for name, ep in programs.items():
            # The prefill model's library carries no constants: it runs on the decode model's.
            model_opts = dict(opts, **{"aot_inductor.package_constants_in_so": name == MODEL_NAME})
            with _recording_constants() as graphs, _serial_thread_pools(), \
                    quant_lowering.file_weights(file_weights or {}):
                files[name] = torch._inductor.aot_compile(ep.module(check_guards=False), *ep.example_inputs,
                                                          options=model_opts)
            if not graphs:
                raise ExportError(f"the {name} compile produced no AOT graph (Inductor changed?)")
            constants[name] = graphs[-1]
    meta["compile_s"] = round(time.time() - t0, 1)
    meta["export_s"] = round(t_export, 1)
    if PREFILL_NAME in constants:
        problems = shared_constant_problems(constants[MODEL_NAME], constants[PREFILL_NAME])
        if problems:
            raise ExportError("the prefill model cannot run on the decode model's constants: "
                              + "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
                              + "; export with --prefill-chunk 0")
    meta["constants"] = {name: len(c) for name, c in constants.items()}
    del constants
    # This compile's routing decisions travel with the package, so `verify PKG.pt2` can
    # judge them. The log of the Inductor cache also holds other compiles', among them
    # those of other processes sharing the cache while this one compiled: keep this
    # process's lines only (the lowerings run in it; each entry names its pid).
    routing = ""
    if log.is_file():
        with open(log, "rb") as f:
            f.seek(start)
            routing = own_routing(f.read().decode(errors="replace"), os.getpid())
    meta["routing_entries"] = sum(1 for line in routing.splitlines() if line.strip())
    package_pt2(out, aoti_files=files, extra_files={META_FILE: json.dumps(meta, indent=1), ROUTING_FILE: routing})
    return meta


@contextlib.contextmanager
def _recording_constants():
    """Within: each AOT graph Inductor generates appends its constants to the yielded list,
    as ``{name: (original FQN, initial value)}`` (what the wrapper's ``constants_info_``
    says and its library holds), and no two constants share an original FQN.

    Why the second part: a loaded AOTI model hands out its constants only by original FQN
    (``extract_constants_map``), and rvv-generate needs all of the decode model's to bind
    the prefill model to them. Inductor names the constants it creates (packed weights)
    ``constant{len(constants)}``; when that name is taken it stores the new one as
    ``constantN_0`` but keeps ``constantN`` as its original name, so two constants would
    share one FQN. Such a constant gets its own name as its FQN instead."""
    from torch._inductor.graph import GraphLowering  # lazy: Inductor; this module must import without torch

    alloc, codegen = GraphLowering.allocate_non_dup_const_name, GraphLowering.codegen_with_cpp_wrapper
    graphs: list[dict] = []

    def allocate(self, name, data):
        new = alloc(self, name, data)
        fqn = self.allocated_constant_name.get(new)
        if fqn is not None and fqn != new and any(
                v == fqn for k, v in self.allocated_constant_name.items() if k != new):
            self.allocated_constant_name[new] = new
        return new

    def generate(self, *args, **kwargs):
        result = codegen(self, *args, **kwargs)
        if self.aot_mode:
            graphs.append({name: (_original_fqn(self, name), self.get_original_value_of_constant(name))
                           for name in self.constants if name not in self.folded_constants})
        return result

    GraphLowering.allocate_non_dup_const_name, GraphLowering.codegen_with_cpp_wrapper = allocate, generate
    try:
        yield graphs
    finally:
        GraphLowering.allocate_non_dup_const_name, GraphLowering.codegen_with_cpp_wrapper = alloc, codegen


class _SerialExecutor:
    """``concurrent.futures.ThreadPoolExecutor``'s ``map`` and context manager, run in the
    calling thread."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, fn, *iterables, **kwargs):
        return list(map(fn, *iterables))

    def shutdown(self, *args, **kwargs):
        pass


@contextlib.contextmanager
def _serial_thread_pools():
    """Within: ``concurrent.futures.ThreadPoolExecutor`` runs its work in the caller.

    Why: AOTI copies the constants into its blob on a thread pool and forks the compiler
    the moment the pool is joined, while the pool's threads may still be exiting. Twice
    under QEMU 7.2 user mode (test_export) that fork left a child deadlocked before its
    exec, and the compile's subprocess.run waited for it forever; a fork racing with
    exiting threads is the suspected cause (not proven: the hang is rare). Without the
    pool nothing is exiting at the fork. Serially the copy is one memmove per constant."""
    real = concurrent.futures.ThreadPoolExecutor
    concurrent.futures.ThreadPoolExecutor = _SerialExecutor
    try:
        yield
    finally:
        concurrent.futures.ThreadPoolExecutor = real


def _original_fqn(graph, name: str) -> str:
    # As AOTI's C++ wrapper writes constants_info_[i].original_fqn (cpp_wrapper_cpu.py).
    if name in graph.dynamo_flat_name_to_original_fqn:
        return graph.dynamo_flat_name_to_original_fqn.get(name, name)
    return graph.allocated_constant_name[name]


def shared_constant_problems(decode: dict, prefill: dict) -> list[str]:
    """Why the prefill model could not run on the decode model's constants (each given as
    ``{name: (fqn, tensor)}``), or [] when it can: every prefill constant must be a decode
    constant of the same name, original FQN, dtype, shape, strides and bytes, and the decode
    model's FQNs must be unique (rvv-generate finds its tensors by FQN)."""
    torch = _torch()
    problems = []
    fqns: dict[str, str] = {}
    for name, (fqn, _) in decode.items():
        if fqn in fqns:
            problems.append(f"decode constants {fqns[fqn]} and {name} share the FQN {fqn}")
        fqns[fqn] = name
    for name, (fqn, t) in prefill.items():
        if name not in decode:
            problems.append(f"{name} ({fqn}) is not a decode constant")
            continue
        dfqn, d = decode[name]
        what = (f"FQN {dfqn} vs {fqn}" if dfqn != fqn else f"dtype {d.dtype} vs {t.dtype}" if d.dtype != t.dtype
                else f"shape {tuple(d.shape)} vs {tuple(t.shape)}" if d.shape != t.shape
                else f"strides {d.stride()} vs {t.stride()}" if d.stride() != t.stride() else None)
        if what is None and d.numel():
            same = torch.equal(d.contiguous().reshape(-1).view(torch.uint8), t.contiguous().reshape(-1).view(torch.uint8))
            what = None if same else "different values"
        if what:
            problems.append(f"{name}: {what}")
    return problems


def own_routing(text: str, pid: int) -> str:
    """The lines of routing-log ``text`` that process ``pid`` wrote (JSON objects naming it)."""
    out = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and entry.get("pid") == pid:
            out.append(line + "\n")
    return "".join(out)


def _routing_log():
    # lazy: Inductor; this module must import without torch
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return Path(cache_dir()) / "rvv_inductor" / reasons.LOG_NAME


def _parse_gate(text: str):
    old = os.environ.get("_RVV_EXPORT_GATE")
    os.environ["_RVV_EXPORT_GATE"] = text
    try:
        return Gate.from_env("_RVV_EXPORT_GATE", Gate(min_mnk=0, min_n=128, min_k=128))
    finally:
        if old is None:
            del os.environ["_RVV_EXPORT_GATE"]
        else:
            os.environ["_RVV_EXPORT_GATE"] = old


def read_meta(package: str) -> dict:
    """The package's extra/rvv_inductor.json."""
    with zipfile.ZipFile(package) as z:
        for name in z.namelist():
            if name.endswith("extra/" + META_FILE):
                return json.loads(z.read(name))
    raise ExportError(f"{package}: no extra/{META_FILE}: not a package made by rvv_inductor export")


def extract(package: str, dest: str) -> str:
    """Unpack the package into ``dest`` laid out like an Inductor cache directory for
    ``verify``: the generated .cpp and .so as they are, and the compile's routing log at
    ``dest/rvv_inductor/routing.jsonl``. Returns ``dest``."""
    with zipfile.ZipFile(package) as z:
        names = z.namelist()
        z.extractall(dest)
    routing = [n for n in names if n.endswith("extra/" + ROUTING_FILE)]
    os.makedirs(os.path.join(dest, "rvv_inductor"), exist_ok=True)
    with open(os.path.join(dest, "rvv_inductor", reasons.LOG_NAME), "wb") as f:
        if routing:
            with open(os.path.join(dest, routing[0]), "rb") as g:
                f.write(g.read())
    return dest


def scan_package(package: str, dest: str) -> dict:
    """``verify.scan`` of the extracted package, with the ATen GEMM calls of AOTI's C++
    wrapper (``aoti_torch_cpu_mm_out`` ...) counted in ``extern_calls``."""
    extract(package, dest)
    report = verify.scan(Path(dest))
    # AOTInductor compiles its kernels (X.kernel.cpp) and wrapper (Y.wrapper.cpp) into one
    # Y.wrapper.so; verify pairs a .so with the .cpp of the same stem. Attribute the
    # kernels' RVV micro-GEMM variants to that .so (one entry per variant) and mark the
    # kernel sources built.
    sos = []
    for so in report["shared_objects"]:
        kernels = sorted((Path(dest) / so["path"]).parent.glob("*.kernel.cpp"))
        if so["rvv_micro_gemm"] or not kernels:
            sos.append(so)
            continue
        src = "\n".join(k.read_text(errors="replace") for k in kernels)
        variants = sorted({m.group(1) for m in kernel_marker._PATTERN.finditer(src)}) or [None]
        for v in variants:
            sos.append({**so, "source": str(kernels[0].relative_to(dest)), "kernel_names": verify.KERNEL_NAME.findall(src),
                        "rvv_micro_gemm": v, "quantized": kernel_marker.parse_quant(v)})
    report["shared_objects"] = sos
    for k in report["kernels"]:
        k["built"] = k["built"] or any((Path(dest) / k["source"]).parent.glob("*.so"))
    # One read of each generated source: ATen GEMM calls anywhere; decode attention, our
    # kernel (its marker in a kernel source, attention_lowering.py) or ATen's SDPA called
    # by the wrapper (export --attention sdpa); custom ops left as extern calls (a lowering
    # that fell back), which go through AOTI's proxy executor that rvv-generate lacks.
    from .inductor import attention_lowering  # lazy: Inductor (for its MARKER); this module must import without torch

    marker = attention_lowering.MARKER.split("{")[0].strip()
    calls = collections.Counter(report["extern_calls"])
    att = {"rvv_kernels": 0, "aten_sdpa_calls": 0, "proxy_executor_calls": 0}
    for cpp in Path(dest).rglob("*.cpp"):
        text = cpp.read_text(errors="replace")
        for m in re.finditer(AOTI_EXTERN_CALL, text):
            calls[m.group(1) or m.group(2)] += 1
        if cpp.name.endswith(".kernel.cpp"):
            att["rvv_kernels"] += text.count(marker)
        elif cpp.name.endswith(".wrapper.cpp"):
            att["aten_sdpa_calls"] += len(re.findall(r"aoti_torch_cpu__scaled_dot_product\w*\(", text))
            att["proxy_executor_calls"] += text.count("aoti_torch_proxy_executor_call_function(")
    report["extern_calls"] = dict(calls)
    report["attention"] = att
    report["package"] = package
    return report


def verify_main(argv: list[str]) -> int:
    """``python3 -m rvv_inductor verify PKG.pt2 [--json] [--expect-rvv MxNxK]``: verify's
    report and verdict on a package's generated code and routing decisions."""
    ap = argparse.ArgumentParser(prog="python3 -m rvv_inductor verify PKG.pt2")
    ap.add_argument("package")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--expect-rvv", type=verify._shape, action="append", default=[], metavar="MxNxK")
    a = ap.parse_args(argv)
    try:
        read_meta(a.package)
    except (OSError, ExportError) as e:
        print(f"verify: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001  (zipfile.BadZipFile, a bad JSON)
        print(f"verify: {a.package}: not a .pt2 package: {e}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="rvv-verify-") as tmp:
        report = scan_package(a.package, tmp)
        problems = verify.evaluate(report, a.expect_rvv)
        for op in ("mm", "addmm"):
            if report["extern_calls"].get(op):
                problems.append(f"the package calls ATen {op} {report['extern_calls'][op]} time(s)")
        if report["attention"]["proxy_executor_calls"]:
            problems.append(f"the package calls {report['attention']['proxy_executor_calls']} custom op(s) through "
                            "AOTI's proxy executor (a lowering fell back), which rvv-generate cannot run")
        if a.json:
            print(json.dumps({**report, "problems": problems, "ok": not problems}, indent=2))
        else:
            print(verify._table(report, problems))
            att = report["attention"]
            print(f"decode attention: {att['rvv_kernels']} RVV kernel(s) (csrc/rvv_inductor/attention.h), "
                  f"{att['aten_sdpa_calls']} ATen SDPA call(s)")
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python3 -m rvv_inductor export",
                                description="Export a decoder's decode and prefill steps (static KV cache, batch 1) "
                                            "to an AOTInductor package with RVV kernels, for rvv-generate.")
    p.add_argument("source", help="a save_pretrained model directory or a .gguf file")
    p.add_argument("--weights", choices=WEIGHT_FORMATS + (FILE_WEIGHTS,), default=None,
                   help="bf16, int8 or int4 (quantized at export); file: a .gguf's own formats, each layer packed "
                        "from its blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K; no re-quantization). Default: file "
                        "for a .gguf, bf16 for a model directory")
    p.add_argument("--group-size", type=int, default=None, help="K rows per scale (INT8: 0 = per channel; INT4: 32/64/128)")
    p.add_argument("-o", "--output", required=True, help="the package to write (*.pt2)")
    p.add_argument("--max-cache-len", type=int, default=256, help="KV cache positions (prompt + new tokens)")
    p.add_argument("--prefill-chunk", type=int, default=DEFAULT_PREFILL_CHUNK,
                   help="prompt tokens per prefill call (default: from the K1 model, 16-64 by weight format, "
                        "at most --max-cache-len); 0: no prefill model, rvv-generate runs the prompt through "
                        "the decode step one token at a time")
    p.add_argument("--gate", default=DEFAULT_GATE, help=f"which GEMMs go to RVV (default {DEFAULT_GATE})")
    p.add_argument("--threads", type=int, default=None, help="OpenMP threads the kernels are compiled for")
    p.add_argument("--keep-lm-head-bf16", action="store_true", help="leave lm_head in BF16 with --weights int8/int4/file")
    p.add_argument("--attention", choices=("rvv", "sdpa"), default="rvv",
                   help="decode attention: rvv (csrc/rvv_inductor/attention.h, default) or sdpa (ATen's)")
    p.add_argument("--activations", choices=("auto", "int8", "bf16"), default="auto",
                   help="INT8/INT4 GEMMs of the prefill: quantize X to INT8 per 32 values (int8) or the FP path "
                        "(bf16); auto (default): int8 for INT4 weights, bf16 for INT8")
    a = p.parse_args(argv)
    try:
        gate = _parse_gate(a.gate)
        is_gguf = str(a.source).endswith(".gguf")
        weights = a.weights or (FILE_WEIGHTS if is_gguf else "bf16")
        if weights == FILE_WEIGHTS and not is_gguf:
            raise ExportError(f"--weights file needs a .gguf source ({a.source} is not one)")
        if weights == FILE_WEIGHTS and a.group_size is not None:
            raise ExportError("--group-size does not apply to --weights file: each layer keeps its file format's "
                              "groups (give --weights int8/int4 to quantize again)")
        file_weights = None
        if weights == FILE_WEIGHTS:
            model, file_weights = load_model(a.source, keep_file_formats=True)
        else:
            model = load_model(a.source)
        keep = [model.lm_head] if a.keep_lm_head_bf16 and hasattr(model, "lm_head") else None
        if keep and file_weights is not None:  # the file's lm_head is not used: the BF16 path runs it
            file_weights.pop(model.lm_head.weight.data_ptr(), None)
            keep = None
        meta = export(model, a.output, weights=weights, group_size=a.group_size, max_cache_len=a.max_cache_len,
                      prefill_chunk=a.prefill_chunk, gate=gate, keep_bf16=keep, threads=a.threads, attention=a.attention,
                      activations=a.activations, file_weights=file_weights)
    except (ExportError, ValueError) as e:
        print(f"export: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"package": a.output, **meta}, indent=1))
    return 0
