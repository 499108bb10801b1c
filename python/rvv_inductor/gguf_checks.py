"""Checks ``load_gguf`` runs on a GGUF file before it builds anything: a damaged or
unsupported file is a ``GGUFError`` naming what is wrong, within seconds and without
allocating more than the file implies.

Two stages, because the first has to run before ``gguf.GGUFReader`` sees the file:

* ``check_layout(path)`` walks the header, the metadata and the tensor infos with bounds
  taken from the file size, and checks that every tensor's data lies inside the file.
  GGUFReader trusts an array's length: with one flipped bit in the length of a numeric
  array (``tokenizer.ggml.token_type``, say) it loops up to 2^30 times past the end of
  the file, keeping an empty view per missing element (seen with 2^28 of them: still
  looping after 60 s under QEMU, at 760 MB and growing). A tensor type gguf does not know
  would be a bare ValueError there; here it names the tensor.
* ``check_file(reader, path, supported_types)`` then checks what the reader found: every
  tensor type is in ``supported_types`` (nothing is silently dequantized), the metadata
  load_gguf uses has the right value types, and every count and dimension agrees with the
  tensors. transformers trusts these values: ``block_count`` sizes per-layer lists (a
  flipped bit once made it 4,278,190,081 and the config never finished) and
  ``head_count`` gives head_dim (65,284 heads of a 256-wide model made it 0, and the RoPE
  setup divided by it; for qwen3 ``attention.key_length`` gives it, checked against
  attn_k's rows, and q/k/v/o and the q/k norms against it). Cross-checked against the tensors, whose sizes are bounded by
  the file, every value the model is built from is bounded by the file too.

GGUF tensor shapes are in GGML order (shape[0] is the number of columns); everything
here, messages included, uses the transformers order [rows, columns].

``GGUFError`` and ``ARCHITECTURES`` live here (gguf_load imports them): this module
imports nothing of the package, so there is no import cycle, and it needs no torch.
"""
from __future__ import annotations

import math
import mmap
import os
import struct
from dataclasses import dataclass


class GGUFError(ValueError):
    """A GGUF file load_gguf cannot load; the message names the file and what is wrong."""


# The architectures whose metadata and tensors are known here (and load_gguf loads).
ARCHITECTURES = ("qwen2", "llama", "qwen3")
# Architectures whose heads may be narrower or wider than embedding_length / head_count:
# head_dim is ``<arch>.attention.key_length`` (Qwen3-0.6B: 16 heads of 128 in a width of
# 1024), and every block has per-head q/k RMSNorm weights (attn_q_norm, attn_k_norm).
HEAD_DIM_ARCHITECTURES = ("qwen3",)
# Tensor types load_gguf reads (GGMLQuantizationType names); any other is a GGUFError
# (check_file), never dequantized. The block formats after Q4_0 are the library's
# (weight_formats.inl; load_gguf packs each from its table entry): this module reads no
# library, so the list is written out, and tests/python/glue/test_native.py checks it
# against the table.
SUPPORTED_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "IQ4_XS", "Q2_K", "Q3_K",
                   "Q4_K", "Q5_K", "Q6_K")
# A block's Linear weights (GGUF names), the ones a Llama attention_bias gives biases to.
_BLOCK_LINEARS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
# Sanity bounds for values no tensor pins down.
MAX_CONTEXT = 1 << 24
ROPE_BASE_RANGE = (1.0, 1e15)   # below 1 the "frequencies" grow with the dimension


# ---------------------------------------------------------------------------------------
# Stage 1: the file's layout, before GGUFReader


# GGUFValueType numbers: the fixed-size ones (UINT8 .. FLOAT64) -> bytes; STRING, ARRAY
_SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
_MAX_DIMS = 4
_MAX_NESTING = 8


class _Cursor:
    """Reads little- or big-endian values from the mapped file; running past its end is a
    GGUFError (a truncated or corrupt file), never an IndexError or struct.error."""

    def __init__(self, buf, path: str):
        self.buf, self.path, self.pos, self.order = buf, path, 0, "<"

    def bad(self, detail: str) -> GGUFError:
        return GGUFError(f"{self.path}: not a readable GGUF file (truncated or corrupt?): {detail}")

    def left(self) -> int:
        return len(self.buf) - self.pos

    def need(self, n: int, what: str) -> None:
        if n > self.left():
            raise self.bad(f"{what} needs {n} bytes at offset {self.pos}, the file has {self.left()} left")

    def u32(self, what: str) -> int:
        self.need(4, what)
        self.pos += 4
        return struct.unpack_from(self.order + "I", self.buf, self.pos - 4)[0]

    def u64(self, what: str) -> int:
        self.need(8, what)
        self.pos += 8
        return struct.unpack_from(self.order + "Q", self.buf, self.pos - 8)[0]

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        self.pos += n

    def string(self, what: str) -> str:
        n = self.u64(what)
        self.need(n, what)
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.bad(f"{what} is not UTF-8: {raw[:64]!r}") from None


def _skip_value(c: _Cursor, vtype: int, key: str, depth: int = 0) -> int | None:
    """Steps over one metadata value; an array's length is checked against the bytes left
    before its elements are visited (each takes at least one byte). Returns a UINT32
    value (for general.alignment), else None."""
    if vtype == 4:
        return c.u32(f"the value of {key!r}")
    if vtype in _SCALAR_SIZE:
        c.skip(_SCALAR_SIZE[vtype], f"the value of {key!r}")
    elif vtype == _STRING:
        c.skip(c.u64(f"the length of {key!r}"), f"the string {key!r}")
    elif vtype == _ARRAY:
        itype = c.u32(f"the element type of {key!r}")
        n = c.u64(f"the length of {key!r}")
        if itype in _SCALAR_SIZE:
            c.skip(n * _SCALAR_SIZE[itype], f"array {key!r} of {n} elements of type {itype}")
        elif itype in (_STRING, _ARRAY):
            if depth >= _MAX_NESTING:   # (GGUFReader recurses too: a RecursionError, not a GGUFError)
                raise c.bad(f"array {key!r} nests arrays more than {_MAX_NESTING} deep")
            c.need(n * (8 if itype == _STRING else 12), f"array {key!r} of {n} elements of type {itype}")
            for _ in range(n):
                _skip_value(c, itype, key, depth + 1)
        else:
            raise c.bad(f"array {key!r} has elements of unknown type {itype}")
    else:
        raise c.bad(f"metadata {key!r} has unknown value type {vtype}")
    return None


def _tensor_infos(c: _Cursor, count: int) -> list[tuple[str, int, int]]:
    """(name, data offset, data bytes) of each tensor; a type gguf does not know is refused
    here, naming the tensor (GGUFReader would raise a bare ValueError)."""
    # lazy: gguf (numpy); this module must import without it (host)
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    known = {int(t): t for t in GGMLQuantizationType}
    c.need(count * 24, f"{count} tensor infos")   # name length, n_dims, type, offset
    infos = []
    for i in range(count):
        name = c.string(f"the name of tensor #{i}")
        n_dims = c.u32(f"the dimension count of {name}")
        if n_dims > _MAX_DIMS:
            raise c.bad(f"tensor {name} has {n_dims} dimensions (GGML has at most {_MAX_DIMS})")
        elements = math.prod(c.u64(f"the shape of {name}") for _ in range(n_dims))
        ttype = c.u32(f"the type of {name}")
        if ttype not in known:
            raise GGUFError(f"{c.path}: tensor {name} has type {ttype}, not a GGML type this gguf package knows")
        block, size = GGML_QUANT_SIZES[known[ttype]]
        infos.append((name, c.u64(f"the data offset of {name}"), elements * size // block))
    return infos


def check_layout(path: str | os.PathLike) -> None:
    """Walks the header, metadata and tensor infos of the GGUF file at ``path``, all
    bounded by its size, so that GGUFReader reads them in bounded time; every tensor's
    data must lie inside the file. Raises GGUFError (FileNotFoundError for a missing file)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise GGUFError(f"{path}: not a readable GGUF file (truncated or corrupt?): the file is empty")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                _walk(_Cursor(buf, path))
    except (FileNotFoundError, GGUFError):
        raise
    except OSError as e:
        raise GGUFError(f"{path}: cannot read the file: {e}") from None


def _walk(c: _Cursor) -> None:
    c.need(4, "the magic")
    magic = bytes(c.buf[:4])
    if magic != b"GGUF":
        raise c.bad(f"bad magic {magic!r}")
    c.pos = 4
    version = c.u32("the version")
    if version & 0xFFFF == 0:   # written on a big-endian machine (GGUFReader reads these too)
        c.order = ">"
        version = struct.unpack(">I", struct.pack("<I", version))[0]
    if version not in (2, 3):
        raise c.bad(f"version {version} (only 2 and 3 are read)")
    tensors = c.u64("the tensor count")
    kvs = c.u64("the metadata count")
    c.need(kvs * 12, f"{kvs} metadata entries")   # key length, value type, >= 0 bytes of value
    alignment = 32
    for i in range(kvs):
        key = c.string(f"the name of metadata entry #{i}")
        value = _skip_value(c, c.u32(f"the type of {key!r}"), key)
        if key == "general.alignment" and value:
            alignment = value
    infos = _tensor_infos(c, tensors)
    if alignment & (alignment - 1):
        return   # GGUFReader refuses it, with its own message
    data = -(-c.pos // alignment) * alignment
    for name, offset, nbytes in infos:
        if data + offset + nbytes > len(c.buf):
            raise GGUFError(f"{c.path}: tensor {name} ends past the end of the file (truncated?): "
                            f"bytes {data + offset} .. {data + offset + nbytes} of {len(c.buf)}")


# ---------------------------------------------------------------------------------------
# Stage 2: what GGUFReader read, against the tensors


@dataclass(frozen=True)
class Dims:
    """The model a file describes, as checked (optional values None when absent)."""
    arch: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied: bool
    context_length: int | None
    rms_eps: float | None
    rope_base: float | None


_INTS = ("UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "UINT64", "INT64")
_FLOATS = ("FLOAT32", "FLOAT64")   # as llama.cpp: an integer here is a damaged type field


def _value(reader, path: str, key: str, kinds: tuple[str, ...], expected: str):
    """The scalar value of metadata ``key`` (None if absent), if its GGUF type is one of
    ``kinds`` (a string where a count belongs, an array, a bool: GGUFError)."""
    f = reader.get_field(key)
    if f is None:
        return None
    types = [getattr(t, "name", str(t)) for t in f.types]
    if len(types) != 1 or types[0] not in kinds:
        shown = f"an array of {types[-1]}" if types and types[0] == "ARRAY" else (types[0] if types else "no type")
        raise GGUFError(f"{path}: metadata {key} is {shown}, expected {expected}")
    try:
        return f.contents()
    except (IndexError, ValueError) as e:   # an empty part (file ends there), bad UTF-8
        raise GGUFError(f"{path}: metadata {key}: value unreadable (truncated or corrupt?): {e}") from None


def _int(reader, path: str, key: str, required: bool = True) -> int | None:
    v = _value(reader, path, key, _INTS, "an integer")
    if v is None:
        if required:
            raise GGUFError(f"{path}: GGUF metadata has no {key!r}")
        return None
    if v < 1:
        raise GGUFError(f"{path}: metadata {key} = {v}, expected a positive count")
    return int(v)


def _float(reader, path: str, key: str, lo: float, hi: float, open_lo: bool = False) -> float | None:
    v = _value(reader, path, key, _FLOATS, "a number")
    if v is None:
        return None
    v = float(v)
    if not math.isfinite(v) or v < lo or v > hi or (open_lo and v == lo):
        bounds = f"({lo:g}, {hi:g})" if open_lo else f"[{lo:g}, {hi:g}]"
        raise GGUFError(f"{path}: metadata {key} = {v!r}, expected a finite value in {bounds}")
    return v


def _check_types(reader, path: str, supported: set[str]) -> None:
    """Every tensor's type is one load_gguf reads as it is: an IQ*, TQ*, MXFP4, ... tensor
    is refused, never dequantized into something it is not."""
    for t in reader.tensors:
        name = t.tensor_type.name
        if name not in supported:
            raise GGUFError(f"{path}: tensor {t.name} has type {name}; supported: {', '.join(sorted(supported))}")


def _block_index(name: str) -> int | None:
    parts = name.split(".")
    if len(parts) >= 3 and parts[0] == "blk" and parts[1].isdigit():
        return int(parts[1])
    return None


def _check_block_count(path: str, arch: str, layers: int, shapes: dict) -> None:
    """``block_count`` against the ``blk.N`` tensors: no index at or past it, none missing
    below it. Never iterates up to the value itself (it may be 4e9)."""
    present = {i for i in map(_block_index, shapes) if i is not None}
    key = f"{arch}.block_count"
    beyond = sorted(i for i in present if i >= layers)
    if beyond:
        raise GGUFError(f"{path}: metadata {key} = {layers}, but the file has tensors of blk.{beyond[-1]}")
    if len(present) < layers:
        first_missing = next(i for i in range(len(present) + 1) if i not in present)
        held = f"blocks blk.0 .. blk.{max(present)}" if present else "no blk.N tensors"
        raise GGUFError(f"{path}: metadata {key} = {layers}, but the file's tensors hold {len(present)} "
                        f"({held}); blk.{first_missing} is missing")


def _is_linear_bias(name: str) -> bool:
    parts = name.split(".")
    return len(parts) == 4 and parts[0] == "blk" and parts[2] in _BLOCK_LINEARS and parts[3] == "bias"


def _shape_of(path: str, shapes: dict, name: str, ndim: int) -> list[int]:
    """The shape of a tensor that must be there, with ``ndim`` dimensions of at least 1."""
    if name not in shapes:
        raise GGUFError(f"{path}: tensors missing from the file: {name}")
    shape = shapes[name]
    if len(shape) != ndim or min(shape) < 1:
        raise GGUFError(f"{path}: {name} is {shape}, expected {ndim} dimension(s) of at least 1")
    return shape


def _check_heads(path: str, arch: str, hidden: int, heads: int, kv: int | None, k_rows: int,
                 key_length: int | None = None) -> int:
    """head_count and head_count_kv (None: absent, as many as head_count) against the
    embedding width and blk.0.attn_k's rows; returns head_dim. transformers takes
    head_dim = hidden // heads for qwen2 and llama; qwen3 takes ``attention.key_length``
    (``key_length``; absent: hidden // heads, as llama.cpp does). RoPE (and Llama's q/k
    row permutation) splits each head in halves: it must be even."""
    key, kv_key = f"{arch}.attention.head_count", f"{arch}.attention.head_count_kv"
    width = f"{arch}.embedding_length = {hidden} (the columns of token_embd.weight)"
    if key_length is None:
        if heads > hidden or hidden % heads:
            raise GGUFError(f"{path}: metadata {key} = {heads} does not divide {width}")
        head_dim = hidden // heads
        if head_dim % 2:
            raise GGUFError(f"{path}: metadata {key} = {heads} gives heads of {head_dim} values ({width}); "
                            "RoPE needs an even head size")
        source = f"{arch}.embedding_length = {hidden} / {key} = {heads}"
    else:
        head_dim = key_length
        if head_dim % 2:
            raise GGUFError(f"{path}: metadata {arch}.attention.key_length = {head_dim}; RoPE needs an even head size")
        source = f"{arch}.attention.key_length = {head_dim}"
    given = f"{kv_key} = {kv}" if kv is not None else f"{kv_key} absent (taken as {key})"
    kv = heads if kv is None else kv
    if kv > heads or heads % kv:
        raise GGUFError(f"{path}: metadata {kv_key} = {kv} does not divide {key} = {heads}")
    if kv * head_dim != k_rows:
        raise GGUFError(f"{path}: metadata {given}: {kv} heads of {head_dim} ({source}) "
                        f"imply {kv * head_dim} rows in blk.0.attn_k.weight, which has {k_rows}")
    return head_dim


def _head_dim_keys(reader, path: str, arch: str, hidden: int, heads: int) -> int | None:
    """``attention.key_length`` where the architecture takes its head_dim from it (qwen3;
    ``value_length``, if present, must equal it: the model has one head size). Elsewhere
    a key_length/value_length other than embedding_length / head_count is refused: qwen2
    and llama are built with head_dim = hidden // heads, and would not fit the tensors."""
    k_len = _int(reader, path, f"{arch}.attention.key_length", required=False)
    v_len = _int(reader, path, f"{arch}.attention.value_length", required=False)
    if arch in HEAD_DIM_ARCHITECTURES:
        if k_len is not None and v_len is not None and v_len != k_len:
            raise GGUFError(f"{path}: metadata {arch}.attention.value_length = {v_len} differs from "
                            f"{arch}.attention.key_length = {k_len} (one head size is supported)")
        return k_len if k_len is not None else v_len
    for name, v in (("key_length", k_len), ("value_length", v_len)):
        if v is not None and hidden % heads == 0 and v != hidden // heads:   # (not dividing: _check_heads says so)
            raise GGUFError(f"{path}: metadata {arch}.attention.{name} = {v}: a {arch} model has heads of "
                            f"{arch}.embedding_length / {arch}.attention.head_count = {hidden} / {heads} "
                            f"values (heads of another size load only for {', '.join(HEAD_DIM_ARCHITECTURES)})")
    return None


def _expected(arch: str, d: Dims, has_llama_bias: bool) -> dict[str, tuple[list[int], str]]:
    """Every tensor the model needs (name -> [rows, columns], which keys give them);
    output.weight is added by the caller when present (absent, lm_head is tied)."""
    q_dim, kv_dim = d.heads * d.head_dim, d.kv_heads * d.head_dim
    h = f"{arch}.embedding_length = {d.hidden}"
    if arch in HEAD_DIM_ARCHITECTURES:
        hd = f"{arch}.attention.key_length = {d.head_dim}"
        qw = f"{arch}.attention.head_count = {d.heads} heads of {d.head_dim} ({hd}), {h}"
        kvw = f"{arch}.attention.head_count_kv = {d.kv_heads} heads of {d.head_dim} ({hd})"
    else:
        qw = h
        kvw = (f"{arch}.attention.head_count_kv = {d.kv_heads} heads of {d.head_dim} "
               f"({h} / {arch}.attention.head_count = {d.heads})")
    ff = f"{arch}.feed_forward_length = {d.ffn}"
    want = {"token_embd.weight": ([d.vocab, d.hidden], f"vocabulary {d.vocab}, {h}"),
            "output_norm.weight": ([d.hidden], h)}
    bias = {"attn_q": ([q_dim], qw), "attn_k": ([kv_dim], kvw), "attn_v": ([kv_dim], kvw)}
    if arch == "llama":
        bias = {**bias, "attn_output": ([d.hidden], h)} if has_llama_bias else {}
    elif arch == "qwen3":  # no q/k/v bias; per-head RMSNorm of q and k instead
        bias = {}
    for i in range(d.layers):
        b = f"blk.{i}"
        want.update({
            f"{b}.attn_q.weight": ([q_dim, d.hidden], qw), f"{b}.attn_k.weight": ([kv_dim, d.hidden], kvw),
            f"{b}.attn_v.weight": ([kv_dim, d.hidden], kvw), f"{b}.attn_output.weight": ([d.hidden, q_dim], qw),
            f"{b}.ffn_gate.weight": ([d.ffn, d.hidden], f"{ff}, {h}"),
            f"{b}.ffn_up.weight": ([d.ffn, d.hidden], f"{ff}, {h}"),
            f"{b}.ffn_down.weight": ([d.hidden, d.ffn], f"{h}, {ff}"),
            f"{b}.attn_norm.weight": ([d.hidden], h), f"{b}.ffn_norm.weight": ([d.hidden], h)})
        if arch in HEAD_DIM_ARCHITECTURES:
            hd = f"heads of {d.head_dim} ({arch}.attention.key_length)"
            want.update({f"{b}.attn_q_norm.weight": ([d.head_dim], hd), f"{b}.attn_k_norm.weight": ([d.head_dim], hd)})
        want.update({f"{b}.{kind}.bias": s for kind, s in bias.items()})
    return want


def _check_shapes(path: str, arch: str, want: dict, shapes: dict) -> None:
    missing = [n for n in want if n not in shapes]
    if missing:
        more = f" (and {len(missing) - 8} more)" if len(missing) > 8 else ""
        raise GGUFError(f"{path}: tensors missing from the file: {', '.join(missing[:8])}{more}")
    for name, shape in shapes.items():
        if name not in want:
            raise GGUFError(f"{path}: tensor {name} has no place in a {arch} model")
        expected, why = want[name]
        if shape != expected:
            raise GGUFError(f"{path}: {name} is {shape}, the model expects {expected} ({why})")


def check_file(reader, path: str | os.PathLike, supported_types) -> Dims:
    """Checks the file GGUFReader ``reader`` read from ``path`` before a model is built:
    tensor types (names or ``GGMLQuantizationType`` members in ``supported_types``), the
    architecture, metadata value types, and every count and dimension against the
    tensors' shapes. Returns the checked dimensions; raises GGUFError naming the tensor,
    or the key, its value and what the tensors say."""
    path = os.fspath(path)
    supported = {getattr(s, "name", s) for s in supported_types}
    arch = _value(reader, path, "general.architecture", ("STRING",), "a string")
    if arch is None:
        raise GGUFError(f"{path}: GGUF metadata has no 'general.architecture'")
    if arch not in ARCHITECTURES:
        raise GGUFError(f"{path}: architecture {arch!r} is not supported (only {', '.join(ARCHITECTURES)})")
    _check_types(reader, path, supported)
    shapes = {t.name: [int(x) for x in reversed(t.shape.tolist())] for t in reader.tensors}

    vocab, width = _shape_of(path, shapes, "token_embd.weight", 2)
    hidden = _int(reader, path, f"{arch}.embedding_length")
    if hidden != width:
        raise GGUFError(f"{path}: metadata {arch}.embedding_length = {hidden}, but token_embd.weight is "
                        f"[{vocab}, {width}] ({width} columns)")
    n_vocab = _int(reader, path, f"{arch}.vocab_size", required=False)
    if n_vocab is not None and n_vocab != vocab:
        raise GGUFError(f"{path}: metadata {arch}.vocab_size = {n_vocab}, but token_embd.weight has {vocab} rows")

    layers = _int(reader, path, f"{arch}.block_count")
    _check_block_count(path, arch, layers, shapes)

    heads = _int(reader, path, f"{arch}.attention.head_count")
    kv = _int(reader, path, f"{arch}.attention.head_count_kv", required=False)
    k_rows = _shape_of(path, shapes, "blk.0.attn_k.weight", 2)[0]
    key_length = _head_dim_keys(reader, path, arch, hidden, heads)
    head_dim = _check_heads(path, arch, hidden, heads, kv, k_rows, key_length)
    kv = heads if kv is None else kv

    ffn = _int(reader, path, f"{arch}.feed_forward_length")
    gate_rows = _shape_of(path, shapes, "blk.0.ffn_gate.weight", 2)[0]
    if ffn != gate_rows:
        raise GGUFError(f"{path}: metadata {arch}.feed_forward_length = {ffn}, but blk.0.ffn_gate.weight has "
                        f"{gate_rows} rows")

    context = _int(reader, path, f"{arch}.context_length", required=False)
    if context is not None and context > MAX_CONTEXT:
        raise GGUFError(f"{path}: metadata {arch}.context_length = {context}, expected at most {MAX_CONTEXT}")
    eps = _float(reader, path, f"{arch}.attention.layer_norm_rms_epsilon", 0.0, 1.0, open_lo=True)
    base = _float(reader, path, f"{arch}.rope.freq_base", *ROPE_BASE_RANGE)

    tied = "output.weight" not in shapes
    d = Dims(arch, hidden, layers, heads, kv, head_dim, ffn, vocab, tied, context, eps, base)
    # Llama: load_gguf gives the attention q, k, v and o biases if the file has a bias on any
    # Linear (its attention_bias)
    has_bias = any(_is_linear_bias(n) for n in shapes)
    want = _expected(arch, d, has_bias)
    if not tied:
        want["output.weight"] = ([vocab, hidden], f"vocabulary {vocab}, {arch}.embedding_length = {hidden}")
    _check_shapes(path, arch, want, shapes)
    return d


def open_checked(path: str | os.PathLike, supported_types=SUPPORTED_TYPES):
    """The file's ``gguf.GGUFReader`` after every check here: its layout bounded by the file
    size, its tensors inside the file, their types supported and the metadata in agreement
    with them. ``load_gguf`` and ``serve FILE.gguf`` (before its tokenizer, which reads the
    same metadata) both start with it; needs the gguf package, not torch."""
    try:
        import gguf  # lazy: gguf (numpy); this module must import without it (host)
    except ImportError as e:
        raise GGUFError("reading a GGUF file needs the gguf package (Debian: apt install python3-gguf)") from e
    path = os.fspath(path)
    check_layout(path)  # bounds GGUFReader's loops (array lengths) by the file size
    try:
        reader = gguf.GGUFReader(path, "r")
    except FileNotFoundError:
        raise
    except Exception as e:  # noqa: BLE001  (numpy/struct errors of a short or corrupt file)
        raise GGUFError(f"{path}: not a readable GGUF file (truncated or corrupt?): {type(e).__name__}: {e}") from None
    size = os.path.getsize(path)
    for t in reader.tensors:
        if t.data_offset + t.n_bytes > size or t.data.nbytes != t.n_bytes:
            raise GGUFError(f"{path}: tensor {t.name} ends past the end of the file (truncated?)")
    check_file(reader, path, supported_types)
    return reader
