// Bias load and output store shared by the RVV kernels: the accumulator starts from the
// bias (or zero), and the result leaves as f32 or as bf16 rounded to nearest even.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

// bias[n .. n+vl) as f32, or zeros without a bias.
template <class Ops>
inline vfloat32m4_t bias_m4(const void* bias, DType dt, int64_t n, size_t vl) {
  if (!bias) return __riscv_vfmv_v_f_f32m4(0.0f, vl);
  if (dt == DType::kBF16) return Ops::load_m4(static_cast<const uint16_t*>(bias) + n, vl);
  return __riscv_vle32_v_f32m4(static_cast<const float*>(bias) + n, vl);
}
template <class Ops>
inline vfloat32m8_t bias_m8(const void* bias, DType dt, int64_t n, size_t vl) {
  if (!bias) return __riscv_vfmv_v_f_f32m8(0.0f, vl);
  if (dt == DType::kBF16) return Ops::load_m8(static_cast<const uint16_t*>(bias) + n, vl);
  return __riscv_vle32_v_f32m8(static_cast<const float*>(bias) + n, vl);
}

// Writes vl results at element offset `off` of y.
template <class Ops>
inline void store_out(void* y, DType dt, int64_t off, vfloat32m4_t v, size_t vl) {
  if (dt == DType::kBF16)
    __riscv_vse16_v_u16m2(static_cast<uint16_t*>(y) + off, Ops::narrow(v, vl), vl);
  else
    __riscv_vse32_v_f32m4(static_cast<float*>(y) + off, v, vl);
}
template <class Ops>
inline void store_out(void* y, DType dt, int64_t off, vfloat32m8_t v, size_t vl) {
  if (dt == DType::kBF16)
    __riscv_vse16_v_u16m4(static_cast<uint16_t*>(y) + off, Ops::narrow(v, vl), vl);
  else
    __riscv_vse32_v_f32m8(static_cast<float*>(y) + off, v, vl);
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
