// Compiled with -march=rv64gcv, like Inductor's generated kernels.
#include "micro_gemm_entries.h"
#include "rvv_inductor/rvv/micro_gemm_bf16.h"

#if !RVV_INDUCTOR_HAS_RVV || RVV_INDUCTOR_HAS_ZVFBFMIN
#error "compile with -march=rv64gcv"
#endif

#define RVV_TEST_STR2(x) #x
#define RVV_TEST_STR(x) RVV_TEST_STR2(x)

void micro_gemm_entry_rvv(const Bf16Like* A, const Bf16Like* B, float* C, int64_t M, int64_t N, int64_t K,
                          int64_t lda, int64_t ldb, int64_t ldc, bool accumulate) {
  rvv_inductor::micro_gemm_bf16f32_rvv(A, B, C, M, N, K, lda, ldb, ldc, accumulate);
}

const char* micro_gemm_entry_rvv_isa() { return RVV_TEST_STR(RVV_INDUCTOR_ISA_NS); }
