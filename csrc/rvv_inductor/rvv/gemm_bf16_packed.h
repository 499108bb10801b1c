// Prefill / batched GEMM with a packed weight, M >= 2: Y[M, N] = X[M, K] . W^T (+ bias).
//
// Kernel gemm_bf16_packed_6xm4: X is converted to fp32 once per call, in 6-row panels laid
// out [k][6] so the tile (gemm_tile_bf16.h, where the register counts are) reads its 6
// scalars per k from one pointer. Then for every column chunk of every block the panels
// run over it in turn, so the chunk (K * VLMAX * 2 bytes) is reused from cache by all
// rows while the fp32 X stays cache-resident across chunks. M tails use the 1..5-row tile.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/epilogue.h"
#include "rvv_inductor/rvv/gemm_tile_bf16.h"
#include "rvv_inductor/scratch.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

template <class Ops>
inline Status gemm_bf16_packed_6xm4(const LinearOperands& a) {
  const int64_t M = a.M, K = a.K, nb = a.nb;
  F32Scratch<1024> scratch;
  float* xp = scratch.get(a.scratch, M * K);
  if (!xp) return Status::kNoMemory;
  pack_a_panels_f32<Ops>(a.x, a.ldx, M, K, kGemmMR, xp);
  for (int64_t b = a.block_begin; b < a.block_end; ++b) {
    const int64_t n0 = b * nb;
    const int64_t cols = a.N - n0 < nb ? a.N - n0 : nb;
    const uint16_t* wb = static_cast<const uint16_t*>(a.w) + b * K * nb;
    for (int64_t j = 0; j < cols;) {
      const size_t vl = __riscv_vsetvl_e32m4(size_t(cols - j));
      const vfloat32m4_t bias = bias_m4<Ops>(a.bias, a.bias_dtype, n0 + j, vl);
      for (int64_t m0 = 0; m0 < M; m0 += kGemmMR) {
        const int rows = int(M - m0 < kGemmMR ? M - m0 : kGemmMR);
        const int64_t out0 = m0 * a.ldy + n0 + j;
        auto init = [&](int) { return bias; };
        auto store = [&](int r, vfloat32m4_t acc) { store_out<Ops>(a.y, a.y_dtype, out0 + r * a.ldy, acc, vl); };
        gemm_bf16_tile_m4_rows<Ops>(rows, xp + m0 * K, wb + j, nb, K, vl, init, store);
      }
      j += int64_t(vl);
    }
  }
  return Status::kOk;
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
