// Test-only entries into the header-only decode attention kernel, each in a TU compiled
// the way Inductor compiles generated code (-march=rv64gcv, and with Zvfbfmin/Zvfbfwma).
// Call them only after detection confirmed the extensions.
#pragma once
#include <cstddef>
#include <cstdint>

#include "rvv_inductor/attention_args.h"

// lane_math.h's plain C++ (inductor_vec_math.h under a precompiled header) in chunks of
// Inductor's 8 / 16 lanes, the tail padded: _lanes compiled for the TU's base ISA,
// _lanes_rvv with -march=rv64gcv, where the compiler vectorises it.
void exp_entry_lanes(const float* x, float* y, size_t n);
void bf16_widen_entry_lanes(const uint16_t* h, float* f, size_t n);
void bf16_narrow_entry_lanes(const float* f, uint16_t* h, size_t n);

#if defined(__riscv)
void exp_entry_lanes_rvv(const float* x, float* y, size_t n);
void bf16_widen_entry_lanes_rvv(const uint16_t* h, float* f, size_t n);
void bf16_narrow_entry_lanes_rvv(const float* f, uint16_t* h, size_t n);
void attention_entry_rvv(const rvv_inductor::AttentionArgs& a, int threads);
void attention_entry_rvv_zvfbf(const rvv_inductor::AttentionArgs& a, int threads);
// y = exp(x) by rvv/vec_exp.h (Inductor's Vectorized<float>::exp through inductor_vec_math.h).
void exp_entry_rvv(const float* x, float* y, size_t n);
void exp_entry_rvv_zvfbf(const float* x, float* y, size_t n);
// BF16 <-> FP32 as c10's static_casts (rvv/bf16_widen.h *_aten; Inductor's
// at::vec::convert through inductor_vec_math.h).
void bf16_widen_aten_entry_rvv(const uint16_t* h, float* f, size_t n);
void bf16_narrow_aten_entry_rvv(const float* f, uint16_t* h, size_t n);
void bf16_widen_aten_entry_rvv_zvfbf(const uint16_t* h, float* f, size_t n);
void bf16_narrow_aten_entry_rvv_zvfbf(const float* f, uint16_t* h, size_t n);
#endif
