// Test-side truth, written independently of the library: BF16 decoding and rounding by
// arithmetic on doubles (not by bit tricks), an FP64 Linear reference, the rounding-error
// bound a correct FP32-accumulating kernel must meet, and the list of implementations
// this CPU can run, checked against how the emulator was configured (RVV_EXPECT_*).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "rvv_inductor/cpu_features.h"
#include "rvv_inductor/linear.h"
#include "rvv_inductor/types.h"

namespace testutil {

using rvv_inductor::DType;
using rvv_inductor::KernelPath;

// ---- BF16 by arithmetic ---------------------------------------------------------------

// Value of a bf16 bit pattern: sign, 8-bit exponent (bias 127), 7-bit fraction.
inline double bf16_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 7) & 0xFF, frac = h & 0x7F;
  double mag;
  if (exp == 0xFF)
    mag = frac ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exp == 0)
    mag = std::ldexp(double(frac), -126 - 7);
  else
    mag = std::ldexp(double(128 + frac), exp - 127 - 7);
  return sign ? -mag : mag;
}

// bias[n] (bf16 or f32) as a double; 0 without a bias.
inline double bias_value(const void* bias, DType dt, int64_t n) {
  if (!bias) return 0.0;
  return dt == DType::kBF16 ? bf16_value(static_cast<const uint16_t*>(bias)[n])
                            : double(static_cast<const float*>(bias)[n]);
}

// Bits of the bf16 nearest to v (finite, or +-Inf), ties to the even significand;
// values beyond the largest bf16 by half an ulp or more become Inf. v must be exactly
// representable in fp32's exponent range for the tie test to be meaningful (it is: the
// callers pass floats or small exact sums).
inline uint16_t bf16_round_double(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | 0x7F80;
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): a normal bf16 there has quantum 2^(e-8)
  const int qexp = (e < -125 ? -125 : e) - 8;  // below 2^-126 the quantum stays 2^-133
  const double r = std::ldexp(a, -qexp);       // exact: a scaled by a power of two
  double n = std::floor(r);
  const double frac = r - n;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(n, 2.0) != 0)) n += 1;
  const double rounded = std::ldexp(n, qexp);
  if (rounded == 0) return sign;  // underflow to a signed zero
  // Largest finite bf16 is (2 - 2^-7) * 2^127; anything that rounds above it is Inf.
  if (rounded > std::ldexp(255.0, 127 - 7)) return sign | 0x7F80;
  // rounded is exactly representable in bf16; encode it from its exponent and fraction.
  int re;
  const double rf = std::frexp(rounded, &re);  // rounded = rf * 2^re
  if (re - 1 < -126) return sign | uint16_t(std::ldexp(rounded, 133));  // subnormal
  return sign | uint16_t((re - 1 + 127) << 7) | uint16_t(std::ldexp(rf, 8) - 128);
}

inline bool bf16_is_nan(uint16_t h) { return (h & 0x7F80) == 0x7F80 && (h & 0x7F); }
inline bool bf16_is_quiet_nan(uint16_t h) { return bf16_is_nan(h) && (h & 0x40); }

inline float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---- random data ----------------------------------------------------------------------

// Random bf16 with magnitudes in [2^-6, 2^2), random sign, some exact zeros: products of
// two are >= 2^-12 and sums of up to millions stay far from fp32 overflow and underflow,
// so the error bound below applies without subnormal terms.
inline uint16_t random_bf16(std::mt19937& rng) {
  const uint32_t r = rng();
  if ((r & 31) == 0) return 0;
  const uint16_t sign = (r >> 5) & 1 ? 0x8000 : 0;
  const int exp = 127 - 6 + int((r >> 6) % 8);
  return sign | uint16_t(exp << 7) | uint16_t((r >> 9) & 0x7F);
}

inline std::vector<uint16_t> random_bf16_vector(std::mt19937& rng, size_t n) {
  std::vector<uint16_t> v(n);
  for (auto& h : v) h = random_bf16(rng);
  return v;
}

// ---- FP64 reference and error bound -----------------------------------------------------

struct RefMatrix {
  std::vector<double> value;    // sum_k x*w + bias, in double
  std::vector<double> abs_sum;  // sum_k |x*w| + |bias|: the scale of the rounding error
  int64_t terms;                // K + (bias ? 1 : 0)
};

// Y = X[M,K] . W[N,K]^T + bias, from the same bf16 inputs. Products of two bf16 are exact
// in double (16 significant bits).
inline RefMatrix reference_linear(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, int64_t M, int64_t N,
                                  int64_t K, const void* bias, DType bias_dtype) {
  RefMatrix r;
  r.value.assign(size_t(M * N), 0.0);
  r.abs_sum.assign(size_t(M * N), 0.0);
  r.terms = K + (bias ? 1 : 0);
  std::vector<double> xd(static_cast<size_t>(K));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) xd[size_t(k)] = bf16_value(x[m * ldx + k]);
    for (int64_t n = 0; n < N; ++n) {
      const double b = bias_value(bias, bias_dtype, n);
      double s = b, a = std::fabs(b);
      const uint16_t* row = w + n * ldw;
      for (int64_t k = 0; k < K; ++k) {
        const double p = xd[size_t(k)] * bf16_value(row[k]);
        s += p;
        a += std::fabs(p);
      }
      r.value[size_t(m * N + n)] = s;
      r.abs_sum[size_t(m * N + n)] = a;
    }
  }
  return r;
}

// Worst-case error of summing `terms` exactly-known terms in fp32 in any order:
// gamma_n * sum|terms| with gamma_n = n*u / (1 - n*u), u = 2^-24 (Higham, Thm 4.4). The
// fp64 reference has its own error, gamma_n with u = 2^-53 times the same sum, which is
// added rather than ignored: that is the only slack.
inline double gamma(int64_t n, double u) { return double(n) * u / (1.0 - double(n) * u); }
inline double f32_bound(double abs_sum, int64_t terms) {
  return (gamma(terms, std::ldexp(1.0, -24)) + gamma(terms, std::ldexp(1.0, -53))) * abs_sum;
}
// bf16 output adds the final rounding: half an ulp, at most 2^-8 of the fp32 result.
inline double bf16_bound(double ref, double abs_sum, int64_t terms) {
  const double b32 = f32_bound(abs_sum, terms);
  return b32 + std::ldexp(std::fabs(ref) + b32, -8);
}

// Compares Y (row stride ldy, columns [n0, n1)) with the reference. A NaN reference
// needs a NaN (quiet, for bf16), an infinite one the same Inf: IEEE gives those whatever
// the summation order. exact: finite results must equal the reference rounded once.
// Reports the first few violations with their bound.
inline ::testing::AssertionResult check_output(const RefMatrix& ref, const void* y, DType y_dtype, int64_t ldy,
                                               int64_t M, int64_t N, int64_t n0, int64_t n1, bool exact = false) {
  int bad = 0;
  std::ostringstream msg;
  msg.precision(10);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      const size_t i = size_t(m * N + n);
      const double want = ref.value[i];
      const bool b16 = y_dtype == DType::kBF16;
      const uint16_t h = b16 ? static_cast<const uint16_t*>(y)[m * ldy + n] : 0;
      const double got = b16 ? bf16_value(h) : double(static_cast<const float*>(y)[m * ldy + n]);
      bool ok;
      double bound = 0;
      if (std::isnan(want))
        ok = std::isnan(got) && (!b16 || bf16_is_quiet_nan(h));
      else if (std::isinf(want))
        ok = got == want;
      else if (exact)
        ok = b16 ? h == bf16_round_double(want) : got == want;
      else {
        bound = b16 ? bf16_bound(want, ref.abs_sum[i], ref.terms) : f32_bound(ref.abs_sum[i], ref.terms);
        ok = std::fabs(got - want) <= bound;
      }
      if (!ok && ++bad <= 5)
        msg << "\n  y[" << m << "," << n << "] = " << got << ", reference " << want << ", |diff| "
            << std::fabs(got - want) << " > bound " << bound;
    }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " outputs wrong:" << msg.str();
}

// ---- implementations available here ------------------------------------------------------

inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

struct PathCase {
  KernelPath path;
  rvv_cpu_features cpu;  // narrowed so that the dispatcher picks `path`
};

// Every implementation the running CPU supports, from the plain detection (no override).
inline std::vector<PathCase> available_paths() {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  std::vector<PathCase> out;
  rvv_cpu_features scalar{};
  scalar.is_riscv64 = hw.is_riscv64;
  out.push_back({KernelPath::kScalar, scalar});
#if defined(__riscv)
  if (hw.has_v) {
    rvv_cpu_features v = scalar;
    v.has_v = 1;
    v.vlenb = hw.vlenb;
    out.push_back({KernelPath::kRvv, v});
    if (hw.has_zvfbfmin && hw.has_zvfbfwma) out.push_back({KernelPath::kRvvZvfbf, hw});
  }
#endif
  return out;
}

// Under QEMU each configuration also runs the paths below its best one (scalar in every
// V configuration, plain RVV in the BF16 one). Those paths get their full shape lists in
// their own configuration (scalar: .nov and the host; RVV: .vlenN), so elsewhere a short
// list is enough and keeps the six emulated runs fast.
inline bool is_best_path(KernelPath p) { return available_paths().back().path == p; }

inline std::string path_label(KernelPath p) { return rvv_inductor::kernel_path_name(p); }

}  // namespace testutil
