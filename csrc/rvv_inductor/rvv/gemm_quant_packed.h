// Prefill / batched GEMM with a packed INT8 or INT4 weight, M >= 2.
//
// Kernel gemm_{int8,int4}_packed_4xm4. The register tile: for a column chunk (vl <=
// VLMAX(e32, m4)) and a group, the group's scales (and zero points) are loaded once into
// registers; then every K row is loaded, widened to fp32 and dequantized in registers
// ((q - z) * s, exact in fp32) and multiplied into up to 4 rows of accumulators. The
// dequantization is paid once per K row and shared by the 4 rows.
// Registers: 4 x 4 accumulators + 4 scales + 4 zero points x scales + 4 weights + the
// loaded and unpacked bytes (1 + 1 + 2) = 32. A 6-row tile like the BF16 one would need 38.
//
// Cache blocking (quant_gemm_blocking), Goto's loop order with the packed weight as B:
//   column groups of NC columns (whole blocks) > row blocks of MC rows > K blocks of KC rows
//   > the blocks' column chunks > 4-row tiles.
// The MC x KC activations are converted to fp32 panels once per column group and reused
// by every chunk of it from cache; a chunk's KC weight rows are reused by the MC / 4 tiles
// from L1; the MC x NC fp32 accumulators stay in cache across the K blocks. The unblocked
// loop (every chunk over all M and all K) re-read the whole fp32 X once per 32 columns:
// at M = 256, K = 8960 that is 9.2 MB per chunk, ~55 MB of DRAM traffic per thread for a
// 0.9 MB weight slice.
// Blocking does not change the result: each output is still summed over k in order, from
// the bias, and a partial sum passes through memory as the fp32 it is.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/quant_packing.h"
#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/gemm_block_quant.h"
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

// Cache block sizes. The K1's L1D is 32 KB per core and its L2 512 KB per 4-core cluster,
// which its 4 cores share (the activation blocks they read are the same lines). Budgets:
// the MC x KC fp32 activation block and the MC x NC fp32 accumulators 64 KB each, and the
// KC x NC weight slice that streams through between two visits of an accumulator at most
// 128 KB, so the accumulators are not evicted by it. MC = 64 and NC = 256 balance what is
// re-read from DRAM: the weight once per row block (1/MC of a weight byte per row)
// against the bf16 activations once per column group (2/NC bytes per column). When the
// whole K of a row block fits the activation budget there are no K blocks, no
// accumulators, and one column group: each activation is converted once.
struct QuantGemmBlocking {
  int64_t mc;         // rows per row block, a multiple of kQuantGemmMR (or all M)
  int64_t kc;         // K rows per K block: even (INT4 row pairs), a multiple of the group
                      // rows when a group is shorter; K: no K blocks
  int64_t nc_blocks;  // packed blocks per column group
};

inline QuantGemmBlocking quant_gemm_blocking(int64_t M, int64_t K, int64_t nb, int64_t group_rows, int weight_bits) {
  constexpr int64_t kXFloats = 16384, kAccFloats = 16384, kSliceBytes = 131072, kMC = 64;
  constexpr int64_t kAllBlocks = int64_t(1) << 40;
  QuantGemmBlocking bk;
  bk.mc = M < kMC ? M : kMC;
  int64_t kc = kXFloats / bk.mc;
  if (kc >= K) {
    bk.kc = K, bk.nc_blocks = kAllBlocks;
    return bk;
  }
  bk.kc = group_rows <= kc ? kc - kc % group_rows : kc & ~int64_t(1);
  const int64_t nbw = nb > 0 ? nb : 1;
  int64_t ncb = kAccFloats / bk.mc / nbw;
  const int64_t slice = kSliceBytes * 8 / (bk.kc * weight_bits) / nbw;
  if (slice < ncb) ncb = slice;
  bk.nc_blocks = ncb > 1 ? ncb : 1;
  return bk;
}

// Rows [k0, k1) of one column chunk for MR rows, into c0..c3: the groups overlapping the
// range, each with its scales. ap: the rows' fp32 panel from row k0, [k][MR].
template <int MR, DType kFormat>
inline void gemm_quant_rows(const LinearOperands& a, const float* ap, const uint8_t* blk, int64_t j, size_t vl,
                            int64_t k0, int64_t k1, vfloat32m4_t& c0, vfloat32m4_t& c1, vfloat32m4_t& c2,
                            vfloat32m4_t& c3) {
  const PackedLayout& l = *a.layout;
  const QuantSpec q = quant_spec_of(l);
  const bool f16_scales = q.scale_dtype == DType::kF16;
  const int64_t K = a.K, nb = a.nb, gr = quant_group_rows(q, K);
  const int64_t full = quant_group_bytes(q, nb, gr), zoff = quant_zeros_offset(nb), doff = quant_data_offset(q, nb);
  for (int64_t g = k0 / gr; g * gr < k1; ++g) {
    const uint8_t* rec = blk + g * full;
    const int64_t g0 = g * gr, r0 = k0 > g0 ? k0 - g0 : 0;  // first row inside the group (even)
    const int64_t g1 = g0 + gr < k1 ? g0 + gr : k1;
    const vfloat32m4_t s = load_scales_m4(reinterpret_cast<const uint16_t*>(rec) + j, f16_scales, vl);
    // INT4: z * s (exact: a 4-bit integer times a 16-bit scale).
    vfloat32m4_t z = __riscv_vfmul_vf_f32m4(s, float(implicit_zero(kFormat)), vl);
    if (kFormat == DType::kInt4 && q.zero_points)
      z = __riscv_vfmul_vv_f32m4(
          __riscv_vfwcvt_f_xu_v_f32m4(__riscv_vzext_vf2_u16m2(__riscv_vle8_v_u8m1(rec + zoff + j, vl), vl), vl), s, vl);
    const int64_t row_bytes = kFormat == DType::kInt4 ? r0 / 2 * nb : r0 * nb;
    gemm_quant_group_m4<MR, kFormat>(ap + (g0 + r0 - k0) * MR, rec + doff + j + row_bytes, nb, g1 - g0 - r0, s, z,
                                     vl, c0, c1, c2, c3);
  }
}

// One MR x vl tile over K rows [k0, k1). It starts from the bias when k0 == 0, else from
// the partial sums in acc (row stride ldacc), and ends in Y when k1 == K, else in acc.
template <int MR, DType kFormat>
inline void gemm_quant_tile(const LinearOperands& a, const float* ap, const uint8_t* blk, int64_t j, size_t vl,
                            int64_t m0, int64_t n, int64_t k0, int64_t k1, float* acc, int64_t ldacc) {
  vfloat32m4_t c0, c1, c2, c3;
  if (k0 == 0) {
    c0 = c1 = c2 = c3 = bias_m4<Bf16Soft>(a.bias, a.bias_dtype, n, vl);
  } else {
    c0 = c1 = c2 = c3 = __riscv_vle32_v_f32m4(acc, vl);
    if constexpr (MR > 1) c1 = __riscv_vle32_v_f32m4(acc + ldacc, vl);
    if constexpr (MR > 2) c2 = __riscv_vle32_v_f32m4(acc + 2 * ldacc, vl);
    if constexpr (MR > 3) c3 = __riscv_vle32_v_f32m4(acc + 3 * ldacc, vl);
  }
  if constexpr (is_block_format(kFormat))
    gemm_block_rows<MR, kFormat>(a, ap, blk, j, vl, k0, k1, c0, c1, c2, c3);
  else
    gemm_quant_rows<MR, kFormat>(a, ap, blk, j, vl, k0, k1, c0, c1, c2, c3);
  if (k1 < a.K) {
    __riscv_vse32_v_f32m4(acc, c0, vl);
    if constexpr (MR > 1) __riscv_vse32_v_f32m4(acc + ldacc, c1, vl);
    if constexpr (MR > 2) __riscv_vse32_v_f32m4(acc + 2 * ldacc, c2, vl);
    if constexpr (MR > 3) __riscv_vse32_v_f32m4(acc + 3 * ldacc, c3, vl);
    return;
  }
  const int64_t out0 = m0 * a.ldy + n;
  store_out<Bf16Soft>(a.y, a.y_dtype, out0, c0, vl);
  if constexpr (MR > 1) store_out<Bf16Soft>(a.y, a.y_dtype, out0 + a.ldy, c1, vl);
  if constexpr (MR > 2) store_out<Bf16Soft>(a.y, a.y_dtype, out0 + 2 * a.ldy, c2, vl);
  if constexpr (MR > 3) store_out<Bf16Soft>(a.y, a.y_dtype, out0 + 3 * a.ldy, c3, vl);
}

// The kernel with explicit block sizes (tests force small ones to reach every boundary).
template <DType kFormat>
inline Status gemm_quant_packed_blocked(const LinearOperands& a, const QuantGemmBlocking& bk) {
  const int64_t M = a.M, K = a.K, nb = a.nb;
  const QuantSpec q = quant_spec_of(*a.layout);
  const int64_t block_bytes = is_block_format(kFormat) ? K / weight_format(kFormat)->super_rows *
                                                             block_record_bytes(kFormat, nb)
                                                       : quant_block_bytes(q, K, nb);
  const int64_t mc = bk.mc, kc = bk.kc < K ? bk.kc : K, ncb = bk.nc_blocks;
  // A K block must start on an INT4 row pair; a row block holds whole tiles.
  if (mc < 1 || ncb < 1 || kc < 1 || (kc < K && kc % 2) || (mc < M && mc % kQuantGemmMR)) return Status::kBadShape;
  // A block format's K block holds whole sub-blocks (their scales are per sub-block).
  if constexpr (is_block_format(kFormat))
    if (kc < K && kc % weight_format(kFormat)->block_rows) return Status::kBadShape;
  // The activation block, then (with K blocks) the partial sums of one row block and
  // column group: mc x kc + mc x ncb * nb floats, 128 KB at most with the default sizes.
  const int64_t ldacc = ncb * nb, x_floats = mc * kc, acc_floats = kc < K ? mc * ldacc : 0;
  F32Scratch<1024> scratch;
  float* xb = scratch.get(a.scratch && a.scratch_floats >= x_floats + acc_floats ? a.scratch : nullptr,
                          x_floats + acc_floats);
  if (!xb) return Status::kNoMemory;
  float* acc = xb + x_floats;
  const uint8_t* base = static_cast<const uint8_t*>(a.w);
  for (int64_t bg = a.block_begin; bg < a.block_end; bg += ncb) {
    const int64_t bg_end = bg + ncb < a.block_end ? bg + ncb : a.block_end;
    for (int64_t mb = 0; mb < M; mb += mc) {
      const int64_t mb_end = mb + mc < M ? mb + mc : M;
      for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t k1 = k0 + kc < K ? k0 + kc : K, kn = k1 - k0;
        // The block's rows as fp32 panels of 4 rows, [k][rows], the panel of row m at
        // xb + (m - mb) * kn.
        for (int64_t m0 = mb; m0 < mb_end; m0 += kQuantGemmMR) {
          const int rows = int(mb_end - m0 < kQuantGemmMR ? mb_end - m0 : kQuantGemmMR);
          pack_a_panel_f32<Bf16Soft>(a.x + m0 * a.ldx, a.ldx, rows, k0, kn, xb + (m0 - mb) * kn);
        }
        for (int64_t b = bg; b < bg_end; ++b) {
          const int64_t n0 = b * nb;
          const int64_t cols = a.N - n0 < nb ? a.N - n0 : nb;
          const uint8_t* blk = base + b * block_bytes;
          for (int64_t j = 0; j < cols;) {
            const size_t vl = __riscv_vsetvl_e32m4(size_t(cols - j));
            for (int64_t m0 = mb; m0 < mb_end; m0 += kQuantGemmMR) {
              const float* ap = xb + (m0 - mb) * kn;
              // Partial sums only with K blocks (else acc is empty and ldacc meaningless).
              float* at = kc < K ? acc + (m0 - mb) * ldacc + (b - bg) * nb + j : nullptr;
              switch (mb_end - m0 < kQuantGemmMR ? mb_end - m0 : kQuantGemmMR) {
                case 4: gemm_quant_tile<4, kFormat>(a, ap, blk, j, vl, m0, n0 + j, k0, k1, at, ldacc); break;
                case 3: gemm_quant_tile<3, kFormat>(a, ap, blk, j, vl, m0, n0 + j, k0, k1, at, ldacc); break;
                case 2: gemm_quant_tile<2, kFormat>(a, ap, blk, j, vl, m0, n0 + j, k0, k1, at, ldacc); break;
                default: gemm_quant_tile<1, kFormat>(a, ap, blk, j, vl, m0, n0 + j, k0, k1, at, ldacc); break;
              }
            }
            j += int64_t(vl);
          }
        }
      }
    }
  }
  return Status::kOk;
}

// Any packed quantized format: INT8, INT4 and the GGUF block formats (K blocks then hold
// whole sub-blocks).
template <DType kFormat>
inline Status gemm_quant_packed_4xm4(const LinearOperands& a) {
  const QuantSpec q = quant_spec_of(*a.layout);
  constexpr const WeightFormatTraits* t = weight_format(kFormat);
  const int64_t group_rows = t->block_rows > 0 ? t->block_rows : quant_group_rows(q, a.K);
  return gemm_quant_packed_blocked<kFormat>(a, quant_gemm_blocking(a.M, a.K, a.nb, group_rows, t->bits));
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
