// Internal: the per-ISA kernel sets the dispatcher chooses between. Each set is defined
// in a TU compiled for its ISA (kernels_rvv.cpp: rv64gcv, kernels_rvv_zvfbf.cpp:
// rv64gcv_zvfbfmin_zvfbfwma); the dispatcher only takes their addresses, so no vector
// instruction runs unless it picked that set.
#pragma once
#include <cstdint>

#include "rvv_inductor/types.h"

namespace rvv_inductor {
namespace detail {

struct KernelSet {
  Status (*linear_packed)(const PackedLinearArgs&);
  Status (*linear_rowmajor)(const RowMajorLinearArgs&);
  void (*f32_to_bf16)(const float*, uint16_t*, int64_t);
  void (*bf16_to_f32)(const uint16_t*, float*, int64_t);
};

#if defined(RVV_INDUCTOR_WITH_RVV_KERNELS)
const KernelSet& kernels_rvv();
const KernelSet& kernels_rvv_zvfbf();
#endif

}  // namespace detail
}  // namespace rvv_inductor
