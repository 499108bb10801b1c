// The Linear layers of Qwen2.5-1.5B (hidden 1536, intermediate 8960, 12/2 attention
// heads of 128, vocabulary 151936), decode (M = 1) and small batches, packed as the
// backend will use them. Full shapes where emulation allows; otherwise the dimension
// that stresses the kernel is kept and the other shrunk, as noted per case.
#include <gtest/gtest.h>

#include <vector>

#include "linear_case.h"
#include "test_util.h"

namespace {

using namespace testutil;

struct LlmShape {
  const char* name;
  int64_t K, N;
};

// K -> N as in the model, bf16 output with a bf16 bias like PyTorch's BF16 Linear.
void run_shapes(const std::vector<LlmShape>& shapes, const std::vector<int64_t>& ms, bool packed) {
  for (const PathCase& pc : available_paths()) {
    SCOPED_TRACE(path_label(pc.path));
    if (!is_best_path(pc.path)) continue;  // see test_util.h
    uint32_t seed = 7;
    for (const LlmShape& s : shapes)
      for (int64_t M : ms) {
        SCOPED_TRACE(s.name);
        ASSERT_TRUE(run_linear_case({M, s.N, s.K, packed, DType::kBF16, DType::kBF16, 0, 0, 0, -1, seed++}, pc));
      }
  }
}

TEST(LinearLlmShapes, DecodeFullShapes) {
  run_shapes({{"q_proj 1536->1536", 1536, 1536},
              {"k/v_proj 1536->256", 1536, 256},
              {"qkv_proj fused 1536->2048", 1536, 2048},
              {"down_proj 8960->1536", 8960, 1536}},
             {1}, true);
}

TEST(LinearLlmShapes, DecodeWideShapes) {
  // gate/up_proj 1536->17920 (fused gate+up) with K cut to 256: the N extent (280 blocks
  // of 64) is what differs from the shapes above.
  // lm_head 1536->151936 with K cut to 8: N = 151936 is 2374 blocks of 64, the largest
  // block count and the largest output offsets; full K would be 233M multiply-adds.
  run_shapes({{"gate_up 256->17920 (K cut)", 256, 17920}, {"lm_head 8->151936 (K cut)", 8, 151936}}, {1}, true);
}

TEST(LinearLlmShapes, LongK) {
  // K = 16384 with N cut to 96: long accumulations (error bound grows with K) and the
  // unrolled K loop's tail.
  run_shapes({{"K 16384->96", 16384, 96}}, {1, 4}, true);
}

TEST(LinearLlmShapes, SmallBatches) {
  // M in {2, 4, 16}: the 6-row tile with its tails, on the 1536-wide projections with N
  // cut to 512 to bound emulation time.
  run_shapes({{"q_proj 1536->512 (N cut)", 1536, 512}}, {2, 4, 16}, true);
}

TEST(LinearLlmShapes, DecodeRowMajor) {
  run_shapes({{"q_proj 1536->1536 row-major", 1536, 1536}, {"down_proj 8960->256 row-major (N cut)", 8960, 256}},
             {1}, false);
}

}  // namespace
