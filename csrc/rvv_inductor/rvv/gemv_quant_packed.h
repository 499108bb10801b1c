// Decode GEMV with a packed INT8 or INT4 weight (quant_packing.h):
//   y[n] = sum_g s[g, n] * (sum_{k in g} x[k] * q[k, n] - z[g, n] * sum_{k in g} x[k]) (+ bias[n])
//
// Kernels gemv_int8_packed_1xm8 / gemv_int4_packed_1xm8: one e32 LMUL=8 accumulator per
// block chunk (nb = 2 * vlenb columns = VLMAX), like the BF16 GEMV, plus one group
// accumulator. Per K row the inner loop is one scalar x load, one vector load of nb bytes
// (INT4: one load serves two rows, split by vand / vsrl), the int -> float widening of the
// arithmetic policy (quant_widen.h) and one multiply-add; two rows per iteration. At the
// end of a group the group sum is scaled into the accumulator with a vfmacc.vv, after
// subtracting the zero point times the group's x sum (INT4; INT8 is symmetric). The
// zero point is applied that way, per group, instead of per weight, because per weight it
// would cost one more vector operation on every row.
//
// Every weight byte, scale and zero point is read once per call; x (converted once per
// call to fp32, or to power-of-two-scaled fp16 for QuantF16) and its per-group sums are the
// only other memory traffic, ~4 / nb bytes per weight.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/quant_packing.h"
#include "rvv_inductor/ref/linear_ref.h"
#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/epilogue.h"
#include "rvv_inductor/rvv/quant_widen.h"
#include "rvv_inductor/scratch.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

// x row prepared for a quantized kernel: x converted to the policy's type (padded with one
// zero so an odd INT4 tail row multiplies 0), per-group sums of those values in fp32, and
// the factor the accumulator is multiplied by at the end (2^-e for scaled fp16).
template <class P>
struct QuantXRow {
  const typename P::XType* x;
  const float* group_sums;
  float out_scale;
};

// Scratch floats prepare_quant_x needs for K and G groups.
inline int64_t quant_x_scratch_floats(int64_t K, int64_t G) { return (K + 1) + (K + 2) / 2 + G + 1; }

template <class P>
inline QuantXRow<P> prepare_quant_x(const uint16_t* xb, int64_t K, int64_t gr, int64_t G, float* scratch) {
  float* xf = scratch;                 // K + 1 floats
  float* sums = scratch + (K + 1);     // G floats
  widen_bf16_row<Bf16Soft>(xb, xf, K);
  xf[K] = 0.0f;
  float scale = 1.0f;
  if constexpr (P::kScaledX) {
    // max|x| by a vector reduction.
    const size_t vlmax = __riscv_vsetvlmax_e32m8();
    vfloat32m8_t m = __riscv_vfmv_v_f_f32m8(0.0f, vlmax);
    for (int64_t k = 0; k < K;) {
      const size_t vl = __riscv_vsetvl_e32m8(size_t(K - k));
      m = __riscv_vfmax_vv_f32m8_tu(m, m, __riscv_vfabs_v_f32m8(__riscv_vle32_v_f32m8(xf + k, vl), vl), vl);
      k += int64_t(vl);
    }
    const float amax = __riscv_vfmv_f_s_f32m1_f32(
        __riscv_vfredmax_vs_f32m8_f32m1(m, __riscv_vfmv_s_f_f32m1(0.0f, 1), vlmax));
    scale = fp16_activation_scale(amax);
  }
  typename P::XType* xt;
  if constexpr (P::kScaledX) {
    xt = reinterpret_cast<typename P::XType*>(sums + G + 1);  // (K + 2) / 2 floats
    P::scale_x_row(xf, xt, K, scale);
  } else {
    xt = xf;
  }
  const vfloat32m1_t zero = __riscv_vfmv_s_f_f32m1(0.0f, 1);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t k0 = g * gr, k1 = K < k0 + gr ? K : k0 + gr;
    vfloat32m1_t s = zero;
    for (int64_t k = k0; k < k1;) {
      const size_t vl = __riscv_vsetvl_e32m8(size_t(k1 - k));
      s = __riscv_vfredusum_vs_f32m8_f32m1(__riscv_vle32_v_f32m8(xf + k, vl), s, vl);
      k += int64_t(vl);
    }
    sums[g] = __riscv_vfmv_f_s_f32m1_f32(s);
  }
  return QuantXRow<P>{xt, sums, 1.0f / scale};
}

// sum over `rows` (>= 1) K rows of x[k] * q[k, columns] for one group record's data.
template <class P, DType kFormat>
inline vfloat32m8_t quant_group_dot_m8(const uint8_t* d, int64_t nb, int64_t rows, const typename P::XType* x,
                                       size_t vl) {
  // Two rows per step; not unrolled further: the block accumulator (8 registers) stays
  // live across this loop, and a second set of converted rows would make the compiler
  // spill it.
  vfloat32m8_t acc;
  if constexpr (kFormat == DType::kInt8) {
    const int8_t* w = reinterpret_cast<const int8_t*>(d);
    if (rows == 1) return P::mul_i8(x[0], __riscv_vle8_v_i8m2(w, vl), vl);
    acc = P::mul2_i8(x, __riscv_vle8_v_i8m2(w, vl), __riscv_vle8_v_i8m2(w + nb, vl), vl);
    int64_t k = 2;
    w += 2 * nb;
    for (; k + 2 <= rows; k += 2, w += 2 * nb)
      acc = P::fma2_i8(acc, x + k, __riscv_vle8_v_i8m2(w, vl), __riscv_vle8_v_i8m2(w + nb, vl), vl);
    if (k < rows) acc = P::fma_i8(acc, x[k], __riscv_vle8_v_i8m2(w, vl), vl);
  } else {
    // An odd last row pairs with x[rows], the zero pad after x (only the last group can
    // have an odd row count); its high nibble is 0 as well.
    const int64_t pairs = (rows + 1) / 2;
    vuint8m2_t v = __riscv_vle8_v_u8m2(d, vl);
    acc = P::mul2_u4(x, __riscv_vand_vx_u8m2(v, 0x0F, vl), __riscv_vsrl_vx_u8m2(v, 4, vl), vl);
    d += nb;
    for (int64_t p = 1; p < pairs; ++p, d += nb) {
      v = __riscv_vle8_v_u8m2(d, vl);
      acc = P::fma2_u4(acc, x + 2 * p, __riscv_vand_vx_u8m2(v, 0x0F, vl), __riscv_vsrl_vx_u8m2(v, 4, vl), vl);
    }
  }
  return acc;
}

// acc + s * (gs - z * xsum) for vl <= VLMAX(e32, m4) columns: scales (bf16/f16 bits) at sc,
// INT4 zero points at zp when stored (else z = 8; INT8 has none).
template <DType kFormat>
inline vfloat32m4_t quant_combine_m4(vfloat32m4_t acc, vfloat32m4_t gs, const uint16_t* sc, const uint8_t* zp,
                                     bool zero_points, bool f16_scales, float xsum, size_t vl) {
  if constexpr (kFormat == DType::kInt4) {
    if (zero_points) {
      const vfloat32m4_t z =
          __riscv_vfwcvt_f_xu_v_f32m4(__riscv_vzext_vf2_u16m2(__riscv_vle8_v_u8m1(zp, vl), vl), vl);
      gs = __riscv_vfnmsac_vf_f32m4(gs, xsum, z, vl);
    } else {
      gs = __riscv_vfsub_vf_f32m4(gs, 8.0f * xsum, vl);
    }
  }
  return __riscv_vfmacc_vv_f32m4(acc, load_scales_m4(sc, f16_scales, vl), gs, vl);
}

// Walks the column chunks (vl <= VLMAX(e32, m8) columns) of a's block range for one row of
// x: chunk(blk, j, vl) returns the chunk's accumulator (blk: its block's packed bytes, of
// block_bytes each); this multiplies it by out_scale, adds the bias and stores it. Shared
// by every quantized GEMV (INT8/INT4 fp and int8-activation, the GGUF block formats).
template <class Chunk>
inline void quant_gemv_chunks(const LinearOperands& a, int64_t block_bytes, float out_scale, void* y,
                              const Chunk& chunk) {
  const uint8_t* base = static_cast<const uint8_t*>(a.w);
  for (int64_t b = a.block_begin; b < a.block_end; ++b) {
    const int64_t n0 = b * a.nb;
    const int64_t cols = a.N - n0 < a.nb ? a.N - n0 : a.nb;
    const uint8_t* blk = base + b * block_bytes;
    for (int64_t j = 0; j < cols;) {
      const size_t vl = __riscv_vsetvl_e32m8(size_t(cols - j));
      vfloat32m8_t acc = chunk(blk, j, vl);
      if (out_scale != 1.0f) acc = __riscv_vfmul_vf_f32m8(acc, out_scale, vl);
      if (a.bias) acc = __riscv_vfadd_vv_f32m8(acc, bias_m8<Bf16Soft>(a.bias, a.bias_dtype, n0 + j, vl), vl);
      store_out<Bf16Soft>(y, a.y_dtype, n0 + j, acc, vl);
      j += int64_t(vl);
    }
  }
}

// For every chunk and weight group, group_sum(data, k0, rows, vl) returns the group's sum
// of x * q over its columns; this adds s * (sum - z * group_sums[g]) into the chunk's
// accumulator. Shared by the fp and the int8-activation kernels, which differ only in
// group_sum.
template <DType kFormat, class GroupSum>
inline void quant_gemv_row(const LinearOperands& a, const float* group_sums, float out_scale, void* y,
                           const GroupSum& group_sum) {
  const PackedLayout& l = *a.layout;
  const QuantSpec q = quant_spec_of(l);
  const bool f16_scales = q.scale_dtype == DType::kF16;
  const int64_t K = a.K, nb = a.nb, gr = quant_group_rows(q, K), G = quant_num_groups(q, K);
  const int64_t full = quant_group_bytes(q, nb, gr);
  const int64_t zoff = quant_zeros_offset(nb), doff = quant_data_offset(q, nb);
  quant_gemv_chunks(a, quant_block_bytes(q, K, nb), out_scale, y, [&](const uint8_t* blk, int64_t j, size_t vl) {
    const size_t vlmax4 = __riscv_vsetvlmax_e32m4();
    const size_t vl0 = vl < vlmax4 ? vl : vlmax4, vl1 = vl - vl0;
    vfloat32m8_t acc = __riscv_vfmv_v_f_f32m8(0.0f, vl);
    for (int64_t g = 0; g < G; ++g) {
      const uint8_t* rec = blk + g * full;
      const int64_t k0 = g * gr, rows = K - k0 < gr ? K - k0 : gr;
      const vfloat32m8_t gs = group_sum(rec + doff + j, k0, rows, vl);
      // acc += s * (gs - z * sum(x)), in two m4 halves: with whole m8 temporaries the
      // scale and zero point would need 16 more registers and the compiler spills acc.
      const float xsum = group_sums[g];
      const uint16_t* sc = reinterpret_cast<const uint16_t*>(rec) + j;
      const uint8_t* zp = rec + zoff + j;
      acc = __riscv_vset_v_f32m4_f32m8(
          acc, 0, quant_combine_m4<kFormat>(__riscv_vget_v_f32m8_f32m4(acc, 0), __riscv_vget_v_f32m8_f32m4(gs, 0), sc, zp,
                                            q.zero_points, f16_scales, xsum, vl0));
      if (vl1)
        acc = __riscv_vset_v_f32m4_f32m8(
            acc, 1, quant_combine_m4<kFormat>(__riscv_vget_v_f32m8_f32m4(acc, 1), __riscv_vget_v_f32m8_f32m4(gs, 1),
                                              sc + vl0, zp + vl0, q.zero_points, f16_scales, xsum, vl1));
    }
    return acc;
  });
}

template <class P, DType kFormat>
inline void gemv_quant_packed_row(const LinearOperands& a, const QuantXRow<P>& xr, void* y) {
  const int64_t nb = a.nb;
  quant_gemv_row<kFormat>(a, xr.group_sums, xr.out_scale, y,
                          [&](const uint8_t* d, int64_t k0, int64_t rows, size_t vl) {
                            return quant_group_dot_m8<P, kFormat>(d, nb, rows, xr.x + k0, vl);
                          });
}

// Row m of a through the scalar reference (ref/linear_ref.h), for rows with Inf or NaN.
inline Status quant_row_reference(const LinearOperands& a, int64_t m, float* scratch) {
  LinearOperands r = a;
  r.M = 1;
  r.x = a.x + m * a.ldx;
  r.y = static_cast<char*>(a.y) + size_t(m * a.ldy) * (a.y_dtype == DType::kBF16 ? sizeof(uint16_t) : sizeof(float));
  r.scratch = scratch;
  return is_block_format(DType(a.layout->dtype)) ? ref::linear_block_quant_ref(r) : ref::linear_quant_packed_ref(r);
}

// Runs row(x_row, scratch, y_row) for each of the M rows (each re-reading the weight: meant
// for M == 1), with scratch_floats of scratch; rows holding Inf or NaN go to the scalar
// reference instead when nonfinite_to_reference is set (see row_has_nonfinite).
template <class RowFn>
inline Status quant_gemv_rows(const LinearOperands& a, int64_t scratch_floats, bool nonfinite_to_reference,
                              const RowFn& row) {
  F32Scratch<2048> scratch;
  float* s = scratch.get(a.scratch, scratch_floats);
  if (!s) return Status::kNoMemory;
  const size_t ysize = a.y_dtype == DType::kBF16 ? sizeof(uint16_t) : sizeof(float);
  for (int64_t m = 0; m < a.M; ++m) {
    const uint16_t* xb = a.x + m * a.ldx;
    if (nonfinite_to_reference && row_has_nonfinite(xb, a.K)) {
      const Status st = quant_row_reference(a, m, s);
      if (st != Status::kOk) return st;
      continue;
    }
    row(xb, s, static_cast<char*>(a.y) + size_t(m * a.ldy) * ysize);
  }
  return Status::kOk;
}

template <class P, DType kFormat>
inline Status gemv_quant_packed_1xm8(const LinearOperands& a) {
  const QuantSpec q = quant_spec_of(*a.layout);
  const int64_t gr = quant_group_rows(q, a.K), G = quant_num_groups(q, a.K);
  // INT8 has no zero-point correction, so Inf and NaN propagate as IEEE says by themselves.
  return quant_gemv_rows(a, quant_x_scratch_floats(a.K, G), kFormat == DType::kInt4,
                         [&](const uint16_t* xb, float* s, void* y) {
                           gemv_quant_packed_row<P, kFormat>(a, prepare_quant_x<P>(xb, a.K, gr, G, s), y);
                         });
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
