// Prefill / batched GEMM with a packed INT8 or INT4 weight, M >= 2.
//
// Kernel gemm_{int8,int4}_packed_4xm4: X is converted to fp32 panels [k][4] once per call
// (as in the BF16 GEMM). For every column chunk (vl <= VLMAX(e32, m4)) and group, the
// group's scales (and zero points) are loaded once into registers; then every K row is
// loaded, widened to fp32 and dequantized in registers ((q - z) * s, exact in fp32) and multiplied into up to 4 rows of accumulators. The dequantization is paid
// once per K row and shared by the 4 rows.
// Registers: 4 x 4 accumulators + 4 scales + 4 zero points x scales + 4 weights + the
// loaded and unpacked bytes (1 + 1 + 2) = 32.
// A 6-row tile like the BF16 one would need 38.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/quant_packing.h"
#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/epilogue.h"
#include "rvv_inductor/rvv/gemm_tile_bf16.h"
#include "rvv_inductor/rvv/quant_widen.h"
#include "rvv_inductor/scratch.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

constexpr int kQuantGemmMR = 4;

// One group of one column chunk for MR rows: c_r += sum_k ap[k][r] * (q[k] - z) * s.
template <int MR, DType kFormat>
inline void gemm_quant_group_m4(const float* ap, const uint8_t* d, int64_t nb, int64_t rows, vfloat32m4_t s,
                                vfloat32m4_t z, size_t vl, vfloat32m4_t& c0, vfloat32m4_t& c1, vfloat32m4_t& c2,
                                vfloat32m4_t& c3) {
  auto fma_rows = [&](vfloat32m4_t w, const float* a) {
    c0 = __riscv_vfmacc_vf_f32m4(c0, a[0], w, vl);
    if constexpr (MR > 1) c1 = __riscv_vfmacc_vf_f32m4(c1, a[1], w, vl);
    if constexpr (MR > 2) c2 = __riscv_vfmacc_vf_f32m4(c2, a[2], w, vl);
    if constexpr (MR > 3) c3 = __riscv_vfmacc_vf_f32m4(c3, a[3], w, vl);
  };
  if constexpr (kFormat == DType::kInt8) {
    const int8_t* w = reinterpret_cast<const int8_t*>(d);
    for (int64_t k = 0; k < rows; ++k, w += nb, ap += MR) {
      const vfloat32m4_t f = __riscv_vfwcvt_f_x_v_f32m4(__riscv_vsext_vf2_i16m2(__riscv_vle8_v_i8m1(w, vl), vl), vl);
      fma_rows(__riscv_vfmul_vv_f32m4(f, s, vl), ap);
    }
  } else {
    // z holds z * s here: (q - z) * s = q * s - z * s in one fused vfmsub. q * s and z * s
    // are exact in fp32 (a 4-bit integer times a 16-bit scale) and so is their difference
    // (it is (q - z) * s), so the result is the exact dequantized weight. One register
    // group fewer than vfsub + vfmul, which is what keeps the 4-row tile from spilling.
    auto row = [&](vuint8m1_t q, const float* a) {
      const vfloat32m4_t f = __riscv_vfwcvt_f_xu_v_f32m4(__riscv_vzext_vf2_u16m2(q, vl), vl);
      fma_rows(__riscv_vfmsub_vv_f32m4(f, s, z, vl), a);
    };
    int64_t k = 0;
    for (; k + 2 <= rows; k += 2, d += nb, ap += 2 * MR) {
      const vuint8m1_t v = __riscv_vle8_v_u8m1(d, vl);
      row(__riscv_vand_vx_u8m1(v, 0x0F, vl), ap);
      row(__riscv_vsrl_vx_u8m1(v, 4, vl), ap + MR);
    }
    if (k < rows) row(__riscv_vand_vx_u8m1(__riscv_vle8_v_u8m1(d, vl), 0x0F, vl), ap);
  }
}

template <int MR, DType kFormat>
inline void gemm_quant_tile(const LinearOperands& a, const float* ap, const uint8_t* blk, int64_t j, size_t vl,
                            int64_t m0, int64_t n) {
  const PackedLayout& l = *a.layout;
  const QuantSpec q = quant_spec_of(l);
  const bool f16_scales = q.scale_dtype == DType::kF16;
  const int64_t K = a.K, nb = a.nb, gr = quant_group_rows(q, K), G = quant_num_groups(q, K);
  const int64_t full = quant_group_bytes(q, nb, gr), zoff = quant_zeros_offset(nb), doff = quant_data_offset(q, nb);
  const vfloat32m4_t bias = bias_m4<Bf16Soft>(a.bias, a.bias_dtype, n, vl);
  vfloat32m4_t c0 = bias, c1 = bias, c2 = bias, c3 = bias;
  for (int64_t g = 0; g < G; ++g) {
    const uint8_t* rec = blk + g * full;
    const int64_t k0 = g * gr, rows = K - k0 < gr ? K - k0 : gr;
    const vfloat32m4_t s = load_scales_m4(reinterpret_cast<const uint16_t*>(rec) + j, f16_scales, vl);
    // INT4: z * s (exact: a 4-bit integer times a 16-bit scale).
    vfloat32m4_t z = __riscv_vfmul_vf_f32m4(s, float(implicit_zero(kFormat)), vl);
    if (kFormat == DType::kInt4 && q.zero_points)
      z = __riscv_vfmul_vv_f32m4(
          __riscv_vfwcvt_f_xu_v_f32m4(__riscv_vzext_vf2_u16m2(__riscv_vle8_v_u8m1(rec + zoff + j, vl), vl), vl), s, vl);
    gemm_quant_group_m4<MR, kFormat>(ap + k0 * MR, rec + doff + j, nb, rows, s, z, vl, c0, c1, c2, c3);
  }
  const int64_t out0 = m0 * a.ldy + n;
  store_out<Bf16Soft>(a.y, a.y_dtype, out0, c0, vl);
  if constexpr (MR > 1) store_out<Bf16Soft>(a.y, a.y_dtype, out0 + a.ldy, c1, vl);
  if constexpr (MR > 2) store_out<Bf16Soft>(a.y, a.y_dtype, out0 + 2 * a.ldy, c2, vl);
  if constexpr (MR > 3) store_out<Bf16Soft>(a.y, a.y_dtype, out0 + 3 * a.ldy, c3, vl);
}

template <DType kFormat>
inline Status gemm_quant_packed_4xm4(const LinearOperands& a) {
  const int64_t M = a.M, K = a.K, nb = a.nb;
  const QuantSpec q = quant_spec_of(*a.layout);
  const int64_t block_bytes = quant_block_bytes(q, K, nb);
  F32Scratch<1024> scratch;
  float* xp = scratch.get(a.scratch, M * K);
  if (!xp) return Status::kNoMemory;
  pack_a_panels_f32<Bf16Soft>(a.x, a.ldx, M, K, kQuantGemmMR, xp);
  const uint8_t* base = static_cast<const uint8_t*>(a.w);
  for (int64_t b = a.block_begin; b < a.block_end; ++b) {
    const int64_t n0 = b * nb;
    const int64_t cols = a.N - n0 < nb ? a.N - n0 : nb;
    const uint8_t* blk = base + b * block_bytes;
    for (int64_t j = 0; j < cols;) {
      const size_t vl = __riscv_vsetvl_e32m4(size_t(cols - j));
      for (int64_t m0 = 0; m0 < M; m0 += kQuantGemmMR) {
        const float* ap = xp + m0 * K;
        switch (M - m0 < kQuantGemmMR ? M - m0 : kQuantGemmMR) {
          case 4: gemm_quant_tile<4, kFormat>(a, ap, blk, j, vl, m0, n0 + j); break;
          case 3: gemm_quant_tile<3, kFormat>(a, ap, blk, j, vl, m0, n0 + j); break;
          case 2: gemm_quant_tile<2, kFormat>(a, ap, blk, j, vl, m0, n0 + j); break;
          default: gemm_quant_tile<1, kFormat>(a, ap, blk, j, vl, m0, n0 + j); break;
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
