// The decode attention kernel (attention.h, rvv/attention_bf16.h): the scalar kernel and
// the RVV header compiled with and without hardware BF16, against an FP64 reference
// written here from the definition (softmax over the masked positions, GQA head mapping).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <cstring>
#include <tuple>
#include <vector>

#include "attention_entries.h"
#include "rvv_inductor/attention.h"
#include "test_util.h"

namespace {

using rvv_inductor::AttentionArgs;
using testutil::bf16_round_double;
using testutil::bf16_value;

using AttnFn = void (*)(const AttentionArgs&, int);

void scalar_entry(const AttentionArgs& a, int) { ASSERT_TRUE(rvv_inductor::attention_bf16_scalar(a)); }

struct Impl {
  const char* name;
  AttnFn fn;
};

std::vector<Impl> implementations() {
  std::vector<Impl> out{{"scalar", scalar_entry}};
#if defined(__riscv)
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  if (hw.has_v) out.push_back({"rvv", attention_entry_rvv});
  if (hw.has_v && hw.has_zvfbfmin && hw.has_zvfbfwma) out.push_back({"rvv_zvfbf", attention_entry_rvv_zvfbf});
#endif
  return out;
}

enum class MaskKind { kNone, kPrefix, kHoles, kPerHead, kEmptyRow };

struct Case {
  int64_t B, H, Hkv, T, L, D;
  MaskKind mask;
  int64_t pad;  // extra elements per K/V row and per q head (strided operands)
};

std::string describe(const Case& c) {
  return "B" + std::to_string(c.B) + " H" + std::to_string(c.H) + "/" + std::to_string(c.Hkv) + " T" +
         std::to_string(c.T) + " L" + std::to_string(c.L) + " D" + std::to_string(c.D) + " mask" +
         std::to_string(int(c.mask)) + " pad" + std::to_string(c.pad);
}

// Normal values rounded to bf16: softmax inputs of a realistic spread.
std::vector<uint16_t> normal_bf16(std::mt19937& rng, size_t n, double sd) {
  std::normal_distribution<double> dist(0.0, sd);
  std::vector<uint16_t> v(n);
  for (auto& h : v) h = bf16_round_double(dist(rng));
  return v;
}

struct Problem {
  Case c;
  std::vector<uint16_t> q, k, v;
  std::vector<unsigned char> mask;  // bool storage
  int64_t m_sh = 0;
  AttentionArgs args(std::vector<uint16_t>& out) const {
    AttentionArgs a;
    const int64_t D = c.D, qd = D + c.pad, kd = D + c.pad;
    // q as the transposed view transformers passes: [B, H, T, D] over [B, T, H, qd] storage.
    a.q = q.data();
    a.q_sb = c.T * c.H * qd;
    a.q_sh = qd;
    a.q_st = c.H * qd;
    a.k = k.data();
    a.k_sb = c.Hkv * c.L * kd;
    a.k_sh = c.L * kd;
    a.k_sl = kd;
    a.v = v.data();
    a.v_sb = a.k_sb;
    a.v_sh = a.k_sh;
    a.v_sl = kd;
    if (c.mask != MaskKind::kNone) {
      a.mask = reinterpret_cast<const bool*>(mask.data());
      a.m_sh = m_sh;
      a.m_st = c.L;
      a.m_sb = (m_sh ? c.H : 1) * c.T * c.L;
      a.m_sl = 1;
    }
    a.out = out.data();
    a.B = c.B, a.H = c.H, a.Hkv = c.Hkv, a.T = c.T, a.L = c.L, a.D = D;
    a.scale = float(1.0 / std::sqrt(double(D)));
    return a;
  }
};

Problem make(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p{c, {}, {}, {}, {}, 0};
  const int64_t qd = c.D + c.pad, kd = c.D + c.pad;
  p.q = normal_bf16(rng, size_t(c.B * c.T * c.H * qd), 1.0);
  p.k = normal_bf16(rng, size_t(c.B * c.Hkv * c.L * kd), 1.0);
  p.v = normal_bf16(rng, size_t(c.B * c.Hkv * c.L * kd), 1.0);
  const int64_t mh = c.mask == MaskKind::kPerHead ? c.H : 1;
  p.m_sh = c.mask == MaskKind::kPerHead ? c.T * c.L : 0;
  p.mask.assign(size_t(c.B * mh * c.T * c.L), 0);
  for (int64_t b = 0; b < c.B; b++)
    for (int64_t h = 0; h < mh; h++)
      for (int64_t t = 0; t < c.T; t++)
        for (int64_t l = 0; l < c.L; l++) {
          bool on = true;
          const int64_t pos = c.L / 2 + t;  // the query's position in a half-filled cache
          switch (c.mask) {
            case MaskKind::kNone: break;
            case MaskKind::kPrefix: on = l <= pos; break;
            case MaskKind::kHoles: on = l <= pos && (rng() % 3 != 0 || l == 0); break;
            case MaskKind::kPerHead: on = l <= (pos + h) % c.L; break;
            case MaskKind::kEmptyRow: on = t != 0 && l <= pos; break;
          }
          p.mask[size_t(((b * mh + h) * c.T + t) * c.L + l)] = on;
        }
  return p;
}

// FP64 reference of out[b, t, h, :]; empty mask rows give zeros (the kernel's contract).
std::vector<double> reference(const Problem& p) {
  const Case& c = p.c;
  std::vector<uint16_t> dummy(size_t(c.B * c.T * c.H * c.D));
  const AttentionArgs a = p.args(dummy);
  std::vector<double> out(size_t(c.B * c.T * c.H * c.D), 0.0);
  const int64_t G = c.H / c.Hkv;
  for (int64_t b = 0; b < c.B; b++)
    for (int64_t t = 0; t < c.T; t++)
      for (int64_t h = 0; h < c.H; h++) {
        const int64_t hk = h / G;
        std::vector<double> s(size_t(c.L));
        std::vector<bool> on(size_t(c.L));
        double mx = -INFINITY;
        for (int64_t l = 0; l < c.L; l++) {
          on[size_t(l)] = !a.mask || a.mask[b * a.m_sb + h * a.m_sh + t * a.m_st + l * a.m_sl];
          if (!on[size_t(l)]) continue;
          double d = 0;
          for (int64_t i = 0; i < c.D; i++)
            d += bf16_value(a.q[b * a.q_sb + h * a.q_sh + t * a.q_st + i]) *
                 bf16_value(a.k[b * a.k_sb + hk * a.k_sh + l * a.k_sl + i]);
          s[size_t(l)] = d * double(a.scale);
          mx = std::max(mx, s[size_t(l)]);
        }
        double sum = 0;
        std::vector<double> acc(size_t(c.D), 0.0);
        for (int64_t l = 0; l < c.L; l++) {
          if (!on[size_t(l)]) continue;
          const double e = std::exp(s[size_t(l)] - mx);
          sum += e;
          for (int64_t i = 0; i < c.D; i++) acc[size_t(i)] += e * bf16_value(a.v[b * a.v_sb + hk * a.v_sh + l * a.v_sl + i]);
        }
        for (int64_t i = 0; i < c.D; i++)
          out[size_t(((b * c.T + t) * c.H + h) * c.D + i)] = sum > 0 ? acc[size_t(i)] / sum : 0.0;
      }
  return out;
}

const Case kCases[] = {
    {1, 12, 2, 1, 64, 128, MaskKind::kPrefix, 0},    // Qwen2.5-1.5B decode, G = 6 (blocks 4 + 2)
    {1, 14, 2, 1, 37, 64, MaskKind::kPrefix, 0},     // Qwen2.5-0.5B heads, G = 7 (4 + 3)
    {1, 12, 2, 1, 64, 128, MaskKind::kNone, 0},      // no mask: every position
    {2, 4, 4, 3, 20, 32, MaskKind::kHoles, 8},       // MHA, 3 query rows, batch 2, strided
    {1, 8, 1, 2, 300, 80, MaskKind::kHoles, 0},      // D = 80: a tail at every VLEN; long cache
    {1, 6, 2, 2, 17, 128, MaskKind::kPerHead, 4},    // a different mask per head
    {1, 4, 2, 2, 9, 16, MaskKind::kEmptyRow, 0},     // row t = 0 attends to nothing: zeros
    {1, 3, 3, 1, 1, 16, MaskKind::kPrefix, 0},       // a single cache position
};

TEST(Attention, MatchesFp64Reference) {
  uint32_t seed = 1;
  for (const Case& c : kCases) {
    const Problem p = make(c, seed++);
    const std::vector<double> ref = reference(p);
    for (const Impl& impl : implementations()) {
      std::vector<uint16_t> out(size_t(c.B * c.T * c.H * c.D), 0x7FC0);
      impl.fn(p.args(out), 1);
      int bad = 0;
      double worst = 0;
      for (size_t i = 0; i < out.size(); i++) {
        const double got = bf16_value(out[i]);
        // The output's own BF16 rounding (2^-9 relative) plus FP32 arithmetic: ~2^-8.
        const double tol = std::ldexp(std::fabs(ref[i]), -8) + 1e-4;
        const double err = std::fabs(got - ref[i]);
        worst = std::max(worst, err / tol);
        if (!(err <= tol) && bad++ < 3)
          ADD_FAILURE() << impl.name << " " << describe(c) << " element " << i << ": " << got << " vs " << ref[i];
      }
      EXPECT_EQ(bad, 0) << impl.name << " " << describe(c) << " (worst error / tolerance " << worst << ")";
    }
  }
}

TEST(Attention, RejectsMalformedProblems) {
  std::vector<uint16_t> buf(64);
  AttentionArgs a;
  a.q = a.k = a.v = buf.data();
  a.out = buf.data();
  a.B = 1, a.H = 3, a.Hkv = 2, a.T = 1, a.L = 4, a.D = 8;
  EXPECT_EQ(rvv_inductor::attention_check(a), "H is not a multiple of Hkv");
  a.H = 4;
  EXPECT_EQ(rvv_inductor::attention_check(a), "");
  a.L = 0;
  EXPECT_EQ(rvv_inductor::attention_check(a), "empty or negative size");
  a.L = 4;
  a.k = nullptr;
  EXPECT_EQ(rvv_inductor::attention_check(a), "null pointer");
}

using ExpFn = void (*)(const float*, float*, size_t);
using WidenFn = void (*)(const uint16_t*, float*, size_t);
using NarrowFn = void (*)(const float*, uint16_t*, size_t);

// exp within 4 ulp of FP64 over the normal range, +inf above ln(FLT_MAX), +0 below
// ln(FLT_MIN), NaN kept.
void expect_exp_matches_libm(const char* name, ExpFn fn) {
  std::vector<float> x;
  for (double v = -100.0; v <= 100.0; v += 0.0137) x.push_back(float(v));
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.72f, 88.73f, -87.33f, -87.34f, 0.34657359f, -0.34657359f})
    x.push_back(v);
  x.push_back(INFINITY);
  x.push_back(-INFINITY);
  x.push_back(NAN);
  x.push_back(-NAN);
  std::vector<float> y(x.size());
  fn(x.data(), y.data(), x.size());
  int bad = 0;
  for (size_t i = 0; i < x.size(); i++) {
    const double want = std::exp(double(x[i]));
    bool ok;
    if (std::isnan(x[i])) ok = std::isnan(y[i]);
    else if (x[i] > 88.72283905f) ok = std::isinf(y[i]) && y[i] > 0;  // overflows FLT_MAX
    else if (x[i] < -87.33654475f) ok = y[i] == 0.0f;                  // below FLT_MIN: flushed
    else ok = std::fabs(double(y[i]) - want) <= want * std::ldexp(1.0, -21);  // 4 ulp
    if (!ok && bad++ < 5) ADD_FAILURE() << name << ": exp(" << x[i] << ") = " << y[i] << ", want " << want;
  }
  EXPECT_EQ(bad, 0) << name;
}

// Inductor's generated code converts BF16 <-> FP32 vectors with these (inductor_vec_math.h);
// they must equal c10's scalar casts bit for bit: widening is the 16 bits on top (NaN
// payloads kept), narrowing rounds to nearest even, and every NaN becomes 0x7FC0.
void expect_bf16_casts_bit_exact(const char* name, WidenFn widen, NarrowFn narrow) {
  std::vector<uint16_t> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = uint16_t(i);
  // Every upper half with the lower halves where rounding decides (below, at and above
  // the tie, zero, the extremes): NaN with payloads, +-Inf, the largest finite values
  // (which round to Inf), subnormals and zeros included.
  std::vector<float> f;
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu, 0x4000u, 0xC000u})
      f.push_back(testutil::float_from_bits(hi << 16 | lo));
  for (size_t n : {size_t(65536), size_t(13), size_t(1)}) {  // tails: vl below VLMAX
    std::vector<float> got(n);
    widen(h.data(), got.data(), n);
    for (size_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &got[i], 4);
      ASSERT_EQ(bits, uint32_t(h[i]) << 16) << name << " widen 0x" << std::hex << h[i];
    }
  }
  std::vector<uint16_t> got(f.size());
  narrow(f.data(), got.data(), f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    const uint16_t want = std::isnan(f[i]) ? uint16_t(0x7FC0) : testutil::bf16_round_double(double(f[i]));
    ASSERT_EQ(got[i], want) << name << " narrow " << f[i] << " (index " << i << ")";
  }
}

// lane_math.h (the precompiled-header build of Inductor's vector math) compiled for the
// base ISA, here as on x86: the same contracts as the intrinsic kernels.
TEST(LaneMath, ExpMatchesLibmAndKeepsSpecialValues) { expect_exp_matches_libm("lanes", exp_entry_lanes); }

TEST(LaneMath, Bf16CastsEqualAtenBitForBit) {
  expect_bf16_casts_bit_exact("lanes", bf16_widen_entry_lanes, bf16_narrow_entry_lanes);
}

#if defined(__riscv)
TEST(VecExp, MatchesLibmAndKeepsSpecialValues) {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  if (!hw.has_v) GTEST_SKIP() << "no V: the vector exp is not used";
  expect_exp_matches_libm("rvv", exp_entry_rvv);
  expect_exp_matches_libm("lanes_rvv", exp_entry_lanes_rvv);  // vectorised by the compiler
  if (hw.has_zvfbfmin && hw.has_zvfbfwma) expect_exp_matches_libm("rvv_zvfbf", exp_entry_rvv_zvfbf);
}

TEST(VecConvertBf16, EqualsAtenScalarCastsBitForBit) {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  if (!hw.has_v) GTEST_SKIP() << "no V: the vector conversions are not used";
  expect_bf16_casts_bit_exact("rvv", bf16_widen_aten_entry_rvv, bf16_narrow_aten_entry_rvv);
  expect_bf16_casts_bit_exact("lanes_rvv", bf16_widen_entry_lanes_rvv, bf16_narrow_entry_lanes_rvv);
  if (hw.has_zvfbfmin && hw.has_zvfbfwma)
    expect_bf16_casts_bit_exact("rvv_zvfbf", bf16_widen_aten_entry_rvv_zvfbf, bf16_narrow_aten_entry_rvv_zvfbf);
}
#endif

}  // namespace
