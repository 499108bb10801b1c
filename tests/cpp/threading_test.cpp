// Several threads share one packed weight and one Y, each computing the block range
// partition_blocks gives it; the result must equal a single-threaded reference.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "rvv_inductor/linear.h"
#include "rvv_inductor/packing.h"
#include "test_util.h"

namespace {

using namespace testutil;
using namespace rvv_inductor;

TEST(Threading, DisjointBlockRangesOfOnePackedWeight) {
  for (const PathCase& pc : available_paths()) {
    SCOPED_TRACE(path_label(pc.path));
    for (int64_t M : {1, 5}) {
      for (int threads : {2, 3}) {
        const int64_t N = 1000, K = 300, nb = preferred_nb(pc.cpu);
        std::mt19937 rng(uint32_t(M * 10 + threads));
        const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
        const std::vector<uint16_t> w = random_bf16_vector(rng, size_t(N * K));
        const std::vector<uint16_t> bias = random_bf16_vector(rng, size_t(N));
        PackedWeight pw;
        ASSERT_EQ(PackedWeight::pack(w.data(), K, N, K, nb, pc.cpu.vlenb, &pw), Status::kOk);
        std::vector<uint16_t> y(size_t(M * N), 0xFFFF);
        std::vector<Status> status(size_t(threads), Status::kNoMemory);
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t)
          pool.emplace_back([&, t] {
            const BlockRange r = partition_blocks(pw.layout().num_blocks, threads, t);
            LinearProblem p{};
            p.M = M;
            p.N = N;
            p.K = K;
            p.x = x.data();
            p.ldx = K;
            p.weight_layout = WeightLayout::kPacked;
            p.w = pw.data();
            p.layout = &pw.layout();
            p.nb = nb;
            p.bias = bias.data();
            p.bias_dtype = DType::kBF16;
            p.y = y.data();
            p.ldy = N;
            p.y_dtype = DType::kBF16;
            p.block_begin = r.begin;
            p.block_end = r.end;
            status[size_t(t)] = linear_bf16(p, pc.cpu);
          });
        for (auto& th : pool) th.join();
        for (Status s : status) ASSERT_EQ(s, Status::kOk);
        const RefMatrix ref = reference_linear(x.data(), K, w.data(), K, M, N, K, bias.data(), DType::kBF16);
        EXPECT_TRUE(check_output(ref, y.data(), DType::kBF16, N, M, N, 0, N)) << M << " rows, " << threads << " threads";
      }
    }
  }
}

}  // namespace
