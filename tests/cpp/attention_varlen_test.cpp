// Attention over a packed batch of variable-length sequences (attention.h,
// attention_varlen_rows), through the runtime dispatcher (linear.h, attention_varlen) on
// the scalar path and on the strongest vector variant the CPU has, against an FP64
// reference written here from the definition: query j of a sequence with nq queries and nk
// keys attends keys [0, nk - nq + j] of its own sequence (or the last `window` of them).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "rvv_inductor/attention.h"
#include "rvv_inductor/linear.h"
#include "test_util.h"

namespace {

using rvv_inductor::KernelPath;
using rvv_inductor::Status;
using rvv_inductor::VarlenAttentionArgs;
using testutil::bf16_round_double;
using testutil::bf16_value;

struct Seq {
  int32_t nq, nk;
};

struct VarlenCase {
  const char* what;
  std::vector<Seq> seqs;
  int64_t H, Hkv, D, pad, padding_rows, window;
};

struct Packed {
  VarlenCase c;
  std::vector<uint16_t> q, k, v;
  std::vector<int32_t> cu_q{0}, cu_k{0};
  int64_t Tq = 0, Lk = 0;

  VarlenAttentionArgs args(std::vector<uint16_t>& out) const {
    VarlenAttentionArgs a{};
    a.q = q.data(), a.q_st = c.H * c.D + c.pad, a.q_sh = c.D;
    a.k = k.data(), a.k_sl = c.Hkv * c.D + c.pad, a.k_sh = c.D;
    a.v = v.data(), a.v_sl = c.Hkv * c.D + c.pad, a.v_sh = c.D;
    a.cu_q = cu_q.data(), a.cu_k = cu_k.data(), a.out = out.data();
    a.S = int64_t(c.seqs.size()), a.Tq = Tq, a.Lk = Lk, a.H = c.H, a.Hkv = c.Hkv, a.D = c.D;
    a.window = c.window;
    a.scale = float(1.0 / std::sqrt(double(c.D)));
    return a;
  }
};

Packed make(const VarlenCase& c, uint32_t seed) {
  Packed p;
  p.c = c;
  for (const Seq& s : c.seqs) {
    p.cu_q.push_back(p.cu_q.back() + s.nq);
    p.cu_k.push_back(p.cu_k.back() + s.nk);
  }
  p.Tq = p.cu_q.back() + c.padding_rows;
  p.Lk = p.cu_k.back();
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  auto fill = [&](std::vector<uint16_t>& x, size_t n) {
    x.resize(n);
    for (auto& h : x) h = bf16_round_double(dist(rng));
  };
  fill(p.q, size_t(p.Tq * (c.H * c.D + c.pad)));
  fill(p.k, size_t(p.Lk * (c.Hkv * c.D + c.pad)));
  fill(p.v, size_t(p.Lk * (c.Hkv * c.D + c.pad)));
  return p;
}

std::vector<double> reference(const Packed& p) {
  const VarlenCase& c = p.c;
  std::vector<uint16_t> dummy(1);
  const VarlenAttentionArgs a = p.args(dummy);
  std::vector<double> out(size_t(p.Tq * c.H * c.D), 0.0);  // padding rows stay zero
  for (size_t s = 0; s < c.seqs.size(); s++) {
    const int64_t nq = c.seqs[s].nq, nk = c.seqs[s].nk;
    for (int64_t j = 0; j < nq; j++) {
      const int64_t row = p.cu_q[s] + j, last = nk - nq + j;
      const int64_t first = c.window > 0 ? std::max<int64_t>(0, last + 1 - c.window) : 0;
      for (int64_t h = 0; h < c.H; h++) {
        const int64_t hk = h / (c.H / c.Hkv);
        std::vector<double> sc;
        double mx = -INFINITY;
        for (int64_t l = first; l <= last; l++) {
          double d = 0;
          for (int64_t i = 0; i < c.D; i++)
            d += bf16_value(a.q[row * a.q_st + h * a.q_sh + i]) *
                 bf16_value(a.k[(p.cu_k[s] + l) * a.k_sl + hk * a.k_sh + i]);
          sc.push_back(d * double(a.scale));
          mx = std::max(mx, sc.back());
        }
        double sum = 0;
        std::vector<double> acc(size_t(c.D), 0.0);
        for (int64_t l = first; l <= last; l++) {
          const double e = std::exp(sc[size_t(l - first)] - mx);
          sum += e;
          for (int64_t i = 0; i < c.D; i++) acc[size_t(i)] += e * bf16_value(a.v[(p.cu_k[s] + l) * a.v_sl + hk * a.v_sh + i]);
        }
        for (int64_t i = 0; i < c.D; i++) out[size_t((row * c.H + h) * c.D + i)] = acc[size_t(i)] / sum;
      }
    }
  }
  return out;
}

// The CPU as detected, and the same with V switched off (the scalar path).
std::vector<std::pair<std::string, rvv_cpu_features>> cpus() {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  std::vector<std::pair<std::string, rvv_cpu_features>> out;
  rvv_cpu_features scalar = hw;
  scalar.has_v = scalar.has_zvfh = scalar.has_zvfbfmin = scalar.has_zvfbfwma = 0;
  out.push_back({"scalar", scalar});
  if (hw.has_v) out.push_back({"detected", hw});
  return out;
}

const VarlenCase kVarlenCases[] = {
    // Continuous-batching decode: one new token per request, contexts of different lengths.
    {"decode x5", {{1, 40}, {1, 1}, {1, 33}, {1, 64}, {1, 7}}, 8, 2, 128, 0, 0, 0},
    // A mixed batch: two decodes, a whole prefill, a chunked prefill (3 new of 20), padding rows.
    {"mixed", {{1, 12}, {5, 5}, {3, 20}, {1, 2}}, 12, 2, 128, 8, 3, 0},
    // D = 80 (a tail at every VLEN), MHA, a sliding window of 6 keys.
    {"window", {{4, 9}, {1, 30}, {2, 2}}, 4, 4, 80, 0, 0, 6},
    // Only padding: nothing to attend, zeros out.
    {"empty", {}, 8, 2, 64, 0, 2, 0},
};

TEST(AttentionVarlen, MatchesFp64Reference) {
  uint32_t seed = 100;
  for (const VarlenCase& c : kVarlenCases) {
    const Packed p = make(c, seed++);
    const std::vector<double> ref = reference(p);
    for (const auto& [name, cpu] : cpus()) {
      std::vector<uint16_t> one;
      for (int threads : {1, 3}) {
        std::vector<uint16_t> out(size_t(p.Tq * c.H * c.D), 0x7FC0);
        KernelPath used;
        char err[256];
        ASSERT_EQ(rvv_inductor::attention_varlen(p.args(out), cpu, threads, &used, err, sizeof err), Status::kOk)
            << c.what << " " << name << ": " << err;
        if (name == "scalar") EXPECT_EQ(used, KernelPath::kScalar);
        else EXPECT_NE(used, KernelPath::kScalar);
        int bad = 0;
        for (size_t i = 0; i < out.size(); i++) {
          const double got = bf16_value(out[i]);
          const double tol = std::ldexp(std::fabs(ref[i]), -8) + 1e-4;  // BF16 output rounding + FP32
          if (!(std::fabs(got - ref[i]) <= tol) && bad++ < 3)
            ADD_FAILURE() << c.what << " " << name << " threads " << threads << " element " << i << ": " << got
                          << " vs " << ref[i];
        }
        EXPECT_EQ(bad, 0) << c.what << " " << name << " threads " << threads;
        // Rows are computed the same way whatever the split.
        if (threads == 1) one = out;
        else EXPECT_EQ(out, one) << c.what << " " << name << ": threads change the result";
      }
    }
  }
}

TEST(AttentionVarlen, RejectsMalformedBatches) {
  const Packed p = make({"ok", {{1, 4}, {2, 3}}, 4, 2, 16, 0, 0, 0}, 7);
  std::vector<uint16_t> out(size_t(p.Tq * 4 * 16));
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  auto status = [&](VarlenAttentionArgs a) {
    char err[256];
    return rvv_inductor::attention_varlen(a, hw, 1, nullptr, err, sizeof err);
  };
  EXPECT_EQ(status(p.args(out)), Status::kOk);
  std::vector<int32_t> bad_q{0, 2, 1};  // decreasing
  VarlenAttentionArgs a = p.args(out);
  a.cu_q = bad_q.data();
  EXPECT_EQ(status(a), Status::kBadShape);
  EXPECT_EQ(rvv_inductor::attention_varlen_check(a), "cu_seqlens decrease");
  std::vector<int32_t> more_q{0, 1, 4};  // 3 queries against 3 keys is fine, but rows run out (Tq = 3)
  a = p.args(out);
  a.cu_q = more_q.data();
  EXPECT_EQ(rvv_inductor::attention_varlen_check(a), "cu_seqlens run past the rows");
  std::vector<int32_t> few_k{0, 4, 5};  // the second sequence: 2 queries, 1 key
  a = p.args(out);
  a.cu_k = few_k.data();
  EXPECT_EQ(rvv_inductor::attention_varlen_check(a), "a sequence has fewer keys than queries");
  std::vector<int32_t> off{1, 2, 3};
  a = p.args(out);
  a.cu_q = off.data();
  EXPECT_EQ(rvv_inductor::attention_varlen_check(a), "cu_seqlens do not start at 0");
  a = p.args(out);
  a.k = nullptr;
  EXPECT_EQ(status(a), Status::kNullPointer);
  a = p.args(out);
  a.H = 3;
  EXPECT_EQ(rvv_inductor::attention_varlen_check(a), "H is not a multiple of Hkv");
}

}  // namespace
