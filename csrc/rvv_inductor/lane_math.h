// exp and BF16 <-> FP32 over N lanes without intrinsics, for code that cannot include
// <riscv_vector.h>: Inductor's precompiled cpp_prefix.h (inductor_vec_math.h), where
// Debian's GCC 16 crashes on RVV intrinsics. Written with GCC/Clang generic vectors
// (vector_size), which the compiler lowers to V instructions itself (fixed-length vectors
// at VLEN >= 128; SSE on x86): unlike a lane loop left to the auto-vectoriser, which
// vectorised in a test file but stayed scalar inside Inductor's generated kernels, this
// cannot silently fall back to one lane at a time. No libm, no branches: every select is
// a bit mask, as the vector comparisons produce them.
//
// Same contracts as the intrinsic versions (rvv/vec_exp.h, rvv/bf16_widen.h *_aten):
// exp within 4 ulp of libm over the normal range, +inf for x > ln(FLT_MAX), +0 below
// ln(FLT_MIN) (so exp(-inf) = 0), NaN kept; widening exact; narrowing rounds to nearest
// even and turns every NaN into ATen's 0x7FC0, bit for bit as c10's scalar casts.
#pragma once
#include <cstddef>
#include <cstdint>

#include "rvv_inductor/config.h"

// Vectors pass by value between these inline helpers only; GCC on x86 warns that their
// ABI depends on AVX, which does not matter for inline code compiled into one TU.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace lanes {

template <class T, size_t N>
struct vec_of {
  typedef T type __attribute__((vector_size(N * sizeof(T))));
  // For loads and stores at element alignment (Inductor's buffers are not vector-aligned):
  // a memcpy into a vector would be done as bytes and re-read through the stack.
  typedef T memory __attribute__((vector_size(N * sizeof(T)), aligned(sizeof(T)), may_alias));
};
template <class T, size_t N>
using vec = typename vec_of<T, N>::type;

template <class T, size_t N>
inline vec<T, N> load(const T* p) {
  return *reinterpret_cast<const typename vec_of<T, N>::memory*>(p);
}

template <class T, size_t N>
inline void store(T* p, vec<T, N> v) {
  *reinterpret_cast<typename vec_of<T, N>::memory*>(p) = v;
}

// Reinterprets the bits (a C-style vector cast does too, but GCC 16 then goes through the
// stack for RVV's fixed-length modes more often).
template <class To, class From>
inline To bits(From v) {
  return __builtin_bit_cast(To, v);
}

template <size_t N>
inline void exp_f32(const float* x, float* y) {
  // Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, as rvv/vec_exp.h (same constants).
  using F = vec<float, N>;
  using U = vec<uint32_t, N>;
  using I = vec<int32_t, N>;
  constexpr uint32_t kMinBits = 0xC2AEAC50u;    // -87.33654475f = ln(FLT_MIN)
  constexpr uint32_t kMaxBits = 0x42B17218u;    // 88.72283905f = ln(FLT_MAX)
  constexpr float kShift = 12582912.0f;         // 1.5 * 2^23: adding it rounds to an integer
  constexpr uint32_t kShiftBits = 0x4B400000u;  // its bits: n sits in the low mantissa bits
  const U b = bits<U>(load<float, N>(x));
  const U mag = b & 0x7FFFFFFFu;
  const U neg = bits<U>(bits<I>(b) >> 31);
  const U nan = (U)(mag > 0x7F800000u);
  const U tiny = neg & (U)(mag > (kMinBits & 0x7FFFFFFFu));
  const U huge = ~neg & (U)(mag > kMaxBits);
  const F xc = bits<F>((b & ~(tiny | huge)) | (kMinBits & tiny) | (kMaxBits & huge));
  const F shifted = xc * 1.44269504088896341f + kShift;
  const F nf = shifted - kShift;
  const I n = bits<I>(bits<U>(shifted) - kShiftBits);
  F r = xc - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  F p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + (r + 1.0f);
  // 2^n in two halves: n reaches 128 at kMax, one past the largest exponent.
  const I n1 = n >> 1, n2 = n - n1;
  const F e = p * bits<F>(bits<U>(n1 + 127) << 23) * bits<F>(bits<U>(n2 + 127) << 23);
  store<uint32_t, N>(reinterpret_cast<uint32_t*>(y),
                     (bits<U>(e) & ~(tiny | huge | nan)) | (0x7F800000u & huge) | (b & nan));
}

template <size_t N>
inline void bf16_to_f32(const uint16_t* src, float* dst) {
  const vec<uint32_t, N> w = __builtin_convertvector(load<uint16_t, N>(src), vec<uint32_t, N>) << 16;
  store<uint32_t, N>(reinterpret_cast<uint32_t*>(dst), w);
}

template <size_t N>
inline void f32_to_bf16_aten(const float* src, uint16_t* dst) {
  using U = vec<uint32_t, N>;
  const U b = load<uint32_t, N>(reinterpret_cast<const uint32_t*>(src));
  const U nan = (U)((b & 0x7FFFFFFFu) > 0x7F800000u);
  const U rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
  store<uint16_t, N>(dst, __builtin_convertvector((rounded & ~nan) | (0x7FC0u & nan), vec<uint16_t, N>));
}

}  // namespace lanes
RVV_INDUCTOR_END_NAMESPACE

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
