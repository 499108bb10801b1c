"""What both lowerings to Inductor's C++ GEMM template share (``routing.py`` for
``aten.mm``/``addmm``, ``packed_lowering.py`` for ``rvv_inductor::linear_packed``): the
config the template requires and the micro-GEMM it would pick."""
from __future__ import annotations

import torch
import torch._inductor.lowering  # noqa: F401  (must precede codegen.cpp_*: circular-import trap)
from torch._inductor import config as inductor_config
from torch._inductor.codegen.cpp_micro_gemm import create_micro_gemm
from torch._inductor.utils import parallel_num_threads

from .micro_gemm import RVV_MICRO_GEMM_CLASSES


def conditions():
    """A local ``config.patch`` with exactly what ``use_cpp_gemm_template()`` and
    ``CppGemmTemplate.add_choices`` ask for, and nothing global: the C++ GEMM backend and
    weight prepacking."""
    return inductor_config.patch(
        {"max_autotune_gemm": True, "max_autotune_gemm_backends": "CPP", "cpp.weight_prepack": True}
    )


def micro_gemm_for(m: int, n: int, k: int):
    """The micro-GEMM the template would use for a BF16 x BF16 -> FP32 GEMM of this shape."""
    return create_micro_gemm("micro_gemm", m, n, k, input_dtype=torch.bfloat16, input2_dtype=torch.bfloat16,
                             output_dtype=torch.float, num_threads=parallel_num_threads(), use_ref=True)


def is_rvv(micro, block_n: int | None = None) -> bool:
    """True when ``micro`` is one of ours (and, if given, blocks N by ``block_n``)."""
    return isinstance(micro, RVV_MICRO_GEMM_CLASSES) and (
        block_n is None or micro.register_blocking.block_n == block_n)

