"""export's command line before anything is loaded (host, torch-free): the GGUF file's own
formats (--weights file) and how the package's prefill treats each of them."""
from __future__ import annotations

import pytest

from rvv_inductor import export


@pytest.mark.parametrize("args,want", [
    (["--weights", "file"], "needs a .gguf source"),
])
def test_file_weights_need_a_gguf(tmp_path, capsys, args, want):
    (tmp_path / "model").mkdir()
    assert export.main([str(tmp_path / "model"), *args, "-o", str(tmp_path / "m.pt2")]) == 2
    err = capsys.readouterr().err
    assert want in err and err.count("\n") == 1, err


def test_group_size_does_not_apply_to_file_weights(tmp_path, capsys):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")  # refused before it is read
    assert export.main([str(gguf), "--group-size", "32", "-o", str(tmp_path / "m.pt2")]) == 2
    assert "--group-size does not apply to --weights file" in capsys.readouterr().err


def test_resolved_activations_of_a_files_formats():
    # auto: INT8 activations for 4-bit and block formats, the FP path for INT8 (Q8_0)
    assert export._resolved_activations("file", "auto", ["q4_k", "q6_k"]) == "int8"
    assert export._resolved_activations("file", "auto", ["int8"]) == "bf16"
    assert export._resolved_activations("file", "auto", ["int8", "q4_k"]) == "mixed"
    assert export._resolved_activations("file", "bf16", ["q4_k"]) == "bf16"
    assert export._resolved_activations("int4", "auto") == "int8"
    assert export._resolved_activations("bf16", "int8") == "bf16"
