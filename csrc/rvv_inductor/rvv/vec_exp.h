// exp(x) on FP32 vectors: x = n ln2 + r with |r| <= ln2 / 2, e^r by Cephes' expf
// polynomial (~1-2 ulp over the normal range), 2^n built in the exponent bits.
// exp_f32m2 is the general one (Inductor's Vectorized<float>::exp, inductor_vec_math.h):
// +inf -> +inf, NaN -> NaN, x > 88.72 -> +inf, and x < -87.33 (where e^x is below FLT_MIN)
// -> +0, so exp(-inf) = 0 as softmax needs. The attention kernel's softmax uses it too.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

struct ExpConst {
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kLn2Hi = 0.693359375f;  // ln2 = hi + lo, hi exact in few bits
  static constexpr float kLn2Lo = -2.12194440e-4f;
  static constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                         kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
  static constexpr float kMin = -87.33654475f;  // ln(FLT_MIN): below it the result is flushed to 0
  static constexpr float kMax = 88.72283905f;   // ln(FLT_MAX): above it the result is +inf
};

inline vfloat32m2_t exp_f32m2(vfloat32m2_t x, size_t vl) {
  using C = ExpConst;
  const vbool16_t nan = __riscv_vmfne_vv_f32m2_b16(x, x, vl);
  const vbool16_t tiny = __riscv_vmflt_vf_f32m2_b16(x, C::kMin, vl);
  const vbool16_t huge = __riscv_vmfgt_vf_f32m2_b16(x, C::kMax, vl);
  const vfloat32m2_t xc = __riscv_vfmin_vf_f32m2(__riscv_vfmax_vf_f32m2(x, C::kMin, vl), C::kMax, vl);
  const vint32m2_t n = __riscv_vfcvt_x_f_v_i32m2(__riscv_vfmul_vf_f32m2(xc, C::kLog2e, vl), vl);
  const vfloat32m2_t nf = __riscv_vfcvt_f_x_v_f32m2(n, vl);
  vfloat32m2_t r = __riscv_vfnmsac_vf_f32m2(xc, C::kLn2Hi, nf, vl);
  r = __riscv_vfnmsac_vf_f32m2(r, C::kLn2Lo, nf, vl);
  vfloat32m2_t p = __riscv_vfmv_v_f_f32m2(C::kP0, vl);
  p = __riscv_vfadd_vf_f32m2(__riscv_vfmul_vv_f32m2(p, r, vl), C::kP1, vl);
  p = __riscv_vfadd_vf_f32m2(__riscv_vfmul_vv_f32m2(p, r, vl), C::kP2, vl);
  p = __riscv_vfadd_vf_f32m2(__riscv_vfmul_vv_f32m2(p, r, vl), C::kP3, vl);
  p = __riscv_vfadd_vf_f32m2(__riscv_vfmul_vv_f32m2(p, r, vl), C::kP4, vl);
  p = __riscv_vfadd_vf_f32m2(__riscv_vfmul_vv_f32m2(p, r, vl), C::kP5, vl);
  p = __riscv_vfmadd_vv_f32m2(p, __riscv_vfmul_vv_f32m2(r, r, vl), __riscv_vfadd_vf_f32m2(r, 1.0f, vl), vl);
  // 2^n in two halves: n reaches 128 at kMax, one past the largest exponent.
  const vint32m2_t n1 = __riscv_vsra_vx_i32m2(n, 1, vl);
  const vint32m2_t n2 = __riscv_vsub_vv_i32m2(n, n1, vl);
  const vfloat32m2_t s1 = __riscv_vreinterpret_v_i32m2_f32m2(__riscv_vsll_vx_i32m2(__riscv_vadd_vx_i32m2(n1, 127, vl), 23, vl));
  const vfloat32m2_t s2 = __riscv_vreinterpret_v_i32m2_f32m2(__riscv_vsll_vx_i32m2(__riscv_vadd_vx_i32m2(n2, 127, vl), 23, vl));
  vfloat32m2_t y = __riscv_vfmul_vv_f32m2(__riscv_vfmul_vv_f32m2(p, s1, vl), s2, vl);
  y = __riscv_vfmerge_vfm_f32m2(y, 0.0f, tiny, vl);
  y = __riscv_vfmerge_vfm_f32m2(y, __builtin_inff(), huge, vl);
  return __riscv_vmerge_vvm_f32m2(y, x, nan, vl);  // NaN in, the same NaN out
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE

#endif  // RVV_INDUCTOR_HAS_RVV
