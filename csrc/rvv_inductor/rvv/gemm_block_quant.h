// The GGUF block formats' rows for the quantized GEMM (gemm_quant_packed.h, M >= 2): the
// same register tile and cache blocking as INT4, with the weights of one column chunk
// dequantized in registers per K row, w = q * s + o in one fused multiply-add (q * s is
// exact, so the result is the file's weight exactly: block_quant.h), then multiplied into
// up to 4 rows of accumulators. The sub-block's s and o are decoded once per sub-block
// (block_quant_decode.h) and held in registers across its 32 (Q6_K: 16) rows.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/block_quant.h"
#include "rvv_inductor/rvv/block_quant_decode.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

// Rows [k0, k1) (whole sub-blocks) of one column chunk for MR rows, into c0..c3; ap: the
// rows' fp32 panel from row k0, [k][MR]; blk: the block's first record.
template <int MR, DType F>
inline void gemm_block_rows(const LinearOperands& a, const float* ap, const uint8_t* blk, int64_t j, size_t vl,
                            int64_t k0, int64_t k1, vfloat32m4_t& c0, vfloat32m4_t& c1, vfloat32m4_t& c2,
                            vfloat32m4_t& c3) {
  using Fmt = BlockFmt<F>;
  const int64_t nb = a.nb, rec_bytes = int64_t(Fmt::kRecordBytes) * nb;
  for (int64_t g = k0 / Fmt::kSubRows; g * Fmt::kSubRows < k1; ++g) {
    const int64_t row0 = g * Fmt::kSubRows;
    const uint8_t* rec = blk + (row0 / Fmt::kSuperRows) * rec_bytes;
    const int sub = int((row0 % Fmt::kSuperRows) / Fmt::kSubRows);
    vfloat32m4_t s, o;
    Fmt::params_m4(rec, nb, j, sub, vl, s, o);
    const float* ag = ap + (row0 - k0) * MR;
    auto row = [&](vuint8m1_t q, const float* x) {
      const vfloat32m4_t w =
          __riscv_vfmadd_vv_f32m4(__riscv_vfwcvt_f_xu_v_f32m4(__riscv_vzext_vf2_u16m2(q, vl), vl), s, o, vl);
      c0 = __riscv_vfmacc_vf_f32m4(c0, x[0], w, vl);
      if constexpr (MR > 1) c1 = __riscv_vfmacc_vf_f32m4(c1, x[1], w, vl);
      if constexpr (MR > 2) c2 = __riscv_vfmacc_vf_f32m4(c2, x[2], w, vl);
      if constexpr (MR > 3) c3 = __riscv_vfmacc_vf_f32m4(c3, x[3], w, vl);
    };
    Fmt::template for_pairs<vuint8m1_t>(rec, nb, j, sub, vl, [&](vuint8m1_t q0, vuint8m1_t q1, int i) {
      row(q0, ag + 2 * i * MR);
      row(q1, ag + (2 * i + 1) * MR);
    });
  }
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
