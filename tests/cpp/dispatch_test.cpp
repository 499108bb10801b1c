// The dispatcher picks the implementation the emulator was configured for, can be
// narrowed but never widened beyond the hardware, and rejects bad problems with a status
// and a message without touching Y.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "linear_case.h"
#include "rvv_inductor/capi.h"
#include "rvv_inductor/linear.h"
#include "rvv_inductor/packing.h"
#include "test_util.h"

namespace {

using namespace testutil;
using namespace rvv_inductor;

TEST(Dispatch, PicksThePathTheEmulatorWasConfiguredFor) {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  const KernelPath got = select_kernel_path(hw);
#if defined(__riscv)
  if (!std::getenv("RVV_EXPECT_V")) GTEST_SKIP() << "native run: no emulator configuration to compare with";
  const KernelPath want = env_int("RVV_EXPECT_BF16", 0) == 1 ? KernelPath::kRvvZvfbf
                          : env_int("RVV_EXPECT_V", 0) == 1  ? KernelPath::kRvv
                                                             : KernelPath::kScalar;
  EXPECT_EQ(path_label(got), path_label(want));
  if (!std::getenv("RVV_INDUCTOR_CPU")) EXPECT_EQ(rvv_kernel_path(), int(want)) << "C ABI agrees";
  EXPECT_EQ(preferred_nb(hw), want == KernelPath::kScalar ? 64 : env_int("RVV_EXPECT_VLEN", 0) / 4);
  // Quantized weights take the Zvfh variant when the CPU has it (the K1 does).
  const KernelPath want_q = env_int("RVV_EXPECT_V", 0) != 1        ? KernelPath::kScalar
                            : env_int("RVV_EXPECT_ZVFH", 0) == 1 ? KernelPath::kRvvZvfh
                                                                 : KernelPath::kRvv;
  for (DType f : {DType::kInt8, DType::kInt4})
    for (KernelKind k : {KernelKind::kGemv, KernelKind::kGemm})
      EXPECT_EQ(path_label(kernel_path_for(f, k, hw)), path_label(want_q));
#else
  EXPECT_EQ(got, KernelPath::kScalar) << "no vector kernels on this host";
  EXPECT_EQ(preferred_nb(hw), 64);
#endif
}

TEST(Dispatch, NarrowsButNeverWidens) {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  rvv_cpu_features all = hw;
  all.has_v = all.has_zvfbfmin = all.has_zvfbfwma = all.has_zvfh = 1;
  all.vlenb = hw.vlenb ? hw.vlenb : 32;
  const KernelPath best = select_kernel_path(hw);
  EXPECT_EQ(select_kernel_path(all), best) << "claiming extensions the CPU lacks changes nothing";
  rvv_cpu_features none{};
  EXPECT_EQ(select_kernel_path(none), KernelPath::kScalar);
  if (best == KernelPath::kRvvZvfbf) {
    rvv_cpu_features v_only = hw;
    v_only.has_zvfbfwma = 0;
    EXPECT_EQ(select_kernel_path(v_only), KernelPath::kRvv) << "hardware BF16 needs both extensions";
  }
}

// A valid packed problem, to be broken one field at a time.
struct Fixture {
  std::vector<uint16_t> x, w;
  PackedWeight pw;
  std::vector<float> y;
  LinearProblem p{};
  Fixture() : x(3 * 16, 0x3F80), w(40 * 16, 0x3F80), y(3 * 40, -7.0f) {
    EXPECT_EQ(PackedWeight::pack(w.data(), 16, 40, 16, 8, 0, &pw), Status::kOk);
    p.M = 3;
    p.N = 40;
    p.K = 16;
    p.x = x.data();
    p.ldx = 16;
    p.weight_layout = WeightLayout::kPacked;
    p.w = pw.data();
    p.layout = &pw.layout();
    p.y = y.data();
    p.ldy = 40;
    p.y_dtype = DType::kF32;
    p.block_end = -1;
  }
};

TEST(Dispatch, RejectsBadProblemsWithoutWriting) {
  struct Case {
    const char* what;
    void (*edit)(LinearProblem&, Fixture&);
    Status want;
    const char* in_message;
  };
  static float scratch[4];
  static const PackedLayout other_n = make_packed_layout(41, 16, 8, 0);
  const Case cases[] = {
      {"negative M", [](LinearProblem& p, Fixture&) { p.M = -1; }, Status::kBadShape, "M=-1"},
      {"huge K", [](LinearProblem& p, Fixture&) { p.K = kMaxDim + 1; }, Status::kBadShape, "invalid shape"},
      {"null x", [](LinearProblem& p, Fixture&) { p.x = nullptr; }, Status::kNullPointer, "x is null"},
      {"null y", [](LinearProblem& p, Fixture&) { p.y = nullptr; }, Status::kNullPointer, "y is null"},
      {"null w", [](LinearProblem& p, Fixture&) { p.w = nullptr; }, Status::kNullPointer, "weight is null"},
      {"null layout", [](LinearProblem& p, Fixture&) { p.layout = nullptr; }, Status::kNullPointer, "layout"},
      {"ldx < K", [](LinearProblem& p, Fixture&) { p.ldx = 15; }, Status::kBadShape, "ldx"},
      {"ldy < N", [](LinearProblem& p, Fixture&) { p.ldy = 39; }, Status::kBadShape, "ldy"},
      {"y dtype", [](LinearProblem& p, Fixture&) { p.y_dtype = DType(9); }, Status::kBadDtype, "y dtype"},
      {"bias dtype", [](LinearProblem& p, Fixture& f) { p.bias = f.x.data(), p.bias_dtype = DType::kNone; },
       Status::kBadDtype, "bias dtype"},
      {"nb mismatch", [](LinearProblem& p, Fixture&) { p.nb = 16; }, Status::kLayoutMismatch, "nb=8"},
      {"negative nb", [](LinearProblem& p, Fixture&) { p.nb = -8; }, Status::kBadShape, "nb=-8"},
      {"N mismatch", [](LinearProblem& p, Fixture&) { p.layout = &other_n; }, Status::kLayoutMismatch, "N=41"},
      {"range past end", [](LinearProblem& p, Fixture&) { p.block_end = 6; }, Status::kBadRange, "[0, 6)"},
      {"range reversed", [](LinearProblem& p, Fixture&) { p.block_begin = 3, p.block_end = 2; }, Status::kBadRange,
       "[3, 2)"},
      {"negative begin", [](LinearProblem& p, Fixture&) { p.block_begin = -1; }, Status::kBadRange, "[-1"},
      {"small scratch", [](LinearProblem& p, Fixture&) { p.scratch = scratch, p.scratch_floats = 4; },
       Status::kBufferTooSmall, "108 needed"},  // linear_scratch_floats(3, 16) = 3 * (2 * 16 + 4)
      {"row-major ldw < K",
       [](LinearProblem& p, Fixture& f) { p.weight_layout = WeightLayout::kRowMajor, p.w = f.w.data(), p.ldw = 3; },
       Status::kBadShape, "ldw"},
      {"weight layout", [](LinearProblem& p, Fixture&) { p.weight_layout = WeightLayout(7); }, Status::kBadDtype,
       "weight layout"},
  };
  for (const PathCase& pc : available_paths()) {
    for (const Case& c : cases) {
      Fixture f;
      c.edit(f.p, f);
      char err[256] = "";
      EXPECT_EQ(int(linear_bf16(f.p, pc.cpu, nullptr, err, sizeof err)), int(c.want)) << c.what;
      EXPECT_NE(std::string(err).find(c.in_message), std::string::npos) << c.what << ": '" << err << "'";
      for (float v : f.y) ASSERT_EQ(v, -7.0f) << c.what << ": Y written on error";
    }
    Fixture ok;
    EXPECT_EQ(linear_bf16(ok.p, pc.cpu), Status::kOk) << "the unedited fixture is valid";
    EXPECT_EQ(ok.y[0], 16.0f);
  }
}

TEST(Dispatch, DegenerateShapes) {
  for (const PathCase& pc : available_paths()) {
    SCOPED_TRACE(path_label(pc.path));
    // K = 0: Y is the bias (or zero); N = 1; empty block range writes nothing.
    for (bool packed : {true, false}) {
      ASSERT_TRUE(run_linear_case({3, 10, 0, packed, DType::kF32, DType::kBF16, 0, 1, 0, -1, 1}, pc));
      ASSERT_TRUE(run_linear_case({2, 10, 0, packed, DType::kBF16, DType::kNone, 0, 0, 0, -1, 2}, pc));
      ASSERT_TRUE(run_linear_case({7, 1, 33, packed, DType::kF32, DType::kF32, 0, 0, 0, -1, 3}, pc));
      ASSERT_TRUE(run_linear_case({2, 100, 20, packed, DType::kF32, DType::kNone, 8, 0, 4, 4, 4}, pc));
    }
    LinearProblem p{};
    p.weight_layout = WeightLayout::kRowMajor;
    p.y_dtype = DType::kF32;
    p.block_end = -1;
    EXPECT_EQ(linear_bf16(p, pc.cpu), Status::kOk) << "M = N = K = 0 with null pointers";
  }
}

TEST(Dispatch, UsesCallerScratch) {
  for (const PathCase& pc : available_paths()) {
    SCOPED_TRACE(path_label(pc.path));
    for (int64_t M : {1, 9}) {
      const int64_t N = 50, K = 3000;
      std::mt19937 rng(3);
      const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K)), w = random_bf16_vector(rng, size_t(N * K));
      PackedWeight pw;
      ASSERT_EQ(PackedWeight::pack(w.data(), K, N, K, 64, 0, &pw), Status::kOk);
      std::vector<float> scratch(size_t(linear_scratch_floats(M, K)), std::nanf("")), y(size_t(M * N));
      LinearProblem p{};
      p.M = M;
      p.N = N;
      p.K = K;
      p.x = x.data();
      p.ldx = K;
      p.weight_layout = WeightLayout::kPacked;
      p.w = pw.data();
      p.layout = &pw.layout();
      p.y = y.data();
      p.ldy = N;
      p.y_dtype = DType::kF32;
      p.block_end = -1;
      p.scratch = scratch.data();
      p.scratch_floats = int64_t(scratch.size());
      ASSERT_EQ(linear_bf16(p, pc.cpu), Status::kOk);
      const RefMatrix ref = reference_linear(x.data(), K, w.data(), K, M, N, K, nullptr, DType::kNone);
      EXPECT_TRUE(check_output(ref, y.data(), DType::kF32, N, M, N, 0, N));
      bool touched = false;
      for (float v : scratch) touched |= !std::isnan(v);
      EXPECT_TRUE(touched) << "the caller's scratch was not used";
    }
  }
}

}  // namespace
