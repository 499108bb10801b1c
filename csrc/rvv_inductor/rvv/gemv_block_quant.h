// Decode GEMV with a GGUF block-format weight (Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K;
// block_quant.h):
//   y[n] = sum over sub-blocks g of  s[g, n] * sum_{k in g} x[k] q[k, n]  +  o[g, n] * sum_{k in g} x[k]
// with w = s * q + o (the format's scale and offset, block_quant_decode.h).
//
// The loop of gemv_quant_packed_1xm8 (INT4): one e32 m8 accumulator per column chunk
// (nb = VLMAX), a group accumulator per sub-block fed two K rows per step by the arithmetic
// policy (QuantF16 on Zvfh: one vfwcvt to fp16 and a widening multiply-add per row;
// QuantF32 elsewhere), and per sub-block the scale and offset decoded for the whole chunk
// and applied once: the two-level K-quant scales cost one combine per 32 (Q6_K: 16) rows,
// not one operation per weight. The offset is applied through the sub-block's x sum, as
// the INT4 zero point is, so Inf/NaN activations take the scalar reference.
//
// Every weight byte is read once per call, and the packed weight has the file's bytes.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/block_quant.h"
#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/block_quant_decode.h"
#include "rvv_inductor/rvv/epilogue.h"
#include "rvv_inductor/rvv/gemv_quant_packed.h"
#include "rvv_inductor/rvv/quant_widen.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

// sum over the rows of sub-block `sub` of x[k] * q[k, columns], x at the sub-block's first row.
template <class P, DType F>
inline vfloat32m8_t block_sub_dot_m8(const uint8_t* rec, int64_t nb, int64_t j, int sub, const typename P::XType* x,
                                     size_t vl) {
  vfloat32m8_t acc;
  BlockFmt<F>::template for_pairs<vuint8m2_t>(rec, nb, j, sub, vl, [&](vuint8m2_t q0, vuint8m2_t q1, int i) {
    acc = i == 0 ? P::mul2_u4(x, q0, q1, vl) : P::fma2_u4(acc, x + 2 * i, q0, q1, vl);
  });
  return acc;
}

// acc + s * gs + o * xsum for vl <= VLMAX(e32, m4) columns from j.
template <DType F>
inline vfloat32m4_t block_combine_m4(vfloat32m4_t acc, vfloat32m4_t gs, const uint8_t* rec, int64_t nb, int64_t j,
                                     int sub, float xsum, size_t vl) {
  vfloat32m4_t s, o;
  BlockFmt<F>::params_m4(rec, nb, j, sub, vl, s, o);
  acc = __riscv_vfmacc_vv_f32m4(acc, s, gs, vl);
  return __riscv_vfmacc_vf_f32m4(acc, xsum, o, vl);
}

template <class P, DType F>
inline void gemv_block_quant_row(const LinearOperands& a, const QuantXRow<P>& xr, void* y) {
  using Fmt = BlockFmt<F>;
  const int64_t nb = a.nb, nrec = a.K / Fmt::kSuperRows, rec_bytes = int64_t(Fmt::kRecordBytes) * nb;
  quant_gemv_chunks(a, nrec * rec_bytes, xr.out_scale, y, [&](const uint8_t* blk, int64_t j, size_t vl) {
    const size_t vlmax4 = __riscv_vsetvlmax_e32m4();
    const size_t vl0 = vl < vlmax4 ? vl : vlmax4, vl1 = vl - vl0;
    vfloat32m8_t acc = __riscv_vfmv_v_f_f32m8(0.0f, vl);
    for (int64_t r = 0; r < nrec; ++r) {
      const uint8_t* rec = blk + r * rec_bytes;
      for (int sub = 0; sub < Fmt::kSubs; ++sub) {
        const int64_t g = r * Fmt::kSubs + sub;
        const vfloat32m8_t gs = block_sub_dot_m8<P, F>(rec, nb, j, sub, xr.x + g * Fmt::kSubRows, vl);
        // In two m4 halves, as the INT4 kernel: whole m8 scale and offset temporaries
        // would make the compiler spill the accumulator.
        const float xsum = xr.group_sums[g];
        acc = __riscv_vset_v_f32m4_f32m8(acc, 0,
                                         block_combine_m4<F>(__riscv_vget_v_f32m8_f32m4(acc, 0),
                                                             __riscv_vget_v_f32m8_f32m4(gs, 0), rec, nb, j, sub, xsum, vl0));
        if (vl1)
          acc = __riscv_vset_v_f32m4_f32m8(
              acc, 1,
              block_combine_m4<F>(__riscv_vget_v_f32m8_f32m4(acc, 1), __riscv_vget_v_f32m8_f32m4(gs, 1), rec, nb,
                                  j + int64_t(vl0), sub, xsum, vl1));
      }
    }
    return acc;
  });
}

template <class P, DType F>
inline Status gemv_block_quant_1xm8(const LinearOperands& a) {
  constexpr int64_t sub = BlockFmt<F>::kSubRows;
  const int64_t G = a.K / sub;
  return quant_gemv_rows(a, quant_x_scratch_floats(a.K, G), true, [&](const uint16_t* xb, float* s, void* y) {
    gemv_block_quant_row<P, F>(a, prepare_quant_x<P>(xb, a.K, sub, G, s), y);
  });
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
