// Test helpers for INT8 / INT4 packed weights (quant_test.cpp, quant_x8_test.cpp): random
// stored values and scales, their dequantized value straight from the unpacked inputs,
// a problem over all columns, the FP64 reference, and the kernel variants to run.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "rvv_inductor/linear.h"
#include "rvv_inductor/quant_packing.h"
#include "test_util.h"

namespace quantcase {

using namespace rvv_inductor;
using namespace testutil;

struct QuantWeight {
  QuantSpec spec;
  int64_t N, K, nb;
  std::vector<int8_t> values;    // [N, K]
  std::vector<uint16_t> scales;  // [N, G]
  std::vector<uint8_t> zeros;    // [N, G]
  std::vector<uint8_t> packed;
  PackedLayout layout;
};

// Random stored values and scales (the kernels must handle any of them, not only what a
// quantizer produces): INT8 in [-128, 127], INT4 in [0, 15], zero points in [0, 15],
// scales of both signs between 2^-10 and 2^-3 with some zeros.
inline QuantWeight random_quant(std::mt19937& rng, QuantSpec spec, int64_t N, int64_t K, int64_t nb) {
  QuantWeight w{spec, N, K, nb, {}, {}, {}, {}, {}};
  const int64_t G = quant_num_groups(spec, K);
  std::uniform_int_distribution<int> v8(-128, 127), v4(0, 15), ex(-10, -3), coin(0, 15);
  w.values.resize(size_t(N * K));
  for (auto& v : w.values) v = int8_t(spec.format == DType::kInt8 ? v8(rng) : v4(rng));
  w.scales.resize(size_t(N * G));
  for (auto& s : w.scales) {
    const float f = coin(rng) == 0 ? 0.0f : std::ldexp(1.0f + coin(rng) / 16.0f, ex(rng)) * (coin(rng) < 8 ? 1 : -1);
    s = f32_to_scale(f, spec.scale_dtype);
  }
  w.zeros.resize(size_t(N * G));
  for (auto& z : w.zeros) z = uint8_t(v4(rng));
  const int64_t bytes = quant_packed_bytes(spec, N, K, nb);
  EXPECT_GE(bytes, 0);
  w.packed.assign(size_t(bytes) + 1, 0xEE);  // one guard byte past the end
  char err[256] = "";
  EXPECT_EQ(pack_quantized(spec, w.values.data(), K, w.scales.data(), w.zeros.data(), N, K, nb, w.packed.data(), err,
                           sizeof err),
            Status::kOk)
      << err;
  EXPECT_EQ(w.packed.back(), 0xEE) << "pack_quantized wrote past quant_packed_bytes";
  w.layout = make_quant_layout(spec, N, K, nb, 0);
  return w;
}

// W as the layout describes it: (q - z) * s, straight from the unpacked inputs.
inline double dequant(const QuantWeight& w, int64_t n, int64_t k) {
  const int64_t G = quant_num_groups(w.spec, w.K), g = k / quant_group_rows(w.spec, w.K);
  const int z = w.spec.zero_points ? w.zeros[size_t(n * G + g)] : implicit_zero(w.spec.format);
  return double(w.values[size_t(n * w.K + k)] - z) * scale_to_f32(w.scales[size_t(n * G + g)], w.spec.scale_dtype);
}

// Y[M, N] (fp32, row stride N) = X . W^T over all columns, W packed in w.
inline LinearProblem quant_problem(const QuantWeight& w, const std::vector<uint16_t>& x, int64_t M, std::vector<float>& y) {
  LinearProblem p{};
  p.M = M, p.N = w.N, p.K = w.K, p.x = x.data(), p.ldx = w.K;
  p.weight_layout = WeightLayout::kPacked;
  p.w = w.packed.data(), p.layout = &w.layout;
  p.y = y.data(), p.ldy = w.N, p.y_dtype = DType::kF32, p.block_end = -1;
  return p;
}

// FP64 reference on the dequantized weights. abs_sum bounds what the kernels sum in fp32:
// per group they add x * q and subtract z * sum(x), then scale, so the terms' magnitudes
// are |x| * (|q| + |z|) * |s|, which is what the error bound is taken over.
inline RefMatrix quant_reference(const QuantWeight& w, const std::vector<uint16_t>& x, int64_t M, const void* bias,
                          DType bias_dtype, double* max_abs_x) {
  RefMatrix r;
  r.value.assign(size_t(M * w.N), 0.0);
  r.abs_sum.assign(size_t(M * w.N), 0.0);
  // Each K row is one product, plus per group the zero-point and scale steps, plus the bias.
  r.terms = w.K + 2 * quant_num_groups(w.spec, w.K) + 2;
  const int64_t G = quant_num_groups(w.spec, w.K), gr = quant_group_rows(w.spec, w.K);
  *max_abs_x = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < w.N; ++n) {
      const double b = bias_value(bias, bias_dtype, n);
      double s = b, a = std::fabs(b);
      for (int64_t k = 0; k < w.K; ++k) {
        const double xv = bf16_value(x[size_t(m * w.K + k)]);
        *max_abs_x = std::fmax(*max_abs_x, std::fabs(xv));
        s += xv * dequant(w, n, k);
        const int64_t g = k / gr;
        const int z = w.spec.zero_points ? w.zeros[size_t(n * G + g)] : implicit_zero(w.spec.format);
        const double sc = std::fabs(double(scale_to_f32(w.scales[size_t(n * G + g)], w.spec.scale_dtype)));
        a += std::fabs(xv) * (std::abs(int(w.values[size_t(n * w.K + k)])) + z) * sc;
      }
      r.value[size_t(m * w.N + n)] = s;
      r.abs_sum[size_t(m * w.N + n)] = a;
    }
  return r;
}

struct Variant {
  std::string name;  // kernel name or "scalar"
  rvv_cpu_features cpu;
};

// The scalar code and every table kernel of `format` the CPU has, each with the features
// that select exactly its ISA variant.
inline std::vector<Variant> variants_for(DType format, KernelKind kind = KernelKind::kGemv) {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  std::vector<Variant> out = {{"scalar", features_for_path(KernelPath::kScalar, 0)}};
  std::vector<KernelInfo> ks(64);
  ks.resize(list_kernels(hw, ks.data(), ks.size()));
  for (const KernelInfo& k : ks)
    if (k.format == format && k.kind == kind) out.push_back({k.name, features_for_path(k.path, hw.vlenb)});
  return out;
}

// x_q and dx of one row, from the definition in quant_x8.h (not from its code).
struct QuantRow {
  std::vector<int> q;
  std::vector<float> dx;
};
inline QuantRow quantize_row(const uint16_t* x, int64_t K) {
  QuantRow r{std::vector<int>(size_t(K)), {}};
  for (int64_t k0 = 0; k0 < K; k0 += 32) {
    float amax = 0;
    for (int64_t k = k0; k < std::min(K, k0 + 32); ++k) amax = std::max(amax, std::fabs(bf16_to_f32(x[k])));
    const bool tiny = amax < std::ldexp(1.0f, -96);
    r.dx.push_back(tiny ? 0.0f : amax / 127.0f);
    const float inv = tiny ? 0.0f : 127.0f / amax;
    for (int64_t k = k0; k < std::min(K, k0 + 32); ++k) {
      const float v = bf16_to_f32(x[k]) * inv;
      const float f = std::floor(v), d = v - f;  // round half to even, by hand
      int q = int(f) + (d > 0.5f || (d == 0.5f && (int64_t(f) & 1)) ? 1 : 0);
      EXPECT_LE(std::abs(q), 127);
      r.q[size_t(k)] = q;
    }
  }
  return r;
}

}  // namespace quantcase
