// Test-only entries into the header-only micro-kernel, each defined in a TU compiled the
// way Inductor compiles generated code: -march=rv64gcv (micro_gemm_entry_rvv.cpp) and
// -march=rv64gcv_zvfbfmin_zvfbfwma (micro_gemm_entry_rvv_zvfbf.cpp). Call them only after
// detection confirmed the extensions.
#pragma once
#include <cstdint>

// Stand-in for c10::BFloat16: a 2-byte struct the template overload must accept.
struct Bf16Like {
  uint16_t bits;
};

using MicroGemmFn = void (*)(const Bf16Like* A, const Bf16Like* B, float* C, int64_t M, int64_t N, int64_t K,
                             int64_t lda, int64_t ldb, int64_t ldc, bool accumulate);

#if defined(__riscv)
void micro_gemm_entry_rvv(const Bf16Like* A, const Bf16Like* B, float* C, int64_t M, int64_t N, int64_t K,
                          int64_t lda, int64_t ldb, int64_t ldc, bool accumulate);
const char* micro_gemm_entry_rvv_isa();
void micro_gemm_entry_rvv_zvfbf(const Bf16Like* A, const Bf16Like* B, float* C, int64_t M, int64_t N, int64_t K,
                                int64_t lda, int64_t ldb, int64_t ldc, bool accumulate);
const char* micro_gemm_entry_rvv_zvfbf_isa();
#endif
