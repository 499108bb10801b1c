// Test-only entries into the header-only decode attention kernel, each in a TU compiled
// the way Inductor compiles generated code (-march=rv64gcv, and with Zvfbfmin/Zvfbfwma).
// Call them only after detection confirmed the extensions.
#pragma once
#include "rvv_inductor/attention_args.h"

#if defined(__riscv)
void attention_entry_rvv(const rvv_inductor::AttentionArgs& a, int threads);
void attention_entry_rvv_zvfbf(const rvv_inductor::AttentionArgs& a, int threads);
#endif
