// The RVV 1.0 kernel set with the integer bf16 widen (any V CPU, e.g. the SpacemiT K1).
// Compiled with -march=rv64gcv only; reached through linear_dispatch.cpp after detection.
#include "kernel_entries.h"
#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/gemm_bf16_packed.h"
#include "rvv_inductor/rvv/gemv_bf16_packed.h"
#include "rvv_inductor/rvv/gemv_bf16_rowmajor.h"

#if !RVV_INDUCTOR_HAS_RVV
#error "kernels_rvv.cpp must be compiled with -march=rv64gcv"
#endif

namespace rvv_inductor {
namespace detail {
namespace {

Status linear_packed(const PackedLinearArgs& a) {
  return a.M == 1 ? rvv::gemv_bf16_packed_1xm8_rvv(a) : rvv::gemm_bf16_packed_6xm4_rvv(a);
}
void f32_to_bf16(const float* s, uint16_t* d, int64_t n) { rvv::narrow_f32_row<rvv::Bf16Soft>(s, d, n); }
void bf16_to_f32(const uint16_t* s, float* d, int64_t n) { rvv::widen_bf16_row<rvv::Bf16Soft>(s, d, n); }

}  // namespace

const KernelSet& kernels_rvv() {
  static const KernelSet set = {linear_packed, rvv::gemv_bf16_rowmajor_4xm4_rvv, f32_to_bf16, bf16_to_f32};
  return set;
}

}  // namespace detail
}  // namespace rvv_inductor
