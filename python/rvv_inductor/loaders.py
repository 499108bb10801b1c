"""Loading a model's tensors one at a time: from safetensors files (a file or a
directory, sharded or not) or from a callable, into a model built on the meta device
(``compile_linears(model, load=...)``). ``report`` arguments are the caller's
``LinearReport`` (its ``loaded_bytes`` counts what was read).

The safetensors reader is ours, not ``safetensors.safe_open``: safe_open maps the file, and
the pages of a mapping count in the process's RSS once touched, until it is closed; here
each tensor is read with ``readinto`` straight into its final buffer, so a load's peak is
the model and one open file. (The header format is small: 8 bytes of length, a JSON table
of dtype, shape and byte range per tensor, then the data.)
"""
from __future__ import annotations

import ctypes
import json
import os

import torch


class SafetensorsFiles:
    """Tensors of a safetensors file, or of a directory of them (sharded or not), read one
    at a time with plain file reads (no mmap: a mapped file counts in the process's RSS
    once touched). The format is 8 bytes of header length, a JSON header, then the data."""

    _DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64,
               "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
               "BOOL": torch.bool}

    def __init__(self, path) -> None:
        path = os.fspath(path)
        if os.path.isdir(path):
            files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".safetensors"))
        elif os.path.isfile(path):
            files = [path]
        else:
            raise ValueError(f"compile_linears: load={path!r} is neither a safetensors file nor a directory")
        if not files:
            raise ValueError(f"compile_linears: no *.safetensors file in {path}")
        self.index: dict[str, tuple[str, int, dict]] = {}
        for f in files:
            size = os.path.getsize(f)
            with open(f, "rb") as fh:
                head = fh.read(8)
                n = int.from_bytes(head, "little") if len(head) == 8 else -1
                try:
                    if n <= 0 or 8 + n > size:
                        raise ValueError(f"header length {n}")
                    table = json.loads(fh.read(n))
                    for name, e in table.items():
                        if name == "__metadata__":
                            continue
                        b, end = e["data_offsets"]
                        if e["dtype"] not in self._DTYPES or not 0 <= b <= end or 8 + n + end > size:
                            raise ValueError(f"tensor {name}: dtype {e['dtype']}, bytes {b}..{end} of {size - 8 - n}")
                        self.index[name] = (f, 8 + n, e)
                except (ValueError, KeyError, TypeError, UnicodeDecodeError) as ex:
                    raise ValueError(f"compile_linears: {f} is not a valid safetensors file ({ex})") from None

    def __call__(self, name: str, like: torch.Tensor) -> torch.Tensor:
        f, base, e = self.index[name]  # KeyError: not in these files
        b, end = e["data_offsets"]
        t = torch.empty(e["shape"], dtype=self._DTYPES[e["dtype"]])
        if t.numel() * t.element_size() != end - b:
            raise ValueError(f"compile_linears: tensor {name} in {f}: {end - b} bytes for shape {e['shape']} "
                             f"{e['dtype']}")
        if end > b:
            buf = (ctypes.c_char * (end - b)).from_address(t.data_ptr())
            with open(f, "rb") as fh:
                fh.seek(base + b)
                if fh.readinto(buf) != end - b:
                    raise ValueError(f"compile_linears: {f} ends inside tensor {name}")
        return t


class MetaLoader:
    """Materialises meta tensors of a model from ``load`` (a callable ``load(name, meta)``
    or a safetensors path), one at a time; a tensor with several names (tied weights) is
    asked for under each until one is found."""

    def __init__(self, load, model: torch.nn.Module) -> None:
        self.fn = load if callable(load) else SafetensorsFiles(load)
        self.names: dict[int, list[str]] = {}
        for name, t in list(model.named_parameters(remove_duplicate=False)) + list(
                model.named_buffers(remove_duplicate=False)):
            self.names.setdefault(id(t), []).append(name)
        self.done: dict[int, torch.Tensor] = {}

    def tensor(self, meta: torch.Tensor, report) -> torch.Tensor:
        if meta.device.type != "meta":
            return meta
        names = self.names.get(id(meta), ["<unnamed>"])
        for name in names:
            try:
                t = self.fn(name, meta)
            except KeyError:
                continue
            if not isinstance(t, torch.Tensor):
                raise ValueError(f"compile_linears: load({name!r}) returned {type(t).__name__}, not a tensor")
            if tuple(t.shape) != tuple(meta.shape):
                raise ValueError(f"compile_linears: load({name!r}) gave shape {tuple(t.shape)}, the model's "
                                 f"{name} is {tuple(meta.shape)}")
            t = t.detach().to(device="cpu", dtype=meta.dtype)
            report.loaded_bytes += t.numel() * t.element_size()
            return t
        raise ValueError(f"compile_linears: load has no tensor named {' or '.join(names)}")

    def materialize_rest(self, model: torch.nn.Module, report, skip: tuple[type, ...] = ()) -> None:
        """Every parameter and buffer still on the meta device, tied ones kept tied, except
        in modules of the ``skip`` types (they own their tensors)."""
        memo: dict[int, torch.Tensor] = {}
        for mod in model.modules():
            if isinstance(mod, skip):
                continue
            for pname, p in list(mod._parameters.items()):
                if p is not None and p.device.type == "meta":
                    if id(p) not in memo:
                        memo[id(p)] = torch.nn.Parameter(self.tensor(p, report), requires_grad=p.requires_grad)
                    mod._parameters[pname] = memo[id(p)]
            for bname, b in list(mod._buffers.items()):
                if b is not None and b.device.type == "meta":
                    if id(b) not in memo:
                        memo[id(b)] = self.tensor(b, report)
                    mod._buffers[bname] = memo[id(b)]


def meta_problems(model: torch.nn.Module, load) -> str | None:
    """Why a model with meta tensors cannot be loaded as asked, or None."""
    meta = [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if t.device.type == "meta"]
    if not meta:
        return None
    if load is None:
        return (f"{len(meta)} tensors of the model are on the meta device ({meta[0]}, ...): pass load= (a "
                "safetensors file or directory, or a callable load(name, meta_tensor) -> tensor)")
    nonpersistent = [f"{mn}.{bn}" if mn else bn for mn, mod in model.named_modules()
                     for bn in mod._non_persistent_buffers_set
                     if mod._buffers.get(bn) is not None and mod._buffers[bn].device.type == "meta"]
    if nonpersistent and not callable(load):
        return (f"non-persistent buffers on the meta device ({', '.join(nonpersistent[:3])}): checkpoints do not "
                "hold them; build those modules on the CPU (e.g. rotary embeddings) before compile_linears")
    return None
