// Compiled with -march=rv64gcv, like Inductor's generated kernels.
#include "attention_entries.h"
#include <new>

#include "rvv_inductor/attention.h"

#if !RVV_INDUCTOR_HAS_RVV || RVV_INDUCTOR_HAS_ZVFBFMIN
#error "compile with -march=rv64gcv"
#endif

void attention_entry_rvv(const rvv_inductor::AttentionArgs& a, int threads) {
  if (!rvv_inductor::attention_bf16(a, threads)) throw std::bad_alloc();
}
