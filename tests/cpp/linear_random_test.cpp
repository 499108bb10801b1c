// Random shapes with tails in M, N and K, both weight formats, every output/bias dtype,
// padded leading dimensions, odd block widths and partial block ranges, on every
// implementation this CPU has.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "linear_case.h"
#include "test_util.h"

namespace {

using namespace testutil;

int64_t log_uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  const double a = std::log(double(lo)), b = std::log(double(hi) + 1);
  const double v = std::exp(a + (b - a) * std::uniform_real_distribution<double>(0, 1)(rng));
  return std::min<int64_t>(hi, std::max<int64_t>(lo, int64_t(v)));
}

// M in 1..256, N and K in 1..4096, with M*N*K capped at `budget` multiply-adds so that
// the FP64 reference and the emulated kernels stay fast (the cap mostly trims large M).
std::vector<LinearCase> random_cases(uint32_t seed, int count, int64_t budget, bool packed) {
  static const int64_t odd_nb[] = {1, 3, 16, 17, 32, 48, 96, 128, 256};
  std::mt19937 rng(seed);
  std::vector<LinearCase> out;
  while (int(out.size()) < count) {
    LinearCase c{};
    c.N = log_uniform(rng, 1, 4096);
    c.K = log_uniform(rng, 1, 4096);
    c.M = log_uniform(rng, 1, 256);
    if (c.M * c.N * c.K > budget) continue;
    c.packed = packed;
    c.y_dtype = rng() % 2 ? DType::kBF16 : DType::kF32;
    c.bias_dtype = DType(rng() % 3);  // none, bf16, f32
    c.pad = rng() % 2 ? 0 : 1 + rng() % 7;
    c.nb = packed ? (rng() % 3 ? 0 : odd_nb[rng() % 9]) : (rng() % 2 ? 0 : 1 + rng() % 70);
    c.block_begin = 0;
    c.block_end = -1;
    const int64_t width = c.nb > 0 ? c.nb : 64;
    const int64_t nblocks = (c.N + width - 1) / width;
    if (rng() % 4 == 0 && c.nb > 0 && nblocks > 1) {  // a thread's share
      c.block_begin = rng() % nblocks;
      c.block_end = c.block_begin + 1 + int64_t(rng() % (nblocks - c.block_begin));
    }
    c.seed = rng();
    out.push_back(c);
  }
  return out;
}

void run_random(bool packed, uint32_t seed) {
  for (const PathCase& pc : available_paths()) {
    SCOPED_TRACE(path_label(pc.path));
    const bool full = is_best_path(pc.path);
    for (const LinearCase& c : random_cases(seed, full ? 40 : 8, full ? 1500000 : 300000, packed))
      ASSERT_TRUE(run_linear_case(c, pc));
  }
}

TEST(LinearRandom, PackedWeight) { run_random(true, 11); }
TEST(LinearRandom, RowMajorWeight) { run_random(false, 12); }

// Small exhaustive corner: every M, N, K in 1..9 hits every tail of the 6-row tile, the
// 4-row dot product and the vsetvl strip-mining.
TEST(LinearRandom, AllTinyShapes) {
  for (const PathCase& pc : available_paths()) {
    SCOPED_TRACE(path_label(pc.path));
    uint32_t seed = 100;
    for (int64_t M = 1; M <= 9; ++M)
      for (int64_t N = 1; N <= 9; N += 2)
        for (int64_t K = 1; K <= 9; K += 4)
          for (bool packed : {true, false})
            ASSERT_TRUE(run_linear_case({M, N, K, packed, DType::kF32, DType::kBF16, packed ? 4 : 0, 1, 0, -1, seed++}, pc));
  }
}

}  // namespace
