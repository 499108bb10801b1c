// The RVV kernel set with hardware BF16: vfwcvtbf16 / vfncvtbf16 (Zvfbfmin) for the
// conversions and vfwmaccbf16 (Zvfbfwma) for the row-major dot products. Compiled with
// -march=rv64gcv_zvfbfmin_zvfbfwma; selected only when the CPU has both extensions.
#include "kernel_entries.h"
#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/gemm_bf16_packed.h"
#include "rvv_inductor/rvv/gemv_bf16_packed.h"
#include "rvv_inductor/rvv/gemv_bf16_rowmajor.h"

#if !RVV_INDUCTOR_HAS_ZVFBFMIN || !RVV_INDUCTOR_HAS_ZVFBFWMA
#error "kernels_rvv_zvfbf.cpp must be compiled with -march=rv64gcv_zvfbfmin_zvfbfwma"
#endif

namespace rvv_inductor {
namespace detail {
namespace {

Status linear_packed(const PackedLinearArgs& a) {
  return a.M == 1 ? rvv::gemv_bf16_packed_1xm8_rvv_zvfbfmin(a) : rvv::gemm_bf16_packed_6xm4_rvv_zvfbfmin(a);
}
void f32_to_bf16(const float* s, uint16_t* d, int64_t n) { rvv::narrow_f32_row<rvv::Bf16Zvfbfmin>(s, d, n); }
void bf16_to_f32(const uint16_t* s, float* d, int64_t n) { rvv::widen_bf16_row<rvv::Bf16Zvfbfmin>(s, d, n); }

}  // namespace

const KernelSet& kernels_rvv_zvfbf() {
  static const KernelSet set = {linear_packed, rvv::gemv_bf16_rowmajor_4xm4_rvv_zvfbfwma, f32_to_bf16, bf16_to_f32};
  return set;
}

}  // namespace detail
}  // namespace rvv_inductor
