// Scalar BF16 <-> FP32 conversions, bit-exact with the vector versions in rvv/bf16_widen.h.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "rvv_inductor/config.h"

RVV_INDUCTOR_BEGIN_NAMESPACE

// BF16 is the upper half of an FP32, so widening is exact and needs no rounding.
inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest, ties to even. Adding 0x7FFF plus the lowest kept bit carries into the
// kept half exactly when the dropped half is above one half, or equal to it with an odd
// kept half. Overflow rounds to Inf as IEEE requires, and Inf is unchanged. NaN is
// handled first because the carry could turn it into Inf or flip its sign; it keeps sign
// and top payload bits and gets the quiet bit, so a signalling NaN cannot become Inf.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Accepts c10::BFloat16 (or any 2-byte bf16 type) where the API takes bf16 bits as
// uint16_t, so callers holding at::BFloat16* need not cast.
template <class T>
inline const uint16_t* as_bf16_bits(const T* p) {
  static_assert(sizeof(T) == 2 && std::is_trivially_copyable<T>::value, "expected a 2-byte bf16 type");
  return reinterpret_cast<const uint16_t*>(p);
}
template <class T>
inline uint16_t* as_bf16_bits(T* p) {
  static_assert(sizeof(T) == 2 && std::is_trivially_copyable<T>::value, "expected a 2-byte bf16 type");
  return reinterpret_cast<uint16_t*>(p);
}

RVV_INDUCTOR_END_NAMESPACE
