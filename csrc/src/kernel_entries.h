// Internal: the kernel sets the dispatcher chooses between, one per ISA variant of
// rvv_inductor/kernel_isas.inl. Each is defined in its own TU, generated from
// kernel_set.inc and compiled with the variant's -march; the dispatcher only reads their
// tables, so no vector instruction runs unless detection allowed that variant.
#pragma once
#include <cstddef>
#include <cstdint>

#include "rvv_inductor/attention_args.h"
#include "rvv_inductor/linear.h"
#include "rvv_inductor/types.h"

namespace rvv_inductor {
namespace detail {

using KernelFn = Status (*)(const LinearOperands&);

struct KernelEntry {
  DType format;
  KernelKind kind;
  const char* name;  // "<isa>/<format>/<kind>_<tile>", e.g. "rvv_zvfh/int4/gemv_1xm8"
  KernelFn fn;
};

struct KernelSet {
  const KernelEntry* entries;
  size_t count;
  // bf16 <-> fp32 rows, or null when the variant has no RVV_CONVERT line.
  void (*f32_to_bf16)(const float*, uint16_t*, int64_t);
  void (*bf16_to_f32)(const uint16_t*, float*, int64_t);
  // attention_varlen_rows (attention.h) compiled for this variant.
  bool (*attention_varlen_rows)(const VarlenAttentionArgs&, int64_t, int64_t);
};

#define RVV_ISA(name, march, path, req) const KernelSet& kernels_##name();
#include "rvv_inductor/kernel_isas.inl"
#undef RVV_ISA

}  // namespace detail
}  // namespace rvv_inductor
