"""An RVV vector ISA for Inductor's C++ backend.

Upstream torch 2.14.1 has no riscv64 branch in ``valid_vec_isa_list()``, so generated
pointwise kernels are scalar loops built without any ``-march``. This module adds
``VecRVV`` to that list when (and only when) the C++ detector confirms V.

Two facts shape the class:

* Inductor's vectorised codegen emits ``at::vec::Vectorized<T>``. torch 2.14.1 has no RVV
  specialisation (PR #175746 is unmerged), so RVV kernels use ATen's generic
  ``Vectorized``, a 32-byte array whose element loops the compiler turns into
  vector-length-agnostic RVV code under ``-march=rv64gcv``. Inductor steps its loops by
  ``nelements()``, which must equal ``Vectorized<float>::size()``: the pointwise bit width
  is therefore 256 whatever the hardware VLEN, and the build probe ``static_assert``s it.
  The real VLEN drives the GEMM micro-kernels instead (see ``micro_gemm.py``).
* ``cpp_prefix.h`` only includes the ``at::vec`` headers for the ISAs it knows. We add
  ``CPU_CAPABILITY_RVV`` to that list in an overlay copy (``prefix_overlay.py``): the same
  one-line change the upstream port would make, checked against the exact upstream text.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import subprocess
import sys

import torch
from torch._inductor import config as inductor_config
from torch._inductor import cpu_vec_isa
from torch._inductor.exc import InvalidCxxCompiler

from .. import cpu
from .. import paths
from . import prefix_overlay

log = logging.getLogger("rvv_inductor")

# Width of ATen's generic at::vec::Vectorized (VECTOR_WIDTH = 32 bytes).
GENERIC_VEC_BITS = 256

_PROBE = r"""
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <riscv_vector.h>
#include <cstddef>

static_assert(at::vec::Vectorized<float>::size() * 32 == %(bits)d,
              "VecRVV.bit_width() must equal the width of at::vec::Vectorized");

alignas(64) float in_out_ptr0[16] = {0.0};

extern "C" void __rvv_chk_kernel() {
    auto tmp0 = at::vec::Vectorized<float>(1);
    auto tmp1 = tmp0.exp();
    tmp1.store(in_out_ptr0);
    volatile size_t vl = __riscv_vsetvlmax_e32m1();
    (void)vl;
}
"""


@dataclasses.dataclass
class VecRVV(cpu_vec_isa.VecISA):
    _bit_width = GENERIC_VEC_BITS
    _macro = ["CPU_CAPABILITY_RVV", "CPU_CAPABILITY=RVV", "HAVE_RVV_CPU_DEFINITION"]
    _arch_flags = "-march=rv64gcv"
    _dtype_nelements = {torch.float: 8, torch.bfloat16: 16, torch.float16: 16}

    def __str__(self) -> str:
        return "rvv"

    def build_arch_flags(self) -> str:
        # Our vector math (inductor_vec_math.h) has two builds: RVV intrinsics, and plain C++
        # that the compiler vectorises (lane_math.h). Debian's GCC 16 crashes (ICE) when a TU
        # uses RVV intrinsics over a precompiled cpp_prefix.h that included <riscv_vector.h>,
        # so the intrinsics are used only by compiles that precompile no header (export's).
        flags = self._arch_flags
        if not (inductor_config.cpp_cache_precompile_headers or inductor_config.aot_inductor.precompile_headers):
            flags += " -DRVV_INDUCTOR_VEC_INTRINSICS=1"
        return flags

    __hash__ = cpu_vec_isa.VecISA.__hash__

    def __bool__(self) -> bool:
        return _probe_ok(self._arch_flags, inductor_config.cpp.vec_isa_ok)

    def _probe_load(self, output_path: str) -> bool:
        # Inductor's dlopen probe gives its child python 60 s. Under emulation, beside other
        # emulated jobs, a python start alone can take longer, and a timeout would leave the
        # process without the RVV ISA for good (the answer is cached): 600 s here, the
        # bound this package's other emulated subprocesses have.
        cmd = [sys.executable, "-c", cpu_vec_isa.VecISA._avx_py_load.replace("__lib_path__", output_path)]
        try:
            subprocess.run(cmd, stderr=subprocess.DEVNULL, env=self._build_probe_env(), timeout=600, check=True)
        except (subprocess.TimeoutExpired, subprocess.CalledProcessError) as e:
            log.warning("rvv_inductor: loading the RVV build probe failed: %s", e)
            return False
        return True


def make_vec_rvv(info: cpu.CpuInfo) -> VecRVV:
    """A VecRVV whose flags describe exactly what detection found."""
    isa = VecRVV()
    # -I lets generated code include the kernel headers (the single source of truth).
    isa._arch_flags = f"-march={info.march} -I{paths.include_dir()}"
    return isa


@functools.cache
def _probe_ok(arch_flags: str, vec_isa_ok: bool | None) -> bool:
    if vec_isa_ok is not None:
        return vec_isa_ok
    if not prefix_overlay.ready():
        return False
    isa = VecRVV()
    isa._arch_flags = arch_flags
    try:
        ok = isa.check_build(_PROBE % {"bits": GENERIC_VEC_BITS})
        # Once more on failure: a CI run (2026-12-07, QEMU 10, three emulated jobs) saw the
        # probe fail once where it passes alone; the answer is cached for the process.
        ok = ok or isa.check_build(_PROBE % {"bits": GENERIC_VEC_BITS})
    except InvalidCxxCompiler as e:  # no C++ compiler: Inductor cannot build anything, RVV or not
        log.warning("rvv_inductor: no C++ compiler for Inductor (%s); the RVV ISA is not offered", e)
        return False
    if not ok:
        log.warning("rvv_inductor: the RVV build probe failed (%s); Inductor stays scalar", arch_flags)
    return ok


def rvv_valid_vec_isa_list_factory(original):
    """Wraps Inductor's (cached) valid_vec_isa_list so that it also offers VecRVV."""

    @functools.cache
    def valid_vec_isa_list() -> list[cpu_vec_isa.VecISA]:
        isas = list(original())
        info = cpu.effective()
        if info.is_riscv64 and info.has_v:
            isa = make_vec_rvv(info)
            if isa:
                isas.insert(0, isa)
        return isas

    return valid_vec_isa_list
