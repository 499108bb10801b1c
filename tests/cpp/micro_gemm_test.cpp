// The Inductor micro-kernel contract C[M,N] (+)= A[M,K] * B[K,N] (B one packed block of
// row stride ldb), for the scalar reference and for the RVV header compiled with and
// without hardware BF16, against the FP64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "micro_gemm_entries.h"
#include "rvv_inductor/ref/linear_ref.h"
#include "test_util.h"

namespace {

using namespace testutil;

void ref_entry(const Bf16Like* A, const Bf16Like* B, float* C, int64_t M, int64_t N, int64_t K, int64_t lda,
               int64_t ldb, int64_t ldc, bool accumulate) {
  rvv_inductor::ref::micro_gemm_bf16f32_ref(A, B, C, M, N, K, lda, ldb, ldc, accumulate);
}

struct Impl {
  const char* name;
  MicroGemmFn fn;
};

std::vector<Impl> implementations() {
  std::vector<Impl> out{{"ref", ref_entry}};
#if defined(__riscv)
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  if (hw.has_v) out.push_back({"rvv", micro_gemm_entry_rvv});
  if (hw.has_v && hw.has_zvfbfmin) out.push_back({"rvv_zvfbfmin", micro_gemm_entry_rvv_zvfbf});
#endif
  return out;
}

#if defined(__riscv)
TEST(MicroGemm, HeadersLandInTheIsaNamespaceOfTheirTu) {
  // Not the same function compiled twice: different ISA, different namespace, no ODR
  // clash between the two TUs (config.h).
  EXPECT_STREQ(micro_gemm_entry_rvv_isa(), "isa_rvv");
  EXPECT_STREQ(micro_gemm_entry_rvv_zvfbf_isa(), "isa_rvv_zvfbfwma");
}
#endif

// One case: C (row stride ldc, padded with a sentinel) starts random when accumulating.
::testing::AssertionResult run_micro(const Impl& impl, int64_t M, int64_t N, int64_t K, int64_t ldb, bool accumulate,
                                     uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t lda = K + 3, ldc = N + 5;
  const std::vector<uint16_t> a = random_bf16_vector(rng, size_t(M * lda));
  const std::vector<uint16_t> b = random_bf16_vector(rng, size_t(K * ldb));
  std::vector<float> c(size_t(M * ldc), -555.0f), c0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      c[size_t(m * ldc + n)] = accumulate ? float(int(rng() % 201) - 100) / 8.0f : std::nanf("");
  c0 = c;
  impl.fn(reinterpret_cast<const Bf16Like*>(a.data()), reinterpret_cast<const Bf16Like*>(b.data()), c.data(), M, N, K,
          lda, ldb, ldc, accumulate);
  // Reference: B[K, N] is W^T, so W[n, k] = b[k * ldb + n]; the initial C is one more term.
  std::vector<uint16_t> wt(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) wt[size_t(n * K + k)] = b[size_t(k * ldb + n)];
  RefMatrix ref = reference_linear(a.data(), lda, wt.data(), K, M, N, K, nullptr, DType::kNone);
  if (accumulate) {
    ref.terms += 1;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        ref.value[size_t(m * N + n)] += c0[size_t(m * ldc + n)];
        ref.abs_sum[size_t(m * N + n)] += std::fabs(c0[size_t(m * ldc + n)]);
      }
  }
  const std::string what = std::string(impl.name) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
                           " K=" + std::to_string(K) + " ldb=" + std::to_string(ldb) +
                           (accumulate ? " accumulate" : " overwrite");
  ::testing::AssertionResult r = check_output(ref, c.data(), DType::kF32, ldc, M, N, 0, N);
  if (!r) return ::testing::AssertionFailure() << what << ": " << r.message();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = N; n < ldc; ++n)
      if (c[size_t(m * ldc + n)] != -555.0f) return ::testing::AssertionFailure() << what << ": wrote past N";
  return ::testing::AssertionSuccess();
}

TEST(MicroGemm, MatchesReferenceOnTails) {
  for (const Impl& impl : implementations()) {
    uint32_t seed = 1;
    // K around the 256-column A chunk, N around one and two vectors, M around the 6-row
    // tile; ldb = 64 is the preferred block width at VLEN 256.
    for (int64_t M : {1, 5, 6, 7, 13})
      for (int64_t N : {1, 7, 33, 64})
        for (int64_t K : {1, 256, 257, 600})
          for (bool acc : {false, true}) ASSERT_TRUE(run_micro(impl, M, N, K, 64, acc, seed++));
  }
}

// M > 18 widens each B chunk once into an fp32 panel shared by the slab's tiles; the sums
// are the same in the same order, so the result equals running the rows 6 at a time (the
// per-tile path), bit for bit, across slabs (48 rows), K chunks and accumulate.
TEST(MicroGemm, PanelPathEqualsPerTilePathBitForBit) {
  for (const Impl& impl : implementations()) {
    if (std::string(impl.name) == "ref") continue;
    std::mt19937 rng(77);
    for (int64_t M : {19, 50})
      for (int64_t K : {1, 129, 600})
        for (bool acc : {false, true}) {
          const int64_t N = 64, lda = K + 1, ldb = 64, ldc = N + 2;
          const std::vector<uint16_t> a = random_bf16_vector(rng, size_t(M * lda));
          const std::vector<uint16_t> b = random_bf16_vector(rng, size_t(K * ldb));
          std::vector<float> c(size_t(M * ldc));
          for (auto& v : c) v = float(int(rng() % 201) - 100) / 8.0f;
          std::vector<float> tiles = c;
          const auto* A = reinterpret_cast<const Bf16Like*>(a.data());
          impl.fn(A, reinterpret_cast<const Bf16Like*>(b.data()), c.data(), M, N, K, lda, ldb, ldc, acc);
          for (int64_t m0 = 0; m0 < M; m0 += 6)
            impl.fn(A + m0 * lda, reinterpret_cast<const Bf16Like*>(b.data()), tiles.data() + m0 * ldc,
                    std::min<int64_t>(6, M - m0), N, K, lda, ldb, ldc, acc);
          ASSERT_EQ(0, std::memcmp(c.data(), tiles.data(), c.size() * sizeof(float)))
              << impl.name << " M=" << M << " K=" << K << (acc ? " accumulate" : "");
        }
  }
}

TEST(MicroGemm, WideBlockAndZeroK) {
  for (const Impl& impl : implementations()) {
    ASSERT_TRUE(run_micro(impl, 4, 200, 40, 256, false, 1)) << "N beyond one vector, ldb > N";
    ASSERT_TRUE(run_micro(impl, 3, 10, 0, 16, false, 2)) << "K = 0 overwrites with zeros";
    ASSERT_TRUE(run_micro(impl, 3, 10, 0, 16, true, 3)) << "K = 0 accumulating leaves C";
  }
}

}  // namespace
