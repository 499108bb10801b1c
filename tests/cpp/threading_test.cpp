// Threads. (1) Several caller threads share one packed weight and one Y, each computing
// the block range partition_blocks gives it; the result must equal a single-threaded
// reference. (2) linear_bf16's own split (LinearOperands::nthreads, partition_columns):
// every thread of the decode shapes gets work, the imbalance is bounded, and the output
// is bit for bit the one-thread output for every weight format and kernel kind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "rvv_inductor/linear.h"
#include "rvv_inductor/packing.h"
#include "rvv_inductor/quant_packing.h"
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
            p.nthreads = 1;  // the caller splits
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

// The decode shapes of Qwen2.5-1.5B (N of q/o, k/v, down, gate/up, fused gate_up,
// lm_head) at the block widths of VLEN 128/256/512 (nb = 2 * vlenb): with slices (bf16),
// every thread of 2/4/8 gets columns, the ranges tile [0, N) in order, and the busiest
// thread has at most 1.25x the mean (>= 4 units per thread, or units of min(nb, 16)).
// Without slices (quantized formats: whole blocks) the blocks are dealt evenly (at most
// ceil(blocks / threads) each) and threads beyond the block count idle.
TEST(PartitionColumns, DecodeShapesEveryThreadWorks) {
  for (int64_t nb : {32, 64, 128}) {
    for (int64_t N : {1536, 256, 8960, 17920, 151936}) {
      for (int threads : {1, 2, 4, 8}) {
        for (bool slices : {true, false}) {
          SCOPED_TRACE(testing::Message() << "nb " << nb << " N " << N << " threads " << threads << " slices " << slices);
          int64_t next = 0, maxw = 0, idle = 0;
          for (int t = 0; t < threads; ++t) {
            const ColumnSplit c = partition_columns(0, N, nb, slices, threads, t);
            ASSERT_EQ(c.begin, next) << "thread " << t;
            ASSERT_LE(c.begin, c.end);
            ASSERT_EQ(c.begin % c.unit, 0);
            ASSERT_EQ(nb % c.unit, 0);
            ASSERT_GE(c.unit, slices ? std::min<int64_t>(nb, 16) : nb);
            next = c.end;
            maxw = std::max(maxw, c.end - c.begin);
            idle += c.begin == c.end;
          }
          EXPECT_EQ(next, N);
          const int64_t blocks = (N + nb - 1) / nb;
          if (slices) {
            EXPECT_EQ(idle, 0);
            EXPECT_LE(double(maxw) * threads / double(N), 1.25);
          } else {  // whole blocks, dealt evenly
            EXPECT_EQ(idle, blocks >= threads ? 0 : threads - blocks);
            EXPECT_LE(maxw, (blocks + threads - 1) / threads * nb);
          }
        }
      }
    }
  }
}

TEST(PartitionColumns, OddRangesAndBadArguments) {
  // A range starting mid-weight (block_begin > 0) and a partial last block.
  for (int threads : {3, 5}) {
    int64_t next = 128;
    for (int t = 0; t < threads; ++t) {
      const ColumnSplit c = partition_columns(128, 1000, 64, true, threads, t);
      EXPECT_EQ(c.begin, next);
      next = c.end;
    }
    EXPECT_EQ(next, 1000);
  }
  EXPECT_EQ(partition_columns(0, 0, 64, true, 4, 0).end, 0);
  const ColumnSplit bad = partition_columns(0, 100, 64, true, 4, 4);  // t out of range: empty
  EXPECT_EQ(bad.begin, bad.end);
  EXPECT_EQ(linear_threads(1), 1);
}

// One weight format / layout case of the bit-identity test.
struct ThreadCase {
  const char* name;
  WeightLayout layout;
  DType format;  // kBF16, kInt8, kInt4
  QuantSpec spec;
};

// linear_bf16 with nthreads = 1 and with 2, 3, 4, 8 threads: identical bits, for packed
// bf16 (GEMV and GEMM, thin N that takes sliced blocks), row-major bf16 and INT8/INT4,
// on every implementation; the one-thread output is checked against the fp64 reference
// for bf16 (the quantized kernels have their own suites).
TEST(Threading, OwnSplitIsBitIdenticalToOneThread) {
  ASSERT_GE(linear_threads(4), 4) << "libgomp.so.1 must be loadable (libgomp1), or threads are never used";
  const ThreadCase cases[] = {
      {"bf16 packed", WeightLayout::kPacked, DType::kBF16, {}},
      {"bf16 rowmajor", WeightLayout::kRowMajor, DType::kBF16, {}},
      {"int8", WeightLayout::kPacked, DType::kInt8, QuantSpec{DType::kInt8, 0, DType::kF16, false}},
      {"int4 g32", WeightLayout::kPacked, DType::kInt4, QuantSpec{DType::kInt4, 32, DType::kF16, true}},
  };
  for (const PathCase& pc : available_paths()) {
    SCOPED_TRACE(path_label(pc.path));
    const int64_t nb = preferred_nb(pc.cpu);
    for (const ThreadCase& tc : cases) {
      for (int64_t N : {int64_t(256), int64_t(1000)}) {
        for (int64_t M : {1, 3, 7}) {
          SCOPED_TRACE(testing::Message() << tc.name << " M " << M << " N " << N);
          const int64_t K = 128;
          std::mt19937 rng(uint32_t(M * 1000 + N));
          const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
          const std::vector<uint16_t> w = random_bf16_vector(rng, size_t(N * K));
          const std::vector<uint16_t> bias = random_bf16_vector(rng, size_t(N));
          PackedWeight pw;
          std::vector<uint8_t> qbytes;
          PackedLayout qlayout{};
          LinearProblem p{};
          p.M = M, p.N = N, p.K = K, p.x = x.data(), p.ldx = K;
          p.bias = bias.data(), p.bias_dtype = DType::kBF16;
          p.ldy = N, p.y_dtype = DType::kBF16;
          p.block_end = -1;
          p.weight_layout = tc.layout;
          if (tc.layout == WeightLayout::kRowMajor) {
            p.w = w.data(), p.ldw = K;
          } else if (tc.format == DType::kBF16) {
            ASSERT_EQ(PackedWeight::pack(w.data(), K, N, K, nb, pc.cpu.vlenb, &pw), Status::kOk);
            p.w = pw.data(), p.layout = &pw.layout(), p.nb = nb;
          } else {
            qlayout = make_quant_layout(tc.spec, N, K, nb, 0);
            const int64_t G = quant_num_groups(tc.spec, K);
            std::vector<int8_t> qv(size_t(N * K));
            std::vector<uint16_t> qs(size_t(N * G));
            std::vector<uint8_t> qz(size_t(N * G));
            std::uniform_int_distribution<int> v8(-128, 127), v4(0, 15);
            for (auto& v : qv) v = int8_t(tc.format == DType::kInt8 ? v8(rng) : v4(rng));
            for (auto& v : qs) v = f32_to_scale(float(v4(rng) + 1) / 256.0f, tc.spec.scale_dtype);
            for (auto& v : qz) v = uint8_t(v4(rng));
            qbytes.assign(size_t(qlayout.bytes), 0);
            char err[256];
            ASSERT_EQ(pack_quantized(tc.spec, qv.data(), K, qs.data(), qz.data(), N, K, nb, qbytes.data(), err, sizeof err),
                      Status::kOk)
                << err;
            p.w = qbytes.data(), p.layout = &qlayout, p.nb = nb;
          }
          std::vector<uint16_t> y1(size_t(M * N), 0xFFFF);
          p.y = y1.data();
          p.nthreads = 1;
          ASSERT_EQ(linear_bf16(p, pc.cpu), Status::kOk);
          if (tc.format == DType::kBF16) {
            const RefMatrix ref = reference_linear(x.data(), K, w.data(), K, M, N, K, bias.data(), DType::kBF16);
            ASSERT_TRUE(check_output(ref, y1.data(), DType::kBF16, N, M, N, 0, N));
          }
          for (int threads : {2, 3, 4, 8}) {
            std::vector<uint16_t> yt(size_t(M * N), 0xFFFF);
            p.y = yt.data();
            p.nthreads = threads;
            ASSERT_EQ(linear_bf16(p, pc.cpu), Status::kOk);
            if (std::memcmp(y1.data(), yt.data(), y1.size() * 2) != 0) {
              std::string diff;
              for (int64_t i = 0; i < M * N; ++i)
                if (y1[size_t(i)] != yt[size_t(i)]) diff += std::to_string(i) + " ";
              ADD_FAILURE() << threads << " threads: outputs differ at " << diff.substr(0, 400);
            }
          }
        }
      }
    }
  }
}

}  // namespace

