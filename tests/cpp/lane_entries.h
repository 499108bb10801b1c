// lane_math.h over any n, in Inductor's chunks (8 floats for exp, 16 lanes for the BF16
// casts), the tail padded with zeros. Internal linkage: each TU gets the copy compiled
// for its own -march (lane_entry.cpp: base ISA; attention_entry_rvv.cpp: V).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "rvv_inductor/lane_math.h"

// The templates are instantiated here, after lane_math.h restored the warning: GCC on x86
// would warn that a by-value vector's ABI depends on AVX (these helpers are all inline).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace {

template <size_t N, class In, class Out, class Fn>
void lanes_in_chunks(const In* src, Out* dst, size_t n, Fn fn) {
  for (size_t i = 0; i < n; i += N) {
    const size_t k = std::min(N, n - i);
    In in[N] = {};
    Out out[N];
    std::memcpy(in, src + i, k * sizeof(In));
    fn(in, out);
    std::memcpy(dst + i, out, k * sizeof(Out));
  }
}

inline void lanes_exp(const float* x, float* y, size_t n) {
  lanes_in_chunks<8>(x, y, n, [](const float* in, float* out) { rvv_inductor::lanes::exp_f32<8>(in, out); });
}

inline void lanes_widen(const uint16_t* h, float* f, size_t n) {
  lanes_in_chunks<16>(h, f, n, [](const uint16_t* in, float* out) { rvv_inductor::lanes::bf16_to_f32<16>(in, out); });
}

inline void lanes_narrow(const float* f, uint16_t* h, size_t n) {
  lanes_in_chunks<16>(f, h, n,
                      [](const float* in, uint16_t* out) { rvv_inductor::lanes::f32_to_bf16_aten<16>(in, out); });
}

}  // namespace
