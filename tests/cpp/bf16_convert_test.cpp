// BF16 <-> FP32 conversions (library scalar functions and every dispatched path) against
// the arithmetic definitions in test_util.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "rvv_inductor/bf16.h"
#include "rvv_inductor/linear.h"
#include "test_util.h"

namespace {

using namespace testutil;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Every upper half combined with the lower halves where rounding decides: just below,
// at and just above the tie, zero, and the extremes.
std::vector<float> rounding_cases() {
  static const uint32_t lows[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x4000, 0xC000};
  std::vector<float> v;
  v.reserve(65536 * 8);
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (uint32_t lo : lows) v.push_back(float_from_bits(hi << 16 | lo));
  return v;
}

// Expected f32 -> bf16 result, except for NaN where only "quiet NaN" is required.
void expect_rounded(float f, uint16_t got, const char* who) {
  if (std::isnan(f)) {
    ASSERT_TRUE(bf16_is_quiet_nan(got)) << who << ": NaN 0x" << std::hex << bits_of(f) << " -> 0x" << got;
    return;
  }
  const uint16_t want = bf16_round_double(double(f));
  ASSERT_EQ(got, want) << who << ": f32 0x" << std::hex << bits_of(f) << " (" << f << ")";
}

TEST(Bf16Convert, WideningIsExactForAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double want = bf16_value(uint16_t(h));
    const float got = rvv_inductor::bf16_to_f32(uint16_t(h));
    if (std::isnan(want))
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    else
      ASSERT_EQ(double(got), want) << std::hex << h;
  }
}

TEST(Bf16Convert, ScalarRoundingMatchesArithmeticDefinition) {
  for (float f : rounding_cases()) expect_rounded(f, rvv_inductor::f32_to_bf16(f), "scalar");
}

TEST(Bf16Convert, EdgeCases) {
  struct Case {
    uint32_t in;
    uint16_t out;
    const char* why;
  } cases[] = {
      {0x3F808000, 0x3F80, "tie, even kept half stays"},
      {0x3F818000, 0x3F82, "tie, odd kept half rounds up to even"},
      {0x3F808001, 0x3F81, "just above the tie rounds up"},
      {0x3F807FFF, 0x3F80, "just below the tie rounds down"},
      {0x7F7FFFFF, 0x7F80, "largest float rounds to +Inf"},
      {0x7F7F7FFF, 0x7F7F, "largest bf16 stays finite"},
      {0xFF7FFFFF, 0xFF80, "negative overflow to -Inf"},
      {0x7F800000, 0x7F80, "+Inf"},
      {0xFF800000, 0xFF80, "-Inf"},
      {0x80000000, 0x8000, "-0 keeps its sign"},
      {0x00008000, 0x0000, "subnormal tie to even (zero)"},
      {0x00018000, 0x0002, "subnormal tie to even (up)"},
      {0x007FFFFF, 0x0080, "largest subnormal rounds up to the smallest normal"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(rvv_inductor::f32_to_bf16(float_from_bits(c.in)), c.out) << c.why;
    EXPECT_EQ(bf16_round_double(double(float_from_bits(c.in))), c.out) << "test oracle: " << c.why;
  }
  // NaNs: quiet, and a signalling NaN whose payload lives only in the dropped half must
  // not turn into Inf.
  for (uint32_t nan : {0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7FBFFFFFu, 0xFF800001u, 0x7FFFFFFFu}) {
    const uint16_t h = rvv_inductor::f32_to_bf16(float_from_bits(nan));
    EXPECT_TRUE(bf16_is_quiet_nan(h)) << std::hex << nan << " -> " << h;
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000) << "sign kept";
  }
}

TEST(Bf16Convert, EveryPathRoundsLikeTheDefinition) {
  const std::vector<float> in = rounding_cases();
  for (const PathCase& pc : available_paths()) {
    SCOPED_TRACE(path_label(pc.path));
    std::vector<uint16_t> out(in.size());
    ASSERT_EQ(rvv_inductor::convert_f32_to_bf16(in.data(), out.data(), int64_t(in.size()), pc.cpu),
              rvv_inductor::Status::kOk);
    for (size_t i = 0; i < in.size(); ++i) expect_rounded(in[i], out[i], path_label(pc.path).c_str());
  }
}

TEST(Bf16Convert, EveryPathWidensExactly) {
  std::vector<uint16_t> in(65536);
  for (uint32_t h = 0; h < 65536; ++h) in[h] = uint16_t(h);
  for (const PathCase& pc : available_paths()) {
    SCOPED_TRACE(path_label(pc.path));
    // Odd lengths exercise the vsetvl tail.
    for (int64_t n : {int64_t(65536), int64_t(1), int64_t(37)}) {
      std::vector<float> out(static_cast<size_t>(n));
      ASSERT_EQ(rvv_inductor::convert_bf16_to_f32(in.data(), out.data(), n, pc.cpu), rvv_inductor::Status::kOk);
      for (int64_t h = 0; h < n; ++h) {
        const double want = bf16_value(uint16_t(h));
        if (std::isnan(want))
          ASSERT_TRUE(std::isnan(out[size_t(h)])) << std::hex << h;
        else
          ASSERT_EQ(double(out[size_t(h)]), want) << std::hex << h;
      }
    }
  }
}

TEST(Bf16Convert, RejectsBadArguments) {
  rvv_cpu_features cpu{};
  float f = 0;
  uint16_t h = 0;
  EXPECT_EQ(rvv_inductor::convert_f32_to_bf16(&f, &h, -1, cpu), rvv_inductor::Status::kBadShape);
  EXPECT_EQ(rvv_inductor::convert_f32_to_bf16(nullptr, &h, 1, cpu), rvv_inductor::Status::kNullPointer);
  EXPECT_EQ(rvv_inductor::convert_bf16_to_f32(&h, nullptr, 1, cpu), rvv_inductor::Status::kNullPointer);
  EXPECT_EQ(rvv_inductor::convert_bf16_to_f32(nullptr, nullptr, 0, cpu), rvv_inductor::Status::kOk);
}

}  // namespace
