// Compiled with -march=rv64gcv, like Inductor's generated kernels.
#include "attention_entries.h"
#include <new>

#include "lane_entries.h"

#include "rvv_inductor/attention.h"
#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/vec_exp.h"

#if !RVV_INDUCTOR_HAS_RVV || RVV_INDUCTOR_HAS_ZVFBFMIN
#error "compile with -march=rv64gcv"
#endif

void attention_entry_rvv(const rvv_inductor::AttentionArgs& a, int threads) {
  if (!rvv_inductor::attention_bf16(a, threads)) throw std::bad_alloc();
}

void exp_entry_rvv(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n;) {
    const size_t vl = __riscv_vsetvl_e32m2(n - i);
    __riscv_vse32_v_f32m2(y + i, rvv_inductor::rvv::exp_f32m2(__riscv_vle32_v_f32m2(x + i, vl), vl), vl);
    i += vl;
  }
}

void bf16_widen_aten_entry_rvv(const uint16_t* h, float* f, size_t n) {
  rvv_inductor::rvv::bf16_to_f32_aten(h, f, n);
}

void bf16_narrow_aten_entry_rvv(const float* f, uint16_t* h, size_t n) {
  rvv_inductor::rvv::f32_to_bf16_aten(f, h, n);
}

// lane_math.h as Inductor's generated code gets it under a precompiled header: plain C++
// that the compiler vectorises for V.
void exp_entry_lanes_rvv(const float* x, float* y, size_t n) { lanes_exp(x, y, n); }
void bf16_widen_entry_lanes_rvv(const uint16_t* h, float* f, size_t n) { lanes_widen(h, f, n); }
void bf16_narrow_entry_lanes_rvv(const float* f, uint16_t* h, size_t n) { lanes_narrow(f, h, n); }
