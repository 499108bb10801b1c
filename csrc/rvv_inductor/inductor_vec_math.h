// Vector math for Inductor's generated pointwise code on RVV. torch 2.14 has no RVV
// at::vec::Vectorized, so generated kernels use ATen's generic one (vec_isa.py), whose
// transcendental functions map the scalar libm function over the lanes: SiLU's exp in a
// decode step of Qwen2.5-1.5B dimensions was ~0.32 M instructions per layer in __expf
// (bench/results/aoti). This header, included by our cpp_prefix.h overlay right after the
// at::vec headers (prefix_overlay.py), gives Vectorized<float> a vector exp
// (rvv/vec_exp.h) as explicit specializations of the generic members, before any
// generated code instantiates them.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV && defined(CPU_CAPABILITY_RVV)
#include <ATen/cpu/vec/vec.h>

#include "rvv_inductor/rvv/vec_exp.h"

namespace at::vec {
inline namespace CPU_CAPABILITY {

template <>
inline Vectorized<float> Vectorized<float>::exp() const {
  constexpr size_t n = Vectorized<float>::size();
  __at_align__ float buf[n];
  store(buf);
  const size_t vl = __riscv_vsetvl_e32m2(n);  // n = 8 fits m2 at VLEN >= 128
  __riscv_vse32_v_f32m2(buf, rvv_inductor::rvv::exp_f32m2(__riscv_vle32_v_f32m2(buf, vl), vl), vl);
  return Vectorized<float>::loadu(buf);
}

template <>
inline Vectorized<float> Vectorized<float>::exp_u20() const {
  return exp();
}

template <>
inline Vectorized<float> Vectorized<float>::fexp_u20() const {
  return exp();
}

}  // namespace CPU_CAPABILITY
}  // namespace at::vec

#endif
