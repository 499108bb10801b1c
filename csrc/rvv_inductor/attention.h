// Scaled dot-product attention for decoding (a few query rows against a KV cache), BF16
// in and out, FP32 inside; grouped-query heads read their shared K/V rows once:
//
//   out[b, t, h, :] = softmax_l(scale * q[b, h, t, :] . k[b, h / G, l, :], over mask[b, h, t, l])
//                     . v[b, h / G, l, :]                                   G = H / Hkv
//
// Masked positions are skipped, not computed and zeroed: with a static KV cache of L
// positions of which n are filled, the work is proportional to n. That is the same result
// as ATen's SDPA with a boolean mask (exp(-inf) = 0 adds nothing), except that a row whose
// mask is all false gives zeros here (ATen gives NaN).
//
// Why a kernel of our own: torch 2.14's CPU SDPA is built without vector code for riscv64
// and, through transformers' repeat_kv, reads a materialised [H, L, D] copy of the GQA
// cache every step. This is the decode attention of the AOTInductor package (issue 16):
// python/rvv_inductor/attention.py lowers its custom op to a generated kernel that calls
// attention_bf16() below.
//
// The vector kernel (rvv/attention_bf16.h) is used when the including TU is compiled with
// V; the scalar one below is the reference it is tested against and the fallback.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "rvv_inductor/attention_args.h"
#include "rvv_inductor/attention_buffer.h"
#include "rvv_inductor/bf16.h"
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include "rvv_inductor/rvv/attention_bf16.h"
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

RVV_INDUCTOR_BEGIN_NAMESPACE

// "" when the problem is well formed, else why not.
inline std::string attention_check(const AttentionArgs& a) {
  if (!a.q || !a.k || !a.v || !a.out) return "null pointer";
  if (a.B < 1 || a.H < 1 || a.Hkv < 1 || a.T < 1 || a.L < 1 || a.D < 1) return "empty or negative size";
  if (a.H % a.Hkv) return "H is not a multiple of Hkv";
  if (!std::isfinite(a.scale)) return "scale is not finite";
  return "";
}

namespace attention_detail {

// One (b, t, h) row, scalar: the reference of the vector kernel. s: L floats, acc: D floats.
inline void attention_row_scalar(const AttentionArgs& a, int64_t b, int64_t t, int64_t h, float* s, float* acc) {
  const int64_t hk = h / (a.H / a.Hkv);
  const uint16_t* q = a.q + b * a.q_sb + h * a.q_sh + t * a.q_st;
  const uint16_t* k = a.k + b * a.k_sb + hk * a.k_sh;
  const uint16_t* v = a.v + b * a.v_sb + hk * a.v_sh;
  const bool* m = a.mask ? a.mask + b * a.m_sb + h * a.m_sh + t * a.m_st : nullptr;
  float mx = -INFINITY;
  for (int64_t l = 0; l < a.L; l++) {
    s[l] = 0.0f;
    if (m && !m[l * a.m_sl]) continue;
    float d = 0.0f;
    for (int64_t i = 0; i < a.D; i++) d += bf16_to_f32(q[i]) * bf16_to_f32(k[l * a.k_sl + i]);
    s[l] = d * a.scale;
    mx = std::max(mx, s[l]);
  }
  for (int64_t i = 0; i < a.D; i++) acc[i] = 0.0f;
  float sum = 0.0f;
  for (int64_t l = 0; l < a.L; l++) {
    if (m && !m[l * a.m_sl]) continue;
    const float p = std::exp(s[l] - mx);
    sum += p;
    for (int64_t i = 0; i < a.D; i++) acc[i] += p * bf16_to_f32(v[l * a.v_sl + i]);
  }
  uint16_t* o = a.out + ((b * a.T + t) * a.H + h) * a.D;
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  for (int64_t i = 0; i < a.D; i++) o[i] = f32_to_bf16(acc[i] * inv);
}

}  // namespace attention_detail

// The scalar kernel (any CPU). false when the scratch could not be allocated.
inline bool attention_bf16_scalar(const AttentionArgs& a) {
  AttnBuffer buf(size_t(a.L + a.D) * sizeof(float));
  if (!buf.p) return false;
  float* s = static_cast<float*>(buf.p);
  for (int64_t b = 0; b < a.B; b++)
    for (int64_t t = 0; t < a.T; t++)
      for (int64_t h = 0; h < a.H; h++) attention_detail::attention_row_scalar(a, b, t, h, s, s + a.L);
  return true;
}

// The kernel for the ISA this TU is compiled for, over `threads` OpenMP threads (when the
// TU has OpenMP): the work items are (b, t, kv head, block of query heads), each computed
// by one thread with the same arithmetic, so the result does not depend on the thread
// count. false when scratch memory could not be allocated (the output is then incomplete).
inline bool attention_bf16(const AttentionArgs& a, int threads = 1) {
#if RVV_INDUCTOR_HAS_RVV
  const int64_t blocks = rvv::attention_head_blocks(a);
  const int64_t items = a.B * a.T * a.Hkv * blocks;
  int ok = 1;
#ifdef _OPENMP
  if (threads > 1 && items > 1) {
#pragma omp parallel for num_threads(int(std::min<int64_t>(threads, items))) schedule(static) reduction(&& : ok)
    for (int64_t i = 0; i < items; i++) ok = rvv::attention_item(a, i, blocks) && ok;
    return ok;
  }
#endif
  (void)threads;
  for (int64_t i = 0; i < items; i++) ok = rvv::attention_item(a, i, blocks) && ok;
  return ok;
#else
  (void)threads;
  return attention_bf16_scalar(a);
#endif
}

// ---------------------------------------------------------------- packed variable-length batches
// Continuous batching hands attention one packed batch: every running request's new
// tokens as query rows, and its whole context gathered from the paged KV cache as key
// rows (VarlenAttentionArgs, abi_types.h). ATen's SDPA would need a [Tq, Lk] mask there,
// and would compute every query against every request's keys only to mask most of them
// out: work quadratic in the batch. Here each query row is one decode-attention problem
// against its own request's keys only.

// "" when the problem is well formed, else why not.
inline std::string attention_varlen_check(const VarlenAttentionArgs& a) {
  if (!a.cu_q || !a.cu_k || !a.out) return "null pointer";
  if (a.S < 0 || a.Tq < 0 || a.Lk < 0 || a.H < 1 || a.Hkv < 1 || a.D < 1) return "empty or negative size";
  if (a.H % a.Hkv) return "H is not a multiple of Hkv";
  if (a.window < 0) return "negative window";
  if (!std::isfinite(a.scale)) return "scale is not finite";
  if (a.cu_q[0] != 0 || a.cu_k[0] != 0) return "cu_seqlens do not start at 0";
  for (int64_t s = 0; s < a.S; s++) {
    const int64_t nq = int64_t(a.cu_q[s + 1]) - a.cu_q[s], nk = int64_t(a.cu_k[s + 1]) - a.cu_k[s];
    if (nq < 0 || nk < 0) return "cu_seqlens decrease";
    if (nk < nq) return "a sequence has fewer keys than queries";
  }
  if (a.cu_q[a.S] > a.Tq || a.cu_k[a.S] > a.Lk) return "cu_seqlens run past the rows";
  if (a.cu_q[a.S] > 0 && (!a.q || !a.k || !a.v)) return "null pointer";
  return "";
}

namespace attention_detail {

// Query row `row` of sequence s as a one-row decode problem (L = 0 for a padding row).
inline AttentionArgs varlen_row(const VarlenAttentionArgs& a, int64_t s, int64_t row) {
  AttentionArgs r;
  r.B = r.T = 1, r.H = a.H, r.Hkv = a.Hkv, r.D = a.D, r.scale = a.scale;
  r.out = a.out + row * a.H * a.D;
  if (s >= a.S) return r;  // L = 0
  const int64_t nq = int64_t(a.cu_q[s + 1]) - a.cu_q[s], nk = int64_t(a.cu_k[s + 1]) - a.cu_k[s];
  const int64_t last = nk - nq + (row - a.cu_q[s]);  // the query's own key
  const int64_t first = a.window > 0 && last + 1 > a.window ? last + 1 - a.window : 0;
  r.q = a.q + row * a.q_st, r.q_sh = a.q_sh;
  r.k = a.k + (a.cu_k[s] + first) * a.k_sl, r.k_sh = a.k_sh, r.k_sl = a.k_sl;
  r.v = a.v + (a.cu_k[s] + first) * a.v_sl, r.v_sh = a.v_sh, r.v_sl = a.v_sl;
  r.L = last + 1 - first;
  return r;
}

}  // namespace attention_detail

// Query rows [r0, r1) of a checked problem (attention_varlen_check), with this TU's kernel
// (vector or scalar) on the calling thread; the runtime (linear.h, attention_varlen) splits
// the rows over threads. false when scratch could not be allocated.
inline bool attention_varlen_rows(const VarlenAttentionArgs& a, int64_t r0, int64_t r1) {
  // Each row's sequence: cu_q is sorted, and S is small (requests per batch).
  int64_t s = 0;
  bool ok = true;
  for (int64_t row = r0; row < r1; row++) {
    while (s < a.S && a.cu_q[s + 1] <= row) s++;
    const AttentionArgs r = attention_detail::varlen_row(a, s, row);
    if (r.L == 0) {
      std::fill(r.out, r.out + a.H * a.D, uint16_t(0));
      continue;
    }
    ok = attention_bf16(r, 1) && ok;
  }
  return ok;
}

RVV_INDUCTOR_END_NAMESPACE
