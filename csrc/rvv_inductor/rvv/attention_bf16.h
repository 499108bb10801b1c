// The RVV decode attention kernel of attention.h: one work item is (b, t, kv head, a block
// of up to 4 query heads sharing that kv head), vector-length agnostic (e32 m4 over D).
//
// Per valid cache position, the K row is loaded and widened once for the whole block of
// query heads (GQA: Qwen2.5-1.5B has 6 query heads per kv head), then one FMA per head;
// the V row likewise in the P . V pass. Scores, exp and the running sums stay in FP32;
// only the output is rounded to BF16. Arrays of RVV vector types are not allowed, hence
// the four named accumulators and `if constexpr` on the block size.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "rvv_inductor/attention_args.h"
#include "rvv_inductor/attention_buffer.h"
#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/vec_exp.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

#if RVV_INDUCTOR_HAS_ZVFBFMIN
using AttnBf16 = Bf16Zvfbfmin;
#else
using AttnBf16 = Bf16Soft;
#endif

constexpr int64_t kAttnMaxHeads = 4;  // query heads per work item (register budget: 4 x m4 accumulators)

// Work items per (b, t, kv head): blocks of up to kAttnMaxHeads query heads, or one head
// per item when the mask differs between heads (each head then has its own positions).
inline int64_t attention_head_blocks(const AttentionArgs& a) {
  const int64_t g = a.H / a.Hkv;
  if (a.mask && a.m_sh != 0) return g;
  return (g + kAttnMaxHeads - 1) / kAttnMaxHeads;
}

// false when the scratch could not be allocated (nothing written).
template <int NG>
inline bool attend_block(const AttentionArgs& a, int64_t b, int64_t t, int64_t hk, int64_t h0) {
  const int64_t D = a.D;
  // Scratch: the valid positions, the block's q rows in FP32, its scores.
  AttnBuffer buf(size_t(a.L) * (sizeof(int32_t) + NG * sizeof(float)) + size_t(NG * D) * sizeof(float));
  if (!buf.p) return false;
  float* qf = static_cast<float*>(buf.p);
  float* s = qf + NG * D;
  int32_t* idx = reinterpret_cast<int32_t*>(s + NG * a.L);
  // The valid cache positions (one mask row serves the block: see attention_head_blocks).
  int64_t n = 0;
  if (a.mask) {
    const bool* m = a.mask + b * a.m_sb + h0 * a.m_sh + t * a.m_st;
    for (int64_t l = 0; l < a.L; l++)
      if (m[l * a.m_sl]) idx[n++] = int32_t(l);
  } else {
    for (int64_t l = 0; l < a.L; l++) idx[n++] = int32_t(l);
  }
  uint16_t* out0 = a.out + ((b * a.T + t) * a.H + h0) * D;
  if (n == 0) {  // nothing to attend to: zeros (see attention.h)
    for (int64_t i = 0; i < NG * D; i++) out0[i] = 0;
    return true;
  }
  // q rows of the block in FP32, pre-scaled.
  for (int g = 0; g < NG; g++) {
    const uint16_t* q = a.q + b * a.q_sb + (h0 + g) * a.q_sh + t * a.q_st;
    for (int64_t d = 0; d < D;) {
      const size_t vl = __riscv_vsetvl_e32m4(size_t(D - d));
      __riscv_vse32_v_f32m4(qf + g * D + d, __riscv_vfmul_vf_f32m4(AttnBf16::load_m4(q + d, vl), a.scale, vl), vl);
      d += int64_t(vl);
    }
  }
  // Scores s[g][j] = q_g . k_idx[j] (row g at s + g * n).
  const uint16_t* kb = a.k + b * a.k_sb + hk * a.k_sh;
  const size_t vlmax = __riscv_vsetvlmax_e32m4();
  const vfloat32m1_t zero1 = __riscv_vfmv_s_f_f32m1(0.0f, 1);
  for (int64_t j = 0; j < n; j++) {
    const uint16_t* kr = kb + int64_t(idx[j]) * a.k_sl;
    vfloat32m4_t acc0 = __riscv_vfmv_v_f_f32m4(0.0f, vlmax), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int64_t d = 0; d < D;) {
      const size_t vl = __riscv_vsetvl_e32m4(size_t(D - d));
      const vfloat32m4_t kf = AttnBf16::load_m4(kr + d, vl);
      // _tu: a shorter last chunk leaves the higher lanes' partial sums in place.
      acc0 = __riscv_vfmacc_vv_f32m4_tu(acc0, __riscv_vle32_v_f32m4(qf + d, vl), kf, vl);
      if constexpr (NG > 1) acc1 = __riscv_vfmacc_vv_f32m4_tu(acc1, __riscv_vle32_v_f32m4(qf + D + d, vl), kf, vl);
      if constexpr (NG > 2) acc2 = __riscv_vfmacc_vv_f32m4_tu(acc2, __riscv_vle32_v_f32m4(qf + 2 * D + d, vl), kf, vl);
      if constexpr (NG > 3) acc3 = __riscv_vfmacc_vv_f32m4_tu(acc3, __riscv_vle32_v_f32m4(qf + 3 * D + d, vl), kf, vl);
      d += int64_t(vl);
    }
    const size_t vr = std::min<size_t>(vlmax, size_t(D));
    s[j] = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m4_f32m1(acc0, zero1, vr));
    if constexpr (NG > 1) s[n + j] = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m4_f32m1(acc1, zero1, vr));
    if constexpr (NG > 2) s[2 * n + j] = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m4_f32m1(acc2, zero1, vr));
    if constexpr (NG > 3) s[3 * n + j] = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m4_f32m1(acc3, zero1, vr));
  }
  // Softmax numerators in place, and 1 / sum per head.
  float inv[kAttnMaxHeads] = {};
  for (int g = 0; g < NG; g++) {
    float* sg = s + g * n;
    vfloat32m1_t mx = __riscv_vfmv_s_f_f32m1(sg[0], 1);
    for (int64_t j = 0; j < n;) {
      const size_t vl = __riscv_vsetvl_e32m4(size_t(n - j));
      mx = __riscv_vfredmax_vs_f32m4_f32m1(__riscv_vle32_v_f32m4(sg + j, vl), mx, vl);
      j += int64_t(vl);
    }
    const float m = __riscv_vfmv_f_s_f32m1_f32(mx);
    vfloat32m1_t sum = zero1;
    for (int64_t j = 0; j < n;) {  // rvv/vec_exp.h's exp (m2): one exp for all the vector code
      const size_t vl = __riscv_vsetvl_e32m2(size_t(n - j));
      const vfloat32m2_t p = exp_f32m2(__riscv_vfsub_vf_f32m2(__riscv_vle32_v_f32m2(sg + j, vl), m, vl), vl);
      __riscv_vse32_v_f32m2(sg + j, p, vl);
      sum = __riscv_vfredusum_vs_f32m2_f32m1(p, sum, vl);
      j += int64_t(vl);
    }
    inv[g] = 1.0f / __riscv_vfmv_f_s_f32m1_f32(sum);  // >= 1: the maximum's term is 1
  }
  // out_g = sum_j p[g][j] v_idx[j] / sum_g, one D chunk at a time.
  const uint16_t* vb = a.v + b * a.v_sb + hk * a.v_sh;
  for (int64_t d = 0; d < D;) {
    const size_t vl = __riscv_vsetvl_e32m4(size_t(D - d));
    vfloat32m4_t o0 = __riscv_vfmv_v_f_f32m4(0.0f, vl), o1 = o0, o2 = o0, o3 = o0;
    for (int64_t j = 0; j < n; j++) {
      const vfloat32m4_t vf = AttnBf16::load_m4(vb + int64_t(idx[j]) * a.v_sl + d, vl);
      o0 = __riscv_vfmacc_vf_f32m4(o0, s[j], vf, vl);
      if constexpr (NG > 1) o1 = __riscv_vfmacc_vf_f32m4(o1, s[n + j], vf, vl);
      if constexpr (NG > 2) o2 = __riscv_vfmacc_vf_f32m4(o2, s[2 * n + j], vf, vl);
      if constexpr (NG > 3) o3 = __riscv_vfmacc_vf_f32m4(o3, s[3 * n + j], vf, vl);
    }
    __riscv_vse16_v_u16m2(out0 + d, AttnBf16::narrow(__riscv_vfmul_vf_f32m4(o0, inv[0], vl), vl), vl);
    if constexpr (NG > 1)
      __riscv_vse16_v_u16m2(out0 + D + d, AttnBf16::narrow(__riscv_vfmul_vf_f32m4(o1, inv[1], vl), vl), vl);
    if constexpr (NG > 2)
      __riscv_vse16_v_u16m2(out0 + 2 * D + d, AttnBf16::narrow(__riscv_vfmul_vf_f32m4(o2, inv[2], vl), vl), vl);
    if constexpr (NG > 3)
      __riscv_vse16_v_u16m2(out0 + 3 * D + d, AttnBf16::narrow(__riscv_vfmul_vf_f32m4(o3, inv[3], vl), vl), vl);
    d += int64_t(vl);
  }
  return true;
}

// Work item i of B * T * Hkv * blocks (see attention_bf16 in attention.h).
inline bool attention_item(const AttentionArgs& a, int64_t i, int64_t blocks) {
  const int64_t blk = i % blocks;
  int64_t r = i / blocks;
  const int64_t hk = r % a.Hkv;
  r /= a.Hkv;
  const int64_t t = r % a.T, b = r / a.T;
  const int64_t g = a.H / a.Hkv;
  const int64_t per = (a.mask && a.m_sh != 0) ? 1 : kAttnMaxHeads;
  const int64_t g0 = blk * per, ng = std::min(per, g - g0);
  const int64_t h0 = hk * g + g0;
  switch (ng) {
    case 1: return attend_block<1>(a, b, t, hk, h0);
    case 2: return attend_block<2>(a, b, t, hk, h0);
    case 3: return attend_block<3>(a, b, t, hk, h0);
    default: return attend_block<4>(a, b, t, hk, h0);
  }
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE

#endif  // RVV_INDUCTOR_HAS_RVV
