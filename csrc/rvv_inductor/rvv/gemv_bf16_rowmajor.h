// GEMV with a row-major weight W[N, K] (runtime weights that are not worth packing):
// y[n] = dot(x, W[n, :]) (+ bias[n]).
//
// Kernel gemv_bf16_rowmajor_4xm4: the dot products run along K, 4 weight rows at a time
// so each x vector load serves 4 rows: 4 accumulators x 4 + x 4 + loaded 2 + widened 4
// = 26 registers. Accumulators are vl-wide partial sums (tail-undisturbed, so a short
// last chunk keeps the other lanes), reduced once per row with vfredusum; the sum order
// differs from a sequential loop but stays within the same error bound.
// With Zvfbfwma, x stays bf16 and vfwmaccbf16.vv does widen + multiply-add in one step.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/bf16.h"
#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/scratch.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

// out[r] = sum_k x[k] * w[r * ldw + k] for r < NR. kWma: x is read as bf16 from xb and
// multiplied by vfwmaccbf16; otherwise as fp32 from xf, with the weight widened by Ops.
template <int NR, class Ops, bool kWma>
inline void dot_rows_m4(const float* xf, const uint16_t* xb, const uint16_t* w, int64_t ldw, int64_t K, float* out) {
  static_assert(NR >= 1 && NR <= 4, "rows");
  static_assert(!kWma || RVV_INDUCTOR_HAS_ZVFBFWMA, "vfwmaccbf16 needs a TU compiled with Zvfbfwma");
  const size_t vlmax = __riscv_vsetvlmax_e32m4();
  vfloat32m4_t a0 = __riscv_vfmv_v_f_f32m4(0.0f, vlmax);
  vfloat32m4_t a1 = a0, a2 = a0, a3 = a0;
  for (int64_t k = 0; k < K;) {
    const size_t vl = __riscv_vsetvl_e32m4(size_t(K - k));
#if RVV_INDUCTOR_HAS_ZVFBFWMA
    if constexpr (kWma) {
      const vbfloat16m2_t xv = __riscv_vreinterpret_v_u16m2_bf16m2(__riscv_vle16_v_u16m2(xb + k, vl));
      auto fma = [&](vfloat32m4_t acc, const uint16_t* row) {
        const vbfloat16m2_t wv = __riscv_vreinterpret_v_u16m2_bf16m2(__riscv_vle16_v_u16m2(row + k, vl));
        return __riscv_vfwmaccbf16_vv_f32m4_tu(acc, xv, wv, vl);
      };
      a0 = fma(a0, w);
      if constexpr (NR > 1) a1 = fma(a1, w + ldw);
      if constexpr (NR > 2) a2 = fma(a2, w + 2 * ldw);
      if constexpr (NR > 3) a3 = fma(a3, w + 3 * ldw);
    } else
#endif
    {
      const vfloat32m4_t xv = __riscv_vle32_v_f32m4(xf + k, vl);
      auto fma = [&](vfloat32m4_t acc, const uint16_t* row) {
        return __riscv_vfmacc_vv_f32m4_tu(acc, xv, Ops::load_m4(row + k, vl), vl);
      };
      a0 = fma(a0, w);
      if constexpr (NR > 1) a1 = fma(a1, w + ldw);
      if constexpr (NR > 2) a2 = fma(a2, w + 2 * ldw);
      if constexpr (NR > 3) a3 = fma(a3, w + 3 * ldw);
    }
    k += int64_t(vl);
  }
  const vfloat32m1_t zero = __riscv_vfmv_s_f_f32m1(0.0f, 1);
  auto sum = [&](vfloat32m4_t acc) { return __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m4_f32m1(acc, zero, vlmax)); };
  out[0] = sum(a0);
  if constexpr (NR > 1) out[1] = sum(a1);
  if constexpr (NR > 2) out[2] = sum(a2);
  if constexpr (NR > 3) out[3] = sum(a3);
  (void)xf;
  (void)xb;
}

template <class Ops, bool kWma>
inline Status gemv_bf16_rowmajor_4xm4(const LinearOperands& a) {
  F32Scratch<1024> scratch;
  float* xf = nullptr;
  if (!kWma) {
    xf = scratch.get(a.scratch, a.K);
    if (!xf) return Status::kNoMemory;
  }
  for (int64_t m = 0; m < a.M; ++m) {
    const uint16_t* xb = a.x + m * a.ldx;
    if (!kWma) widen_bf16_row<Ops>(xb, xf, a.K);
    for (int64_t n = a.block_begin; n < a.block_end; n += 4) {
      const uint16_t* w = static_cast<const uint16_t*>(a.w) + n * a.ldw;
      float s[4];
      switch (a.block_end - n) {
        case 1: dot_rows_m4<1, Ops, kWma>(xf, xb, w, a.ldw, a.K, s); break;
        case 2: dot_rows_m4<2, Ops, kWma>(xf, xb, w, a.ldw, a.K, s); break;
        case 3: dot_rows_m4<3, Ops, kWma>(xf, xb, w, a.ldw, a.K, s); break;
        default: dot_rows_m4<4, Ops, kWma>(xf, xb, w, a.ldw, a.K, s); break;
      }
      const int64_t rows = a.block_end - n < 4 ? a.block_end - n : 4;
      for (int64_t r = 0; r < rows; ++r) {
        float v = s[r];
        if (a.bias)
          v += a.bias_dtype == DType::kBF16 ? bf16_to_f32(static_cast<const uint16_t*>(a.bias)[n + r])
                                            : static_cast<const float*>(a.bias)[n + r];
        if (a.y_dtype == DType::kBF16)
          static_cast<uint16_t*>(a.y)[m * a.ldy + n + r] = f32_to_bf16(v);
        else
          static_cast<float*>(a.y)[m * a.ldy + n + r] = v;
      }
    }
  }
  return Status::kOk;
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
