// Compiled with -march=rv64gcv_zvfbfmin_zvfbfwma: the kernel's hardware BF16 conversions.
#include "attention_entries.h"
#include <new>

#include "rvv_inductor/attention.h"

#if !RVV_INDUCTOR_HAS_ZVFBFMIN
#error "compile with Zvfbfmin"
#endif

void attention_entry_rvv_zvfbf(const rvv_inductor::AttentionArgs& a, int threads) {
  if (!rvv_inductor::attention_bf16(a, threads)) throw std::bad_alloc();
}
