// Runs one Linear problem through the dispatcher on a chosen implementation and checks
// it against the FP64 reference: outputs inside the error bound, columns outside the
// block range and the row padding of Y untouched, and the implementation that ran being
// the one asked for.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "rvv_inductor/linear.h"
#include "rvv_inductor/packing.h"
#include "test_util.h"

namespace testutil {

struct LinearCase {
  int64_t M, N, K;
  bool packed;
  DType y_dtype;
  DType bias_dtype;  // kNone: no bias
  int64_t nb;        // packed block width; 0: preferred for the path's VLEN
  int64_t pad;       // extra elements on ldx, ldy and ldw
  int64_t block_begin, block_end;  // -1 end: all
  uint32_t seed;
};

inline std::string describe(const LinearCase& c) {
  return "M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
         (c.packed ? " packed nb=" + std::to_string(c.nb) : std::string(" row-major")) +
         (c.y_dtype == DType::kBF16 ? " y=bf16" : " y=f32") +
         (c.bias_dtype == DType::kNone ? "" : c.bias_dtype == DType::kBF16 ? " bias=bf16" : " bias=f32") +
         " pad=" + std::to_string(c.pad) + " blocks=[" + std::to_string(c.block_begin) + "," +
         std::to_string(c.block_end) + ")";
}

// tweak edits the random X and W (row strides ldx, ldw) before packing; exact demands
// results equal to the correctly rounded reference (for inputs whose partial sums are
// all exact in fp32).
struct CaseOptions {
  std::function<void(std::vector<uint16_t>& x, std::vector<uint16_t>& w, int64_t ldx, int64_t ldw)> tweak;
  bool exact = false;
};

inline ::testing::AssertionResult run_linear_case(LinearCase c, const PathCase& pc, const CaseOptions& opt = {}) {
  using namespace rvv_inductor;
  std::mt19937 rng(c.seed);
  if (c.packed && c.nb == 0) c.nb = preferred_nb(pc.cpu);
  const int64_t ldx = c.K + c.pad, ldw = c.K + c.pad, ldy = c.N + c.pad;
  std::vector<uint16_t> x = random_bf16_vector(rng, size_t(c.M * ldx));
  std::vector<uint16_t> w = random_bf16_vector(rng, size_t(c.N * ldw));
  if (opt.tweak) opt.tweak(x, w, ldx, ldw);
  std::vector<uint16_t> bias16;
  std::vector<float> bias32;
  const void* bias = nullptr;
  if (c.bias_dtype == DType::kBF16) {
    bias16 = random_bf16_vector(rng, size_t(c.N));
    bias = bias16.data();
  } else if (c.bias_dtype == DType::kF32) {
    for (int64_t n = 0; n < c.N; ++n) bias32.push_back(float(int(rng() % 2001) - 1000) / 256.0f);
    bias = bias32.data();
  }

  LinearProblem p{};
  p.M = c.M;
  p.N = c.N;
  p.K = c.K;
  p.x = x.data();
  p.ldx = ldx;
  p.bias = bias;
  p.bias_dtype = c.bias_dtype;
  p.ldy = ldy;
  p.y_dtype = c.y_dtype;
  p.block_begin = c.block_begin;
  p.block_end = c.block_end;
  PackedWeight pw;
  if (c.packed) {
    if (PackedWeight::pack(w.data(), ldw, c.N, c.K, c.nb, pc.cpu.vlenb, &pw) != Status::kOk)
      return ::testing::AssertionFailure() << "pack failed for " << describe(c);
    p.weight_layout = WeightLayout::kPacked;
    p.w = pw.data();
    p.layout = &pw.layout();
    p.nb = c.nb;
  } else {
    p.weight_layout = WeightLayout::kRowMajor;
    p.w = w.data();
    p.ldw = ldw;
    p.nb = c.nb;
  }
  // Sentinel everywhere: whatever the call must not write keeps it.
  const size_t ysize = size_t(c.M * ldy);
  std::vector<uint16_t> y16(c.y_dtype == DType::kBF16 ? ysize : 0, 0x7FA5);
  std::vector<float> y32(c.y_dtype == DType::kF32 ? ysize : 0, -12345.0f);
  p.y = c.y_dtype == DType::kBF16 ? static_cast<void*>(y16.data()) : static_cast<void*>(y32.data());

  KernelPath used;
  char err[256] = "";
  const Status s = linear_bf16(p, pc.cpu, &used, err, sizeof err);
  if (s != Status::kOk) return ::testing::AssertionFailure() << describe(c) << ": status " << int(s) << " " << err;
  if (used != pc.path)
    return ::testing::AssertionFailure() << describe(c) << ": ran " << path_label(used) << ", wanted "
                                         << path_label(pc.path);

  const int64_t width = c.packed ? c.nb : (c.nb > 0 ? c.nb : 1);
  const int64_t nblocks = (c.N + width - 1) / width;
  const int64_t b1 = c.block_end < 0 ? nblocks : c.block_end;
  const int64_t n0 = std::min(c.block_begin * width, c.N), n1 = std::min(b1 * width, c.N);
  const RefMatrix ref = reference_linear(x.data(), ldx, w.data(), ldw, c.M, c.N, c.K, bias, c.bias_dtype);
  ::testing::AssertionResult r = check_output(ref, p.y, c.y_dtype, ldy, c.M, c.N, n0, n1, opt.exact);
  if (!r) return ::testing::AssertionFailure() << describe(c) << ": " << r.message();
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < ldy; ++n) {
      if (n >= n0 && n < n1) continue;
      const size_t i = size_t(m * ldy + n);
      const bool kept = c.y_dtype == DType::kBF16 ? y16[i] == 0x7FA5 : y32[i] == -12345.0f;
      if (!kept) return ::testing::AssertionFailure() << describe(c) << ": wrote y[" << m << "," << n << "] outside its columns";
    }
  return ::testing::AssertionSuccess();
}

}  // namespace testutil
