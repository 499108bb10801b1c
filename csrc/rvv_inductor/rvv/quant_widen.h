// How the quantized kernels turn stored integers into multiply-adds: two interchangeable
// arithmetic policies, one per ISA variant of the kernel table.
//
//   QuantF32  any RVV 1.0 CPU: int -> fp32 (vsext/vzext + vfwcvt), vfmacc.vf in fp32.
//   QuantF16  Zvfh (the K1 has it): int8/uint4 -> fp16 in one vfwcvt, then vfwmacc.vf,
//             fp16 x fp16 -> fp32 accumulate. Half the conversion work of QuantF32: the
//             widening multiply-add does the second doubling.
//
// Why QuantF16 is as accurate as QuantF32: the weights are small integers (exact in fp16);
// the activation row is scaled by a power of two 2^e so that max|x| lands in [2^14, 2^15)
// and then converted to fp16. That is exact for every bf16 value of at least 2^-31 max|x|
// (bf16 has 8 significant bits, fp16 11; smaller values become fp16 subnormals or 0, off
// by at most 2^-25 in scaled units, i.e. 2^-39 max|x|). vfwmacc forms the fp16 x fp16
// product exactly in fp32 and accumulates in fp32, like vfmacc. The result is multiplied
// by 2^-e once at the end (exact). So both policies add the same fp32 accumulation error;
// QuantF16 adds at most 2^-39 * max|x| * sum|w| from the smallest activations.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

// Vector register shapes, fixed by SEW/LMUL = 4 so that one vl (VLMAX of e32 at m8 or m4)
// serves every step: bytes at m2 (m1), halves at m4 (m2), floats at m8 (m4).
struct QuantF32 {
  using XType = float;
  static constexpr bool kScaledX = false;
  // acc += x * q for one row of int8 weights.
  static vfloat32m8_t fma_i8(vfloat32m8_t acc, float x, vint8m2_t q, size_t vl) {
    return __riscv_vfmacc_vf_f32m8(acc, x, __riscv_vfwcvt_f_x_v_f32m8(__riscv_vsext_vf2_i16m4(q, vl), vl), vl);
  }
  // acc += x * q for one row of uint4 weights (already masked/shifted into bytes).
  static vfloat32m8_t fma_u4(vfloat32m8_t acc, float x, vuint8m2_t q, size_t vl) {
    return __riscv_vfmacc_vf_f32m8(acc, x, __riscv_vfwcvt_f_xu_v_f32m8(__riscv_vzext_vf2_u16m4(q, vl), vl), vl);
  }
  // Two rows: one after the other (an fp32 row is 8 registers; two would not fit).
  static vfloat32m8_t fma2_i8(vfloat32m8_t acc, const float* x, vint8m2_t q0, vint8m2_t q1, size_t vl) {
    return fma_i8(fma_i8(acc, x[0], q0, vl), x[1], q1, vl);
  }
  static vfloat32m8_t fma2_u4(vfloat32m8_t acc, const float* x, vuint8m2_t q0, vuint8m2_t q1, size_t vl) {
    return fma_u4(fma_u4(acc, x[0], q0, vl), x[1], q1, vl);
  }
  // The first row(s) of a group start the sum with a multiply: no zero vector to keep live.
  static vfloat32m8_t mul_i8(float x, vint8m2_t q, size_t vl) {
    return __riscv_vfmul_vf_f32m8(__riscv_vfwcvt_f_x_v_f32m8(__riscv_vsext_vf2_i16m4(q, vl), vl), x, vl);
  }
  static vfloat32m8_t mul2_i8(const float* x, vint8m2_t q0, vint8m2_t q1, size_t vl) {
    return fma_i8(mul_i8(x[0], q0, vl), x[1], q1, vl);
  }
  static vfloat32m8_t mul2_u4(const float* x, vuint8m2_t q0, vuint8m2_t q1, size_t vl) {
    const vfloat32m8_t a =
        __riscv_vfmul_vf_f32m8(__riscv_vfwcvt_f_xu_v_f32m8(__riscv_vzext_vf2_u16m4(q0, vl), vl), x[0], vl);
    return fma_u4(a, x[1], q1, vl);
  }
};

#if RVV_INDUCTOR_HAS_ZVFH
struct QuantF16 {
  using XType = _Float16;
  static constexpr bool kScaledX = true;
  static vfloat32m8_t fma_i8(vfloat32m8_t acc, _Float16 x, vint8m2_t q, size_t vl) {
    return __riscv_vfwmacc_vf_f32m8(acc, x, __riscv_vfwcvt_f_x_v_f16m4(q, vl), vl);
  }
  static vfloat32m8_t fma_u4(vfloat32m8_t acc, _Float16 x, vuint8m2_t q, size_t vl) {
    return __riscv_vfwmacc_vf_f32m8(acc, x, __riscv_vfwcvt_f_xu_v_f16m4(q, vl), vl);
  }
  // Two rows at once, conversions first: the byte-wide steps (load, unpack, vfwcvt) run at
  // SEW 8 and the multiply-adds at SEW 16, so ordering them by SEW needs one vsetvli pair
  // per two rows instead of per row. Registers: 2 x 4 converted + 8 group accumulator, with
  // the block accumulator (8) still live: 24 + the loaded bytes.
  static vfloat32m8_t fma2_i8(vfloat32m8_t acc, const _Float16* x, vint8m2_t q0, vint8m2_t q1, size_t vl) {
    const vfloat16m4_t h0 = __riscv_vfwcvt_f_x_v_f16m4(q0, vl), h1 = __riscv_vfwcvt_f_x_v_f16m4(q1, vl);
    return __riscv_vfwmacc_vf_f32m8(__riscv_vfwmacc_vf_f32m8(acc, x[0], h0, vl), x[1], h1, vl);
  }
  static vfloat32m8_t fma2_u4(vfloat32m8_t acc, const _Float16* x, vuint8m2_t q0, vuint8m2_t q1, size_t vl) {
    const vfloat16m4_t h0 = __riscv_vfwcvt_f_xu_v_f16m4(q0, vl), h1 = __riscv_vfwcvt_f_xu_v_f16m4(q1, vl);
    return __riscv_vfwmacc_vf_f32m8(__riscv_vfwmacc_vf_f32m8(acc, x[0], h0, vl), x[1], h1, vl);
  }
  // The first row(s) of a group start the sum with a widening multiply (exact, like the
  // multiply-add): a zero vector kept live instead costs 8 registers, and the compiler
  // then spills it and reloads it from the stack once per group.
  static vfloat32m8_t mul_i8(_Float16 x, vint8m2_t q, size_t vl) {
    return __riscv_vfwmul_vf_f32m8(__riscv_vfwcvt_f_x_v_f16m4(q, vl), x, vl);
  }
  static vfloat32m8_t mul2_i8(const _Float16* x, vint8m2_t q0, vint8m2_t q1, size_t vl) {
    const vfloat16m4_t h0 = __riscv_vfwcvt_f_x_v_f16m4(q0, vl), h1 = __riscv_vfwcvt_f_x_v_f16m4(q1, vl);
    return __riscv_vfwmacc_vf_f32m8(__riscv_vfwmul_vf_f32m8(h0, x[0], vl), x[1], h1, vl);
  }
  static vfloat32m8_t mul2_u4(const _Float16* x, vuint8m2_t q0, vuint8m2_t q1, size_t vl) {
    const vfloat16m4_t h0 = __riscv_vfwcvt_f_xu_v_f16m4(q0, vl), h1 = __riscv_vfwcvt_f_xu_v_f16m4(q1, vl);
    return __riscv_vfwmacc_vf_f32m8(__riscv_vfwmul_vf_f32m8(h0, x[0], vl), x[1], h1, vl);
  }
  // xt[k] = fp16(xf[k] * scale) for k < K, xt[K] = 0, and xf[k] = fp32(xt[k]) so that the
  // group sums are taken over exactly the values the kernel multiplies.
  static void scale_x_row(float* xf, _Float16* xt, int64_t K, float scale) {
    for (int64_t k = 0; k < K;) {
      const size_t vl = __riscv_vsetvl_e32m8(size_t(K - k));
      const vfloat32m8_t v = __riscv_vfmul_vf_f32m8(__riscv_vle32_v_f32m8(xf + k, vl), scale, vl);
      const vfloat16m4_t h = __riscv_vfncvt_f_f_w_f16m4(v, vl);
      __riscv_vse16_v_f16m4(xt + k, h, vl);
      __riscv_vse32_v_f32m8(xf + k, __riscv_vfwcvt_f_f_v_f32m8(h, vl), vl);
      k += int64_t(vl);
    }
    xt[K] = 0;
  }
};
#endif

// Group scales (bf16 or f16 bits) as fp32.
inline vfloat32m4_t load_scales_m4(const uint16_t* p, bool f16, size_t vl) {
  const vuint16m2_t h = __riscv_vle16_v_u16m2(p, vl);
  if (f16) {
#if RVV_INDUCTOR_HAS_ZVFH
    return __riscv_vfwcvt_f_f_v_f32m4(__riscv_vreinterpret_v_u16m2_f16m2(h), vl);
#else
    // Without Zvfh: rebuild the fp32 bits. (bits & 0x7FFF) << 13 read as an fp32 has the
    // f16 exponent field; multiplying by 2^112 rebiases it exactly, subnormals included.
    // Inf/NaN (f16 exponent 31) get the fp32 exponent 255 with the payload kept.
    const vuint32m4_t u = __riscv_vzext_vf2_u32m4(h, vl);
    const vuint32m4_t sign = __riscv_vsll_vx_u32m4(__riscv_vand_vx_u32m4(u, 0x8000u, vl), 16, vl);
    const vuint32m4_t mag = __riscv_vsll_vx_u32m4(__riscv_vand_vx_u32m4(u, 0x7FFFu, vl), 13, vl);
    vfloat32m4_t v = __riscv_vfmul_vf_f32m4(__riscv_vreinterpret_v_u32m4_f32m4(mag), 5.192296858534828e+33f, vl);
    const vbool8_t special = __riscv_vmsgeu_vx_u32m4_b8(mag, 0x0F800000u, vl);
    v = __riscv_vreinterpret_v_u32m4_f32m4(__riscv_vor_vx_u32m4_mu(
        special, __riscv_vreinterpret_v_f32m4_u32m4(v), __riscv_vadd_vx_u32m4(mag, 0x70000000u, vl), 0, vl));
    return __riscv_vreinterpret_v_u32m4_f32m4(__riscv_vor_vv_u32m4(__riscv_vreinterpret_v_f32m4_u32m4(v), sign, vl));
#endif
  }
  return __riscv_vreinterpret_v_u32m4_f32m4(__riscv_vsll_vx_u32m4(__riscv_vzext_vf2_u32m4(h, vl), 16, vl));
}

// True when bf16 row x[0, K) holds an Inf or NaN (exponent all ones). The GEMV kernels
// subtract the zero point per group (z * sum(x)), which would turn an Inf activation into
// Inf - Inf = NaN where IEEE arithmetic on the dequantized weights gives +-Inf, so such
// rows take the scalar reference instead (bad input: correct, not fast).
inline bool row_has_nonfinite(const uint16_t* x, int64_t K) {
  for (int64_t k = 0; k < K;) {
    const size_t vl = __riscv_vsetvl_e16m4(size_t(K - k));
    const vuint16m4_t h = __riscv_vand_vx_u16m4(__riscv_vle16_v_u16m4(x + k, vl), 0x7F80, vl);
    if (__riscv_vcpop_m_b4(__riscv_vmseq_vx_u16m4_b4(h, 0x7F80, vl), vl) != 0) return true;
    k += int64_t(vl);
  }
  return false;
}

// Power of two 2^e with max|x| * 2^e in [2^14, 2^15) (1 when max|x| is 0 or not finite).
inline float fp16_activation_scale(float amax) {
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0f;
  int ex;
  std::frexp(amax, &ex);  // amax = f * 2^ex, f in [0.5, 1)
  int e = 15 - ex;
  e = e < -100 ? -100 : e > 100 ? 100 : e;
  return std::ldexp(1.0f, e);
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
