// The operands of the decode attention kernels (attention.h, rvv/attention_bf16.h).
#pragma once
#include <cstdint>

#include "rvv_inductor/abi_types.h"

namespace rvv_inductor {

// Element strides (not bytes); the last dimension (D) of q, k, v is contiguous. A mask
// stride may be 0 (broadcast), e.g. one mask for all heads.
struct AttentionArgs {
  const uint16_t* q = nullptr;  // [B, H, T, D] bf16
  int64_t q_sb = 0, q_sh = 0, q_st = 0;
  const uint16_t* k = nullptr;  // [B, Hkv, L, D] bf16
  int64_t k_sb = 0, k_sh = 0, k_sl = 0;
  const uint16_t* v = nullptr;  // [B, Hkv, L, D] bf16
  int64_t v_sb = 0, v_sh = 0, v_sl = 0;
  const bool* mask = nullptr;   // [B, H, T, L] (any broadcast strides), true = attend; nullptr = all
  int64_t m_sb = 0, m_sh = 0, m_st = 0, m_sl = 1;
  uint16_t* out = nullptr;      // [B, T, H, D] bf16, contiguous
  int64_t B = 0, H = 0, Hkv = 0, T = 0, L = 0, D = 0;
  float scale = 1.0f;
};

// A packed batch of variable-length sequences (continuous batching): the C ABI's struct.
using VarlenAttentionArgs = rvv_varlen_attention;

}  // namespace rvv_inductor
