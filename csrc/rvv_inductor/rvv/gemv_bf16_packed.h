// Decode GEMV with a packed weight: y[n] = sum_k x[k] * W[n, k] (+ bias[n]).
//
// Kernel gemv_bf16_packed_1xm8: one row of X, one e32 LMUL=8 accumulator per block
// chunk. Per k the inner loop is flw x[k] + vle16 + widen + vfmacc.vf over a whole block
// row (nb = 2 * vlenb = VLMAX elements with the preferred nb), and K is unrolled by 4, so
// at VLEN 256 (64 columns) about 6 instructions cover 64 multiply-adds: ~0.1 instructions
// per weight element with the software widen. Registers: 8 accumulator + 4 loaded +
// 8 widened of 32. The weight is streamed exactly once; x is converted to fp32 once per
// call so the loop reloads it with a plain flw (4 bytes per k per block, ~3% of the
// weight bytes at nb = 64).
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/epilogue.h"
#include "rvv_inductor/scratch.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

// One row: xf is x converted to fp32, y points at the row's first output.
template <class Ops>
inline void gemv_bf16_packed_1xm8_row(const LinearOperands& a, const float* xf, void* y) {
  const int64_t K = a.K, nb = a.nb;
  for (int64_t b = a.block_begin; b < a.block_end; ++b) {
    const int64_t n0 = b * nb;
    const int64_t cols = a.N - n0 < nb ? a.N - n0 : nb;
    const uint16_t* wb = static_cast<const uint16_t*>(a.w) + b * K * nb;
    // Strip-mine the block so any nb works at any VLEN; with nb = VLMAX this runs once.
    for (int64_t j = 0; j < cols;) {
      const size_t vl = __riscv_vsetvl_e32m8(size_t(cols - j));
      vfloat32m8_t acc = bias_m8<Ops>(a.bias, a.bias_dtype, n0 + j, vl);
      const uint16_t* w = wb + j;
      int64_t k = 0;
      for (; k + 4 <= K; k += 4, w += 4 * nb) {
        acc = __riscv_vfmacc_vf_f32m8(acc, xf[k], Ops::load_m8(w, vl), vl);
        acc = __riscv_vfmacc_vf_f32m8(acc, xf[k + 1], Ops::load_m8(w + nb, vl), vl);
        acc = __riscv_vfmacc_vf_f32m8(acc, xf[k + 2], Ops::load_m8(w + 2 * nb, vl), vl);
        acc = __riscv_vfmacc_vf_f32m8(acc, xf[k + 3], Ops::load_m8(w + 3 * nb, vl), vl);
      }
      for (; k < K; ++k, w += nb) acc = __riscv_vfmacc_vf_f32m8(acc, xf[k], Ops::load_m8(w, vl), vl);
      store_out<Ops>(y, a.y_dtype, n0 + j, acc, vl);
      j += int64_t(vl);
    }
  }
}

// Meant for M == 1; rows beyond the first are handled one at a time (each re-reads the
// weight), which is correct but the GEMM kernel is the one to use for M >= 2.
template <class Ops>
inline Status gemv_bf16_packed_1xm8(const LinearOperands& a) {
  F32Scratch<1024> scratch;
  float* xf = scratch.get(a.scratch, a.K);
  if (!xf) return Status::kNoMemory;
  const size_t ysize = a.y_dtype == DType::kBF16 ? sizeof(uint16_t) : sizeof(float);
  for (int64_t m = 0; m < a.M; ++m) {
    widen_bf16_row<Ops>(a.x + m * a.ldx, xf, a.K);
    gemv_bf16_packed_1xm8_row<Ops>(a, xf, static_cast<char*>(a.y) + size_t(m * a.ldy) * ysize);
  }
  return Status::kOk;
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
