// Vector math for Inductor's generated pointwise code on RVV. torch 2.14 has no RVV
// at::vec::Vectorized, so generated kernels use ATen's generic one (vec_isa.py), whose
// transcendental functions map the scalar libm function over the lanes: SiLU's exp in a
// decode step of Qwen2.5-1.5B dimensions was ~0.32 M instructions per layer in __expf
// (bench/results/aoti). This header, included by our cpp_prefix.h overlay right after the
// at::vec headers (prefix_overlay.py), gives Vectorized<float> a vector exp as explicit
// specializations of the generic members, before any generated code instantiates them.
// It also converts BF16 <-> FP32 vectors (the generated code's at::vec::convert) with
// vector instructions: the generic VecConvert converts lane by lane through c10's scalar
// round_to_nearest_even and f32_from_bits, ~0.35 M instructions per layer of a
// Qwen2.5-1.5B decode step (bench/results/aoti).
//
// Two implementations of the same three functions, chosen at compile time:
// - RVV_INDUCTOR_VEC_INTRINSICS (set by vec_isa.py when no header is precompiled, e.g.
//   export's AOTI compile): the RVV intrinsic kernels (rvv/vec_exp.h, rvv/bf16_widen.h),
//   at LMUL 2;
// - otherwise (torch.compile's precompiled cpp_prefix.h): lane_math.h's plain C++, which
//   the compiler vectorises. Debian's GCC 16 crashes (ICE) when a translation unit uses
//   RVV intrinsics over a precompiled header that included <riscv_vector.h>, so nothing
//   here may include it on that path.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV && defined(CPU_CAPABILITY_RVV)
#include <ATen/cpu/vec/vec.h>

#if defined(RVV_INDUCTOR_VEC_INTRINSICS)
#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/vec_exp.h"
#else
#include "rvv_inductor/lane_math.h"
#endif

namespace at::vec {
inline namespace CPU_CAPABILITY {

namespace rvv_math {
template <size_t N>
inline void exp(float* buf) {
#if defined(RVV_INDUCTOR_VEC_INTRINSICS)
  static_assert(N <= 8, "N = 8 fits m2 at VLEN >= 128");
  const size_t vl = __riscv_vsetvl_e32m2(N);
  __riscv_vse32_v_f32m2(buf, rvv_inductor::rvv::exp_f32m2(__riscv_vle32_v_f32m2(buf, vl), vl), vl);
#else
  rvv_inductor::lanes::exp_f32<N>(buf, buf);
#endif
}

template <size_t N>
inline void bf16_to_f32(const uint16_t* src, float* dst) {
#if defined(RVV_INDUCTOR_VEC_INTRINSICS)
  rvv_inductor::rvv::bf16_to_f32_aten(src, dst, N);
#else
  rvv_inductor::lanes::bf16_to_f32<N>(src, dst);
#endif
}

template <size_t N>
inline void f32_to_bf16(const float* src, uint16_t* dst) {
#if defined(RVV_INDUCTOR_VEC_INTRINSICS)
  rvv_inductor::rvv::f32_to_bf16_aten(src, dst, N);
#else
  rvv_inductor::lanes::f32_to_bf16_aten<N>(src, dst);
#endif
}
}  // namespace rvv_math

template <>
inline Vectorized<float> Vectorized<float>::exp() const {
  constexpr size_t n = Vectorized<float>::size();
  __at_align__ float buf[n];
  store(buf);
  rvv_math::exp<n>(buf);
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

// BF16 <-> FP32 with the generic VecConvert's contract (the first min(src, dst) lanes
// converted as static_cast would, the rest of dst zero), vectorised. Explicit
// specializations for the register counts Inductor's generated code uses (16 bf16 <-> 2 x
// 8 f32, and the 1 x 1 forms): the 1 x 1 forms already have ATen partial specializations
// (through the scalar convert_bfloat16_float), which a full specialization overrides.
namespace rvv_convert {
template <int dst_n, int src_n>
inline VectorizedN<float, dst_n> f32_from_bf16(const VectorizedN<c10::BFloat16, src_n>& src) {
  constexpr int count = std::min(VectorizedN<c10::BFloat16, src_n>::size(), VectorizedN<float, dst_n>::size());
  __at_align__ c10::BFloat16 src_buf[VectorizedN<c10::BFloat16, src_n>::size()];
  src.store(src_buf);
  __at_align__ float dst_buf[VectorizedN<float, dst_n>::size()];
  rvv_math::bf16_to_f32<count>(reinterpret_cast<const uint16_t*>(src_buf), dst_buf);
  return VectorizedN<float, dst_n>::loadu(dst_buf, count);
}

template <int dst_n, int src_n>
inline VectorizedN<c10::BFloat16, dst_n> bf16_from_f32(const VectorizedN<float, src_n>& src) {
  constexpr int count = std::min(VectorizedN<float, src_n>::size(), VectorizedN<c10::BFloat16, dst_n>::size());
  __at_align__ float src_buf[VectorizedN<float, src_n>::size()];
  src.store(src_buf);
  __at_align__ c10::BFloat16 dst_buf[VectorizedN<c10::BFloat16, dst_n>::size()];
  rvv_math::f32_to_bf16<count>(src_buf, reinterpret_cast<uint16_t*>(dst_buf));
  return VectorizedN<c10::BFloat16, dst_n>::loadu(dst_buf, count);
}
}  // namespace rvv_convert

#define RVV_INDUCTOR_VEC_CONVERT(DST, DN, SRC, SN, FN)                                       \
  template <>                                                                               \
  struct VecConvert<DST, DN, SRC, SN> {                                                     \
    static inline VectorizedN<DST, DN> apply(const VectorizedN<SRC, SN>& src) {             \
      return rvv_convert::FN<DN, SN>(src);                                                  \
    }                                                                                       \
  };
RVV_INDUCTOR_VEC_CONVERT(float, 2, c10::BFloat16, 1, f32_from_bf16)
RVV_INDUCTOR_VEC_CONVERT(float, 1, c10::BFloat16, 1, f32_from_bf16)
RVV_INDUCTOR_VEC_CONVERT(c10::BFloat16, 1, float, 2, bf16_from_f32)
#undef RVV_INDUCTOR_VEC_CONVERT

// ATen's 1 x 1 narrowing converts the 8 floats twice (convert_from_float(a, a)): lanes
// 8..15 repeat lanes 0..7. Kept, so that nothing that reads them changes.
template <>
struct VecConvert<c10::BFloat16, 1, float, 1> {
  static inline VectorizedN<c10::BFloat16, 1> apply(const VectorizedN<float, 1>& src) {
    return rvv_convert::bf16_from_f32<1, 2>(VectorizedN<float, 2>(src[0], src[0]));
  }
};

}  // namespace CPU_CAPABILITY
}  // namespace at::vec

#endif
