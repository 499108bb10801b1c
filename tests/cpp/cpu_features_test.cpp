// Detection against the independent truth: the QEMU CPU configuration the test runner
// chose (RVV_EXPECT_*), or, natively, the CPU's own answer to a vsetvl.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "rvv_inductor/cpu_features.h"

#if defined(__riscv)
size_t rvv_test_vlenb_by_intrinsic();
#endif

namespace {

[[maybe_unused]] int expect_env(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}
[[maybe_unused]] bool have_expectations() { return std::getenv("RVV_EXPECT_V") != nullptr; }

TEST(CpuFeatures, MatchesEmulatorConfiguration) {
  rvv_cpu_features f;
  ASSERT_EQ(rvv_detect_cpu(&f), 0);
#if defined(__riscv)
  EXPECT_EQ(f.is_riscv64, 1);
  if (!have_expectations()) GTEST_SKIP() << "native run: no emulator configuration to compare with";
  EXPECT_EQ(f.has_v, expect_env("RVV_EXPECT_V", -1));
  EXPECT_EQ(f.vlenb, expect_env("RVV_EXPECT_VLEN", -1) / 8);
  EXPECT_EQ(f.has_zvfbfmin, expect_env("RVV_EXPECT_BF16", -1));
  EXPECT_EQ(f.has_zvfbfwma, expect_env("RVV_EXPECT_BF16", -1));
  // Zvfh counts only with the scalar f16 moves it implies (Zfhmin): QEMU 7.2 without Zfh=true
  // runs vector f16 arithmetic but not fmv.h.x, and must not be reported as Zvfh.
  EXPECT_EQ(f.has_zvfh, expect_env("RVV_EXPECT_ZVFH", -1));
#else
  EXPECT_EQ(f.is_riscv64, 0);
  EXPECT_EQ(f.has_v, 0);
  EXPECT_EQ(f.vlenb, 0);
#endif
}

#if defined(__riscv)
TEST(CpuFeatures, VlenbAgreesWithVsetvl) {
  rvv_cpu_features f;
  rvv_detect_cpu(&f);
  if (!f.has_v) {
    EXPECT_EQ(f.vlenb, 0);
    return;  // nothing vector may run here; reaching this line means nothing died of SIGILL
  }
  EXPECT_EQ(static_cast<size_t>(f.vlenb), rvv_test_vlenb_by_intrinsic());
}
#endif

TEST(CpuFeatures, OverrideCannotClaimMissingFeatures) {
  rvv_cpu_features d, r;
  rvv_detect_cpu(&d);
  char err[512];
  if (!d.has_zvfbfwma) {
    EXPECT_EQ(rvv_resolve_cpu("v,zvfbfwma", &r, err, sizeof err), -1);
    EXPECT_NE(std::string(err).find("zvfbfwma"), std::string::npos) << err;
    EXPECT_EQ(r.has_v, 0) << "a rejected override must leave the safe scalar configuration";
  }
  if (!d.has_v) {
    EXPECT_EQ(rvv_resolve_cpu("v", &r, err, sizeof err), -1);
    EXPECT_NE(std::string(err).find("SIGILL"), std::string::npos) << err;
    EXPECT_EQ(r.has_v, 0);
  }
  EXPECT_EQ(rvv_resolve_cpu("avx512", &r, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("unknown"), std::string::npos) << err;
}

TEST(CpuFeatures, OverrideCanNarrow) {
  rvv_cpu_features d, r;
  rvv_detect_cpu(&d);
  char err[256];
  ASSERT_EQ(rvv_resolve_cpu("scalar", &r, err, sizeof err), 0) << err;
  EXPECT_EQ(r.has_v, 0);
  EXPECT_EQ(r.vlenb, 0);
  EXPECT_EQ(r.has_zvfbfwma, 0);
  ASSERT_EQ(rvv_resolve_cpu("auto", &r, err, sizeof err), 0) << err;
  EXPECT_EQ(r.has_v, d.has_v);
  EXPECT_EQ(r.vlenb, d.vlenb);
  if (d.has_v) {
    ASSERT_EQ(rvv_resolve_cpu("v", &r, err, sizeof err), 0) << err;
    EXPECT_EQ(r.has_v, 1);
    EXPECT_EQ(r.vlenb, d.vlenb);
    EXPECT_EQ(r.has_zvfbfmin, 0) << "features not listed are switched off";
  }
}

TEST(CpuFeatures, MarchString) {
  rvv_cpu_features f{};
  char buf[64];
  f.is_riscv64 = 1;
  ASSERT_GT(rvv_march_string(&f, buf, sizeof buf), 0);
  EXPECT_STREQ(buf, "rv64gc");
  f.has_v = 1;
  f.has_zvfbfmin = 1;
  rvv_march_string(&f, buf, sizeof buf);
  EXPECT_STREQ(buf, "rv64gcv_zvfbfmin");
  f.has_zvfh = f.has_zvfbfwma = 1;
  rvv_march_string(&f, buf, sizeof buf);
  EXPECT_STREQ(buf, "rv64gcv_zvfh_zvfbfmin_zvfbfwma");
  EXPECT_EQ(rvv_march_string(&f, buf, 4), -1);
}

}  // namespace
