// The C ABI as ctypes sees it, linked against the shared library: pack, run and unpack
// through it, and bad input giving an error code and a message instead of a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rvv_inductor/bf16.h"
#include "rvv_inductor/capi.h"
#include "test_util.h"

namespace {

using namespace testutil;

std::string last_error() {
  char buf[512];
  rvv_last_error(buf, sizeof buf);
  return buf;
}

TEST(CApi, PolicyAndStructSizes) {
  // nb is 2 * vlenb (VLMAX of e32 at LMUL 8), 64 without a vector unit.
  EXPECT_EQ(rvv_nb_for_vlenb(32), 64);
  EXPECT_EQ(rvv_nb_for_vlenb(16), 32);
  EXPECT_EQ(rvv_nb_for_vlenb(128), 256);
  EXPECT_EQ(rvv_nb_for_vlenb(0), 64);
  rvv_cpu_features cpu;
  ASSERT_EQ(rvv_effective_cpu(&cpu, nullptr, 0), 0);
  EXPECT_EQ(rvv_preferred_nb(), rvv_nb_for_vlenb(rvv_kernel_path() == RVV_PATH_SCALAR ? 0 : cpu.vlenb));
  EXPECT_EQ(rvv_abi_sizeof(RVV_ABI_PACKED_LAYOUT), sizeof(rvv_packed_layout));
  EXPECT_EQ(rvv_abi_sizeof(RVV_ABI_CPU_FEATURES), sizeof(rvv_cpu_features));
  EXPECT_EQ(rvv_abi_sizeof(0), 0u);
  rvv_packed_layout l;
  EXPECT_EQ(rvv_make_layout(-1, 4, 64, &l), RVV_ERR_BAD_SHAPE);
  EXPECT_NE(last_error().find("invalid"), std::string::npos);
  EXPECT_EQ(rvv_make_layout(4, 4, 64, nullptr), RVV_ERR_NULL_POINTER);
}

// Quantized weights through the C ABI: layout, quantize + pack, bit-for-bit pack/unpack of
// given blocks, dequantize, and a Linear call on the result against an FP64 product of the
// dequantized weight; bad input gives a status and a message.
TEST(CApi, QuantizedWeights) {
  const int64_t N = 70, K = 96, nb = rvv_preferred_nb();
  std::mt19937 rng(8);
  const std::vector<uint16_t> w = random_bf16_vector(rng, size_t(N * K)), x = random_bf16_vector(rng, size_t(2 * K));
  struct Fmt {
    int format, group, scale, zp;
  };
  for (const Fmt f : {Fmt{RVV_DTYPE_INT8, 0, RVV_DTYPE_F16, 0}, Fmt{RVV_DTYPE_INT8, 32, RVV_DTYPE_BF16, 0},
                      Fmt{RVV_DTYPE_INT4, 32, RVV_DTYPE_F16, 0}, Fmt{RVV_DTYPE_INT4, 64, RVV_DTYPE_BF16, 1}}) {
    rvv_packed_layout l;
    ASSERT_EQ(rvv_quant_layout(f.format, f.group, f.scale, f.zp, N, K, nb, &l), RVV_OK) << last_error();
    EXPECT_EQ(rvv_validate_layout(&l, N, K, nb), RVV_OK);
    std::vector<uint8_t> packed(size_t(l.bytes));
    ASSERT_EQ(rvv_quantize_pack(w.data(), K, &l, packed.data(), l.bytes), RVV_OK) << last_error();
    std::vector<float> deq(size_t(N * K));
    ASSERT_EQ(rvv_dequantize(packed.data(), &l, deq.data(), K, N * K), RVV_OK) << last_error();
    // Round to nearest: every weight within one quantization step of the original (the
    // step is at most max|w| / 7 for INT4 and / 127 for INT8 over the group).
    const int64_t gr = f.group ? f.group : K;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        double gmax = 0;
        for (int64_t i = k / gr * gr; i < std::min(K, k / gr * gr + gr); ++i)
          gmax = std::max(gmax, std::fabs(bf16_value(w[size_t(n * K + i)])));
        const double step = gmax / (f.format == RVV_DTYPE_INT8 ? 127.0 : 7.0) * 1.02;
        ASSERT_LE(std::fabs(deq[size_t(n * K + k)] - bf16_value(w[size_t(n * K + k)])), step) << n << "," << k;
      }
    // Selected rows (a tied embedding's lookups): the same numbers as the full dequantization,
    // in the order asked, repeats allowed; a row outside [0, N) is an error.
    {
      const std::vector<int64_t> rows = {N - 1, 0, 37, 37, nb < N ? nb : 1};
      const int64_t ld = K + 3;
      std::vector<float> got(size_t(int64_t(rows.size()) * ld), -7.0f);
      ASSERT_EQ(rvv_dequantize_rows(packed.data(), &l, rows.data(), int64_t(rows.size()), got.data(), ld,
                                    int64_t(got.size())),
                RVV_OK)
          << last_error();
      for (size_t i = 0; i < rows.size(); ++i) {
        for (int64_t k = 0; k < K; ++k) ASSERT_EQ(got[i * size_t(ld) + size_t(k)], deq[size_t(rows[i] * K + k)]) << i << "," << k;
        for (int64_t k = K; k < ld; ++k) ASSERT_EQ(got[i * size_t(ld) + size_t(k)], -7.0f);
      }
      const int64_t bad[] = {0, N};
      EXPECT_EQ(rvv_dequantize_rows(packed.data(), &l, bad, 2, got.data(), ld, int64_t(got.size())), RVV_ERR_BAD_SHAPE);
      EXPECT_NE(last_error().find("outside"), std::string::npos) << last_error();
      const int64_t neg[] = {-1};
      EXPECT_EQ(rvv_dequantize_rows(packed.data(), &l, neg, 1, got.data(), ld, int64_t(got.size())), RVV_ERR_BAD_SHAPE);
      EXPECT_EQ(rvv_dequantize_rows(packed.data(), &l, rows.data(), 2, got.data(), ld, ld), RVV_ERR_BUFFER_TOO_SMALL);
    }
    // Unpack and pack again: the same bytes.
    const int64_t G = (K + gr - 1) / gr;
    std::vector<int8_t> q(size_t(N * K));
    std::vector<uint16_t> sc(size_t(N * G));
    std::vector<uint8_t> z(size_t(N * G));
    ASSERT_EQ(rvv_unpack_quantized(packed.data(), &l, q.data(), sc.data(), z.data()), RVV_OK) << last_error();
    std::vector<uint8_t> again(size_t(l.bytes));
    ASSERT_EQ(rvv_pack_quantized(q.data(), K, sc.data(), z.data(), &l, again.data(), l.bytes), RVV_OK) << last_error();
    EXPECT_EQ(again, packed);
    // A Linear call on it against FP64 on the dequantized weights.
    std::vector<float> y(size_t(2 * N));
    ASSERT_EQ(rvv_linear_packed_opts(x.data(), K, 2, N, K, packed.data(), &l, nb, nullptr, 0, y.data(), N,
                                     RVV_DTYPE_F32, 0, -1, 0),
              RVV_OK)
        << last_error();
    for (int64_t m = 0; m < 2; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double t = bf16_value(x[size_t(m * K + k)]) * double(deq[size_t(n * K + k)]);
          ref += t;
          // What the kernels sum: |x| * (|q| + |z|) * |s| per term.
          const int64_t g = k / gr;
          const int zz = f.zp ? z[size_t(n * G + g)] : (f.format == RVV_DTYPE_INT4 ? 8 : 0);
          const uint16_t sb = sc[size_t(n * G + g)];
          const double sv = f.scale == RVV_DTYPE_F16 ? rvv_inductor::f16_to_f32(sb) : bf16_value(sb);
          mag += std::fabs(bf16_value(x[size_t(m * K + k)])) * (std::abs(int(q[size_t(n * K + k)])) + zz) * std::fabs(sv);
        }
        ASSERT_LE(std::fabs(y[size_t(m * N + n)] - ref), f32_bound(mag + 1e-30, K + 8) + 1e-6) << m << "," << n;
      }
  }
  rvv_packed_layout l;
  EXPECT_EQ(rvv_quant_layout(RVV_DTYPE_INT4, 0, RVV_DTYPE_F16, 0, N, K, nb, &l), RVV_ERR_BAD_SHAPE);
  EXPECT_NE(last_error().find("int4 needs a group size"), std::string::npos) << last_error();
  EXPECT_EQ(rvv_quant_layout(RVV_DTYPE_F32, 32, RVV_DTYPE_F16, 0, N, K, nb, &l), RVV_ERR_BAD_DTYPE);
  ASSERT_EQ(rvv_quant_layout(RVV_DTYPE_INT4, 32, RVV_DTYPE_F16, 0, N, K, nb, &l), RVV_OK);
  std::vector<uint8_t> small(size_t(l.bytes - 1));
  EXPECT_EQ(rvv_quantize_pack(w.data(), K, &l, small.data(), l.bytes - 1), RVV_ERR_BUFFER_TOO_SMALL);
  EXPECT_NE(last_error().find("bytes"), std::string::npos);
  rvv_packed_layout bf;
  ASSERT_EQ(rvv_make_layout(N, K, nb, &bf), RVV_OK);
  EXPECT_EQ(rvv_dequantize(small.data(), &bf, nullptr, K, 0), RVV_ERR_LAYOUT_MISMATCH);
  std::vector<float> y(static_cast<size_t>(N));
  EXPECT_EQ(rvv_linear_packed_opts(x.data(), K, 1, N, K, small.data(), &l, nb, nullptr, 0, y.data(), N, RVV_DTYPE_F32,
                                   0, -1, 0x40),
            RVV_ERR_BAD_SHAPE);
  EXPECT_NE(last_error().find("option"), std::string::npos);
}

// The kernel the dispatcher picks, by name, as the generated code names what it runs:
// the expected names are read off kernel_table.inl by hand (rvv_zvfh has the block
// formats' GEMV only; their GEMMs are the rvv variant's rows).
TEST(CApi, SelectedKernelNames) {
  rvv_packed_layout q4k, int4;
  ASSERT_EQ(rvv_block_layout(RVV_DTYPE_Q4_K, 64, 512, 32, &q4k), 0);
  ASSERT_EQ(rvv_quant_layout(RVV_DTYPE_INT4, 64, RVV_DTYPE_F16, 0, 64, 512, 32, &int4), 0);
  auto name = [](int64_t m, const rvv_packed_layout& l, int options, int path) {
    char buf[64] = "";
    EXPECT_EQ(rvv_selected_kernel(m, &l, options, path, 32, buf, sizeof buf), 0) << last_error();
    return std::string(buf);
  };
  EXPECT_EQ(name(1, q4k, 0, RVV_PATH_SCALAR), "scalar/q4_k/gemv");
  EXPECT_EQ(name(4, q4k, RVV_LINEAR_X_INT8_GEMM, RVV_PATH_SCALAR), "scalar/q4_k/gemm_x8");
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  if (!hw.has_v) {  // no vector kernel is ever named (or run) on a CPU without V, whatever the path says
    EXPECT_EQ(name(1, q4k, 0, RVV_PATH_RVV_ZVFH), "scalar/q4_k/gemv");
  } else {
  EXPECT_EQ(name(1, q4k, 0, RVV_PATH_RVV_ZVFH), "rvv_zvfh/q4_k/gemv_1xm8");
  EXPECT_EQ(name(4, q4k, 0, RVV_PATH_RVV_ZVFH), "rvv/q4_k/gemm_4xm4");
  EXPECT_EQ(name(4, q4k, RVV_LINEAR_X_INT8_GEMM, RVV_PATH_RVV_ZVFH), "rvv/q4_k/gemm_x8_4xm4");
  EXPECT_EQ(name(1, int4, 0, RVV_PATH_RVV_ZVFH), "rvv_zvfh/int4/gemv_1xm8");
  EXPECT_EQ(name(1, int4, 0, RVV_PATH_RVV), "rvv/int4/gemv_1xm8");
  EXPECT_EQ(name(1, int4, RVV_LINEAR_X_INT8, RVV_PATH_RVV), "rvv/int4/gemv_x8_1xm8");
  EXPECT_EQ(name(8, int4, RVV_LINEAR_X_INT8_GEMM, RVV_PATH_RVV_ZVFH), "rvv_zvfh/int4/gemm_x8_4xm4");
  }
  char small[8];
  EXPECT_EQ(rvv_selected_kernel(1, &q4k, 0, RVV_PATH_SCALAR, 32, small, sizeof small), RVV_ERR_BUFFER_TOO_SMALL);
  char buf[64];
  EXPECT_EQ(rvv_selected_kernel(1, &q4k, 0, 9, 32, buf, sizeof buf), RVV_ERR_BAD_SHAPE);
  EXPECT_EQ(rvv_selected_kernel(0, &q4k, 0, RVV_PATH_RVV, 32, buf, sizeof buf), RVV_ERR_BAD_SHAPE);
  rvv_packed_layout bad = q4k;
  bad.group_size = 32;
  EXPECT_EQ(rvv_selected_kernel(1, &bad, 0, RVV_PATH_RVV, 32, buf, sizeof buf), RVV_ERR_LAYOUT_MISMATCH);
  EXPECT_EQ(rvv_selected_kernel(1, nullptr, 0, RVV_PATH_RVV, 32, buf, sizeof buf), RVV_ERR_NULL_POINTER);
}

TEST(CApi, PackRunUnpack) {
  const int64_t N = 150, K = 77, M = 3, nb = rvv_preferred_nb();
  ASSERT_GT(nb, 0);
  std::mt19937 rng(4);
  const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K)), w = random_bf16_vector(rng, size_t(N * K));
  const std::vector<uint16_t> bias = random_bf16_vector(rng, size_t(N));
  int64_t elements = 0;
  ASSERT_EQ(rvv_packed_size(N, K, nb, &elements), RVV_OK);
  std::vector<uint16_t> packed(static_cast<size_t>(elements));
  rvv_packed_layout layout;
  ASSERT_EQ(rvv_pack_bf16(w.data(), K, N, K, nb, packed.data(), elements, &layout), RVV_OK) << last_error();
  EXPECT_EQ(rvv_validate_layout(&layout, N, K, nb), RVV_OK);

  const RefMatrix ref = reference_linear(x.data(), K, w.data(), K, M, N, K, bias.data(), DType::kBF16);
  for (int m : {1, 3}) {
    std::vector<float> y(static_cast<size_t>(m * N));
    ASSERT_EQ(rvv_linear_bf16_packed(x.data(), K, m, N, K, packed.data(), &layout, nb, bias.data(), RVV_DTYPE_BF16,
                                     y.data(), N, RVV_DTYPE_F32, 0, -1),
              RVV_OK)
        << last_error();
    EXPECT_TRUE(check_output(ref, y.data(), DType::kF32, N, m, N, 0, N));
    std::vector<uint16_t> y16(static_cast<size_t>(m * N));
    ASSERT_EQ(rvv_linear_bf16_rowmajor(x.data(), K, m, N, K, w.data(), K, bias.data(), RVV_DTYPE_BF16, y16.data(), N,
                                       RVV_DTYPE_BF16),
              RVV_OK)
        << last_error();
    EXPECT_TRUE(check_output(ref, y16.data(), DType::kBF16, N, m, N, 0, N));
  }
  // The descriptor rvv_make_layout gives is the one packing wrote.
  rvv_packed_layout made;
  ASSERT_EQ(rvv_make_layout(N, K, nb, &made), RVV_OK) << last_error();
  EXPECT_EQ(std::memcmp(&made, &layout, sizeof made), 0);
  EXPECT_EQ(made.bytes, elements * 2);
  std::vector<uint16_t> back(static_cast<size_t>(N * K));
  ASSERT_EQ(rvv_unpack_bf16(packed.data(), &layout, back.data(), K, int64_t(back.size())), RVV_OK);
  EXPECT_EQ(back, w);

  std::vector<float> f(4);
  std::vector<uint16_t> h = {0x3F80, 0xC000, 0x7F80, 0x0001}, h2(4);
  ASSERT_EQ(rvv_bf16_to_f32(h.data(), f.data(), 4), RVV_OK);
  EXPECT_EQ(f[1], -2.0f);
  ASSERT_EQ(rvv_f32_to_bf16(f.data(), h2.data(), 4), RVV_OK);
  EXPECT_EQ(h2, h);
}

TEST(CApi, BadInputReturnsErrorsWithMessages) {
  uint16_t buf[64] = {};
  float out[64] = {};
  int64_t e = 0;
  rvv_packed_layout layout;
  ASSERT_EQ(rvv_pack_bf16(buf, 8, 8, 8, 4, buf, 64, &layout), RVV_OK);

  struct Case {
    const char* what;
    std::function<int()> call;
    int want;
    const char* in_message;
  };
  const Case cases[] = {
      {"packed_size negative", [&] { return rvv_packed_size(-1, 8, 4, &e); }, RVV_ERR_BAD_SHAPE, "invalid"},
      {"packed_size null out", [&] { return rvv_packed_size(1, 8, 4, nullptr); }, RVV_ERR_NULL_POINTER, "NULL"},
      {"pack nb 0", [&] { return rvv_pack_bf16(buf, 8, 8, 8, 0, buf, 64, nullptr); }, RVV_ERR_BAD_SHAPE, "nb=0"},
      {"pack null w", [&] { return rvv_pack_bf16(nullptr, 8, 8, 8, 4, buf, 64, nullptr); }, RVV_ERR_NULL_POINTER,
       "null"},
      {"pack small out", [&] { return rvv_pack_bf16(buf, 8, 8, 8, 4, buf, 63, nullptr); }, RVV_ERR_BUFFER_TOO_SMALL,
       "64 needed"},
      {"unpack null layout", [&] { return rvv_unpack_bf16(buf, nullptr, buf, 8, 64); }, RVV_ERR_NULL_POINTER,
       "layout"},
      {"unpack small w", [&] { return rvv_unpack_bf16(buf, &layout, buf, 8, 10); }, RVV_ERR_BUFFER_TOO_SMALL,
       "64 needed"},
      {"validate wrong nb", [&] { return rvv_validate_layout(&layout, 8, 8, 8); }, RVV_ERR_LAYOUT_MISMATCH, "nb=4"},
      {"linear nb mismatch",
       [&] { return rvv_linear_bf16_packed(buf, 8, 1, 8, 8, buf, &layout, 8, nullptr, 0, out, 8, RVV_DTYPE_F32, 0, -1); },
       RVV_ERR_LAYOUT_MISMATCH, "nb=4"},
      {"linear K mismatch",
       [&] { return rvv_linear_bf16_packed(buf, 8, 1, 8, 7, buf, &layout, 0, nullptr, 0, out, 8, RVV_DTYPE_F32, 0, -1); },
       RVV_ERR_LAYOUT_MISMATCH, "K=7"},
      {"linear negative M",
       [&] { return rvv_linear_bf16_packed(buf, 8, -2, 8, 8, buf, &layout, 0, nullptr, 0, out, 8, RVV_DTYPE_F32, 0, -1); },
       RVV_ERR_BAD_SHAPE, "M=-2"},
      {"linear null layout",
       [&] { return rvv_linear_bf16_packed(buf, 8, 1, 8, 8, buf, nullptr, 0, nullptr, 0, out, 8, RVV_DTYPE_F32, 0, -1); },
       RVV_ERR_NULL_POINTER, "layout"},
      {"linear null y",
       [&] {
         return rvv_linear_bf16_packed(buf, 8, 1, 8, 8, buf, &layout, 0, nullptr, 0, nullptr, 8, RVV_DTYPE_F32, 0, -1);
       },
       RVV_ERR_NULL_POINTER, "y is null"},
      {"linear bad dtype",
       [&] { return rvv_linear_bf16_packed(buf, 8, 1, 8, 8, buf, &layout, 0, nullptr, 0, out, 8, 42, 0, -1); },
       RVV_ERR_BAD_DTYPE, "dtype"},
      {"linear bad range",
       [&] { return rvv_linear_bf16_packed(buf, 8, 1, 8, 8, buf, &layout, 0, nullptr, 0, out, 8, RVV_DTYPE_F32, 1, 5); },
       RVV_ERR_BAD_RANGE, "[1, 5)"},
      {"rowmajor null w",
       [&] { return rvv_linear_bf16_rowmajor(buf, 8, 1, 8, 8, nullptr, 8, nullptr, 0, out, 8, RVV_DTYPE_F32); },
       RVV_ERR_NULL_POINTER, "weight"},
      {"rowmajor negative K",
       [&] { return rvv_linear_bf16_rowmajor(buf, 8, 1, 8, -1, buf, 8, nullptr, 0, out, 8, RVV_DTYPE_F32); },
       RVV_ERR_BAD_SHAPE, "K=-1"},
      {"convert negative n", [&] { return rvv_f32_to_bf16(out, buf, -1); }, RVV_ERR_BAD_SHAPE, "n < 0"},
      {"partition bad thread", [&] { return rvv_partition_blocks(10, 2, 2, &e, &e); }, RVV_ERR_BAD_RANGE,
       "t < nthreads"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.call(), c.want) << c.what;
    EXPECT_NE(last_error().find(c.in_message), std::string::npos) << c.what << ": '" << last_error() << "'";
  }

  EXPECT_STREQ(rvv_status_name(RVV_ERR_LAYOUT_MISMATCH), "packed layout mismatch");
  ASSERT_EQ(rvv_packed_size(1, 1, 1, &e), RVV_OK);
  EXPECT_EQ(last_error(), "") << "success clears the message";
}

TEST(CApi, ErrorMessagesArePerThread) {
  int64_t e;
  ASSERT_EQ(rvv_packed_size(-1, 1, 1, &e), RVV_ERR_BAD_SHAPE);
  std::string other = "unset";
  std::thread([&] { other = last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(last_error(), "");
  char tiny[4];
  EXPECT_GT(rvv_last_error(tiny, sizeof tiny), 3) << "returns the full length";
  EXPECT_EQ(std::string(tiny).size(), 3u) << "truncated and terminated";
}

}  // namespace

// The counting markers are architectural no-op hints: any valid id returns OK and
// changes nothing (the plugin's own known-answer test is bench/plugin_selftest.cpp);
// ids outside 1..16 are an error, not a silently dropped region.
TEST(CApi, CountRegionMarkers) {
  for (int id = 1; id <= 16; id++) {
    EXPECT_EQ(rvv_count_region(id, 1), RVV_OK);
    EXPECT_EQ(rvv_count_region(id, 0), RVV_OK);
  }
  EXPECT_EQ(rvv_count_region(0, 1), RVV_ERR_BAD_RANGE);
  EXPECT_EQ(rvv_count_region(17, 0), RVV_ERR_BAD_RANGE);
  EXPECT_NE(last_error().find("1..16"), std::string::npos);
}
