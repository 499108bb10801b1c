// exp and BF16 <-> FP32 over N lanes in plain C++, for code that cannot include
// <riscv_vector.h>: Inductor's precompiled cpp_prefix.h (inductor_vec_math.h), where
// Debian's GCC 16 crashes on RVV intrinsics. Written so that the compiler vectorises the
// lane loops by itself under -march=rv64gcv: no libm calls, no branches, and every select
// an integer bit mask. (GCC 16 turns float-compare selects into branches, or into masked
// arithmetic under -ftrapping-math; with bit masks it emits straight vector code.)
//
// Same contracts as the intrinsic versions (rvv/vec_exp.h, rvv/bf16_widen.h *_aten):
// exp within 4 ulp of libm over the normal range, +inf for x > ln(FLT_MAX), +0 below
// ln(FLT_MIN) (so exp(-inf) = 0), NaN kept; widening exact; narrowing rounds to nearest
// even and turns every NaN into ATen's 0x7FC0, bit for bit as c10's scalar casts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "rvv_inductor/config.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace lanes {

inline float f32_from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline uint32_t bits_from_f32(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

template <size_t N>
inline void exp_f32(const float* x, float* y) {
  // Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, as rvv/vec_exp.h (same constants).
  constexpr uint32_t kMinBits = 0xC2AEAC50u;  // -87.33654475f = ln(FLT_MIN)
  constexpr uint32_t kMaxBits = 0x42B17218u;  // 88.72283905f = ln(FLT_MAX)
  constexpr float kShift = 12582912.0f;       // 1.5 * 2^23: adding it rounds to an integer
  for (size_t i = 0; i < N; ++i) {
    const uint32_t b = bits_from_f32(x[i]);
    const uint32_t mag = b & 0x7FFFFFFFu;
    const uint32_t neg = 0u - (b >> 31);
    const uint32_t nan = 0u - uint32_t(mag > 0x7F800000u);
    const uint32_t tiny = neg & (0u - uint32_t(mag > (kMinBits & 0x7FFFFFFFu)));
    const uint32_t huge = ~neg & (0u - uint32_t(mag > kMaxBits));
    const float xc = f32_from_bits((b & ~(tiny | huge)) | (kMinBits & tiny) | (kMaxBits & huge));
    const float shifted = xc * 1.44269504088896341f + kShift;
    const float nf = shifted - kShift;
    const int32_t n = int32_t(bits_from_f32(shifted) - bits_from_f32(kShift));
    float r = xc - nf * 0.693359375f;
    r = r - nf * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + (r + 1.0f);
    // 2^n in two halves: n reaches 128 at kMax, one past the largest exponent.
    const int32_t n1 = n >> 1, n2 = n - n1;
    const float e = p * f32_from_bits(uint32_t(n1 + 127) << 23) * f32_from_bits(uint32_t(n2 + 127) << 23);
    y[i] = f32_from_bits((bits_from_f32(e) & ~(tiny | huge | nan)) | (0x7F800000u & huge) | (b & nan));
  }
}

template <size_t N>
inline void bf16_to_f32(const uint16_t* src, float* dst) {
  for (size_t i = 0; i < N; ++i) dst[i] = f32_from_bits(uint32_t(src[i]) << 16);
}

template <size_t N>
inline void f32_to_bf16_aten(const float* src, uint16_t* dst) {
  for (size_t i = 0; i < N; ++i) {
    const uint32_t b = bits_from_f32(src[i]);
    const uint32_t nan = 0u - uint32_t((b & 0x7FFFFFFFu) > 0x7F800000u);
    const uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
    dst[i] = uint16_t((rounded & ~nan) | (0x7FC0u & nan));
  }
}

}  // namespace lanes
RVV_INDUCTOR_END_NAMESPACE
