// Scalar BF16 <-> FP32 conversions, bit-exact with the vector versions in rvv/bf16_widen.h,
// and the FP16 <-> FP32 ones the quantized weights' scales need.
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

// IEEE binary16 (the f16 scales of quantized weights) -> fp32, exact, all classes.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  uint32_t u;
  if (exp == 0x1F) {
    u = sign | 0x7F800000u | (man << 13);  // Inf, NaN (payload kept)
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {  // subnormal: man * 2^-24, normalised
    int e = -1;
    uint32_t m = man;
    do {
      m <<= 1;
      ++e;
    } while (!(m & 0x400u));
    u = sign | uint32_t(112 - e) << 23 | ((m & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// fp32 -> binary16, round to nearest even; overflow to Inf, NaN stays a quiet NaN.
inline uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint16_t(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // >= 65520 rounds to Inf
  if (a < 0x38800000u) {                                   // below 2^-14: subnormal or zero
    if (a < 0x33000000u) return sign;                      // below 2^-25: rounds to 0
    const uint32_t e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24 for e in 102..112
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = a - 0x38000000u;  // rebias the exponent by 127 - 15
  r += 0xFFFu + ((r >> 13) & 1u);
  return uint16_t(sign | (r >> 13));
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
