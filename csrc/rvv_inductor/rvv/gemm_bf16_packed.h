// Prefill / batched GEMM with a packed weight, M >= 2: Y[M, N] = X[M, K] . W^T (+ bias).
//
// Kernel gemm_bf16_packed_6xm4: X is converted to fp32 once per call, in 6-row panels laid
// out [k][6] so the tile (gemm_tile_bf16.h, where the register counts are) reads its 6
// scalars per k from one pointer. Then for every column chunk of every block the panels
// run over it in turn, so the chunk (K * VLMAX * 2 bytes) is reused from cache by all
// rows while the fp32 X stays cache-resident across chunks. M tails use the 1..5-row tile.
// With four or more tiles (M > 18) each column chunk is cut into K blocks whose bf16 rows
// are widened once into an fp32 panel that every tile streams (gemm_tile_bf16.h,
// F32Rows), instead of widened again by each tile; the tiles' partial sums wait in an
// fp32 buffer between K blocks. Each output is still summed over k in order from the
// bias, so the result is the same bit for bit.
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

// One column chunk [n, n + vl) of weight block wb (columns j.. of it) for all M rows, by
// the panel path: K blocks of bf16 rows widened once into bp, partial sums in acc
// (M * vlmax floats) between them.
template <class Ops>
inline void gemm_bf16_chunk_panels(const LinearOperands& a, const float* xp, float* acc, float* bp,
                                   const uint16_t* wb, int64_t n, size_t vl, vfloat32m4_t bias) {
  const int64_t M = a.M, K = a.K, nb = a.nb;
  const int64_t vlmax = int64_t(__riscv_vsetvlmax_e32m4()), kcp = gemm_panel_rows(size_t(vlmax));
  for (int64_t k0 = 0; k0 < K; k0 += kcp) {
    const int64_t kc = K - k0 < kcp ? K - k0 : kcp;
    const bool last = k0 + kc == K;
    widen_b_panel<Ops>(wb, nb, kc, vl, bp);
    wb += kc * nb;
    for (int64_t m0 = 0; m0 < M; m0 += kGemmMR) {
      const int rows = int(M - m0 < kGemmMR ? M - m0 : kGemmMR);
      float* part = acc + m0 * vlmax;
      const int64_t out0 = m0 * a.ldy + n;
      auto init = [&](int r) { return k0 == 0 ? bias : __riscv_vle32_v_f32m4(part + r * vlmax, vl); };
      auto store = [&](int r, vfloat32m4_t v) {
        if (last)
          store_out<Ops>(a.y, a.y_dtype, out0 + r * a.ldy, v, vl);
        else
          __riscv_vse32_v_f32m4(part + r * vlmax, v, vl);
      };
      // The panel of rows m0.. is [k][rows] from xp + m0 * K; K block k0 starts at k0 * rows.
      gemm_bf16_tile_m4_rows<F32Rows>(rows, xp + m0 * K + k0 * rows, static_cast<const float*>(bp), int64_t(vl), kc,
                                      vl, init, store);
    }
  }
}

template <class Ops>
inline Status gemm_bf16_packed_6xm4(const LinearOperands& a) {
  const int64_t M = a.M, K = a.K, nb = a.nb;
  const bool panels = M > (kGemmPanelMinTiles - 1) * kGemmMR && __riscv_vsetvlmax_e32m4() <= size_t(kGemmPanelFloats);
  const int64_t acc_floats = panels ? M * int64_t(__riscv_vsetvlmax_e32m4()) : 0;
  F32Scratch<1024> scratch;
  float* xp = scratch.get(a.scratch && a.scratch_floats >= M * K + acc_floats ? a.scratch : nullptr, M * K + acc_floats);
  if (!xp) return Status::kNoMemory;
  pack_a_panels_f32<Ops>(a.x, a.ldx, M, K, kGemmMR, xp);
  float bp[kGemmPanelFloats];
  for (int64_t b = a.block_begin; b < a.block_end; ++b) {
    const int64_t n0 = b * nb;
    const int64_t cols = a.N - n0 < nb ? a.N - n0 : nb;
    const uint16_t* wb = static_cast<const uint16_t*>(a.w) + b * K * nb;
    for (int64_t j = 0; j < cols;) {
      const size_t vl = __riscv_vsetvl_e32m4(size_t(cols - j));
      const vfloat32m4_t bias = bias_m4<Ops>(a.bias, a.bias_dtype, n0 + j, vl);
      if (panels) {
        gemm_bf16_chunk_panels<Ops>(a, xp, xp + M * K, bp, wb + j, n0 + j, vl, bias);
      } else {
        for (int64_t m0 = 0; m0 < M; m0 += kGemmMR) {
          const int rows = int(M - m0 < kGemmMR ? M - m0 : kGemmMR);
          const int64_t out0 = m0 * a.ldy + n0 + j;
          auto init = [&](int) { return bias; };
          auto store = [&](int r, vfloat32m4_t acc) { store_out<Ops>(a.y, a.y_dtype, out0 + r * a.ldy, acc, vl); };
          gemm_bf16_tile_m4_rows<Ops>(rows, xp + m0 * K, wb + j, nb, K, vl, init, store);
        }
      }
      j += int64_t(vl);
    }
  }
  return Status::kOk;
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
