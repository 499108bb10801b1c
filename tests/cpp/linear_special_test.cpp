// Results that must be exact: NaN / Inf propagation, and inputs whose partial sums are
// all exactly representable in fp32, where any summation order gives the exact result,
// so a skipped or repeated term cannot hide inside the rounding bound even at K = 16384.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "linear_case.h"
#include "test_util.h"

namespace {

using namespace testutil;

constexpr uint16_t kPosInf = 0x7F80, kNegInf = 0xFF80, kNaN = 0x7FC1;

// Row 0 of X gets +Inf at k=1, row 1 a NaN at k=2; W row 3 gets a NaN at k=0 and W row 5
// -Inf at k=K-1. Column k=1 of W is made nonzero so that row 0 is +Inf (not NaN from
// Inf * 0) except where W's specials meet it. The FP64 reference decides each output
// by IEEE rules: NaN, +-Inf or finite.
void inject_specials(std::vector<uint16_t>& x, std::vector<uint16_t>& w, int64_t ldx, int64_t ldw, int64_t M,
                     int64_t N, int64_t K) {
  for (int64_t n = 0; n < N; ++n)
    if ((w[size_t(n * ldw + 1)] & 0x7FFF) == 0) w[size_t(n * ldw + 1)] = 0x3F80;
  x[1] = kPosInf;
  if (M > 1) x[size_t(ldx + 2)] = kNaN;
  if (N > 3) w[size_t(3 * ldw)] = kNaN;
  if (N > 5) w[size_t(5 * ldw + K - 1)] = kNegInf;
}

TEST(LinearSpecial, NanAndInfPropagate) {
  for (const PathCase& pc : available_paths()) {
    SCOPED_TRACE(path_label(pc.path));
    for (int64_t M : {1, 3, 7})
      for (bool packed : {true, false})
        for (DType yd : {DType::kF32, DType::kBF16}) {
          const int64_t N = 70, K = 45;
          CaseOptions opt;
          opt.tweak = [&](std::vector<uint16_t>& x, std::vector<uint16_t>& w, int64_t ldx, int64_t ldw) {
            inject_specials(x, w, ldx, ldw, M, N, K);
          };
          ASSERT_TRUE(run_linear_case({M, N, K, packed, yd, DType::kNone, 0, 2, 0, -1, 5}, pc, opt));
        }
  }
}

TEST(LinearSpecial, Bf16OutputOverflowRoundsToInf) {
  // x = 1 and exact fp32 sums near the top of the bf16 range (largest finite bf16 is
  // 1020 * 2^118): 2^127 + 255 * 2^119 + 2^118 = 1023 * 2^118 is above the halfway point
  // 1022 * 2^118 and becomes +Inf; exactly halfway ties to the even neighbour, which is
  // Inf; 1020 * 2^118 stays finite. All partial sums are exact and finite in fp32.
  static const uint16_t rows[4][3] = {{0x7F00, 0x7EFF, 0x7A80},   // 1023 * 2^118 -> +Inf
                                      {0x7F00, 0x7EFE, 0x0000},   // 1020 * 2^118 -> 0x7F7F
                                      {0xFF00, 0xFEFF, 0xFA80},   // -> -Inf
                                      {0x7F00, 0x7EFF, 0x0000}};  // 1022 * 2^118, tie -> +Inf
  for (const PathCase& pc : available_paths()) {
    SCOPED_TRACE(path_label(pc.path));
    for (bool packed : {true, false}) {
      CaseOptions opt;
      opt.tweak = [](std::vector<uint16_t>& x, std::vector<uint16_t>& w, int64_t ldx, int64_t ldw) {
        for (int64_t m = 0; m < 2; ++m)
          for (int64_t k = 0; k < 3; ++k) x[size_t(m * ldx + k)] = 0x3F80;
        for (int64_t n = 0; n < 4; ++n)
          for (int64_t k = 0; k < 3; ++k) w[size_t(n * ldw + k)] = rows[n][k];
      };
      opt.exact = true;
      ASSERT_TRUE(run_linear_case({2, 4, 3, packed, DType::kBF16, DType::kNone, 0, 0, 0, -1, 1}, pc, opt));
      ASSERT_TRUE(run_linear_case({1, 4, 3, packed, DType::kBF16, DType::kNone, 0, 0, 0, -1, 1}, pc, opt));
    }
  }
}

// Integers in [-4, 4] (exact in bf16) keep every partial sum below 16 * 16384 < 2^24.
void small_integers(std::vector<uint16_t>& x, std::vector<uint16_t>& w, int64_t, int64_t) {
  static const uint16_t ints[] = {0xC080, 0xC040, 0xC000, 0xBF80, 0x0000, 0x3F80, 0x4000, 0x4040, 0x4080};
  uint32_t s = 12345;
  for (auto* v : {&x, &w})
    for (auto& h : *v) {
      s = s * 1664525u + 1013904223u;
      h = ints[(s >> 16) % 9];
    }
}

TEST(LinearSpecial, ExactInputsGiveExactResults) {
  struct Shape {
    int64_t M, K;
    DType y;
    int64_t pad;
  };
  // K = 16384 and an odd K for the unrolled loops' tails; M = 7 for the 6-row tile's tail.
  const Shape shapes[] = {{1, 1001, DType::kF32, 3}, {1, 16384, DType::kF32, 0}, {2, 16383, DType::kBF16, 0},
                          {7, 1001, DType::kF32, 3}};
  for (const PathCase& pc : available_paths()) {
    SCOPED_TRACE(path_label(pc.path));
    CaseOptions opt;
    opt.tweak = small_integers;
    opt.exact = true;
    uint32_t seed = 1;
    for (const Shape& s : shapes) {
      for (bool packed : {true, false})
        ASSERT_TRUE(run_linear_case({s.M, 67, s.K, packed, s.y, DType::kNone, 0, s.pad, 0, -1, seed++}, pc, opt));
      if (!is_best_path(pc.path)) break;  // see test_util.h
    }
  }
}

}  // namespace

namespace {

using namespace rvv_inductor;
using namespace testutil;

// The packed BF16 GEMM with M > 18 widens each weight chunk once into an fp32 panel for all
// tiles (rvv/gemm_bf16_packed.h); each output keeps its sum order, so the result equals
// the same rows run 6 at a time (the per-tile path) bit for bit, bias and K blocks included.
TEST(LinearSpecial, PanelGemmEqualsPerTileGemmBitForBit) {
  for (const PathCase& pc : available_paths()) {
    SCOPED_TRACE(path_label(pc.path));
    std::mt19937 rng(91);
    const int64_t nb = preferred_nb(pc.cpu);
    for (int64_t M : {19, 40})
      for (int64_t K : {7, 300, 1100}) {
        const int64_t N = 2 * nb + 5;
        const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
        const std::vector<uint16_t> w = random_bf16_vector(rng, size_t(N * K));
        const std::vector<uint16_t> bias = random_bf16_vector(rng, size_t(N));
        std::vector<uint16_t> wp(size_t(packed_size(N, K, nb)));
        ASSERT_EQ(pack_bf16(w.data(), K, N, K, nb, wp.data()), Status::kOk);
        const PackedLayout l = make_packed_layout(N, K, nb, pc.cpu.vlenb);
        auto run = [&](int64_t m0, int64_t rows, std::vector<float>& y) {
          LinearProblem p{};
          p.M = rows, p.N = N, p.K = K, p.x = x.data() + m0 * K, p.ldx = K;
          p.weight_layout = WeightLayout::kPacked, p.w = wp.data(), p.layout = &l;
          p.bias = bias.data(), p.bias_dtype = DType::kBF16;
          p.y = y.data() + m0 * N, p.ldy = N, p.y_dtype = DType::kF32, p.block_end = -1;
          return linear_bf16(p, pc.cpu);
        };
        std::vector<float> all(size_t(M * N)), tiles(size_t(M * N));
        ASSERT_EQ(run(0, M, all), Status::kOk);
        for (int64_t m0 = 0; m0 < M; m0 += 6) ASSERT_EQ(run(m0, std::min<int64_t>(6, M - m0), tiles), Status::kOk);
        ASSERT_EQ(0, std::memcmp(all.data(), tiles.data(), all.size() * sizeof(float))) << "M=" << M << " K=" << K;
      }
  }
}

}  // namespace
