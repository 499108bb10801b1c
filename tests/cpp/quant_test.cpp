// INT8 / INT4 weights: the packed layout (bit-for-bit round trip of values, scales and zero
// points), the reference quantizer, and every quantized kernel of the table (each ISA
// variant the CPU has, plus the scalar code) against an FP64 product of the dequantized
// weights, over formats, group sizes, scale dtypes, zero points, tails in N and K, M, bias
// and output dtypes, and block ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "rvv_inductor/linear.h"
#include "rvv_inductor/quant_packing.h"
#include "quant_case.h"
#include "quant_gemm_entries.h"
#include "test_util.h"

namespace {

using namespace rvv_inductor;
using namespace testutil;
using namespace quantcase;

TEST(QuantLayout, PackRoundTripsBitForBit) {
  std::mt19937 rng(11);
  for (DType f : {DType::kInt8, DType::kInt4})
    for (int32_t g : {0, 16, 32, 64, 128})
      for (bool zp : {false, true})
        for (DType sd : {DType::kBF16, DType::kF16}) {
          const QuantSpec spec{f, g, sd, zp};
          if (validate_quant_spec(spec) != Status::kOk) continue;
          for (int64_t nb : {int64_t(1), int64_t(17), int64_t(64)}) {
            const int64_t N = 37, K = 133;
            const QuantWeight w = random_quant(rng, spec, N, K, nb);
            ASSERT_EQ(validate_layout(w.layout, N, K, nb), Status::kOk);
            const int64_t G = quant_num_groups(spec, K), gr = quant_group_rows(spec, K);
            for (int64_t n = 0; n < N; ++n)
              for (int64_t k = 0; k < K; ++k) {
                const QuantElement e = quant_element(w.packed.data(), w.layout, n, k);
                ASSERT_EQ(e.value, w.values[size_t(n * K + k)]) << n << "," << k << " g=" << g << " nb=" << nb;
                ASSERT_EQ(e.scale, w.scales[size_t(n * G + k / gr)]);
                ASSERT_EQ(e.zero, zp ? int(w.zeros[size_t(n * G + k / gr)]) : implicit_zero(f));
              }
            std::vector<float> deq(size_t(N * K));
            ASSERT_EQ(dequantize_packed(w.packed.data(), w.layout, deq.data(), K), Status::kOk);
            for (int64_t i = 0; i < N * K; ++i) ASSERT_EQ(double(deq[size_t(i)]), dequant(w, i / K, i % K));
          }
        }
}

TEST(QuantLayout, SizesAreTheStoredBytes) {
  // INT4 g32, nb 64, bf16 scales, symmetric: per group 64 * 2 scale bytes + 16 * 64 data.
  const QuantSpec q4{DType::kInt4, 32, DType::kBF16, false};
  EXPECT_EQ(quant_packed_bytes(q4, 128, 64, 64), 2 * 2 * (128 + 1024));
  // 4.5 bits per weight, as llama.cpp's Q4_0 (18 bytes per 32 weights).
  EXPECT_EQ(quant_packed_bytes(q4, 1536, 1536, 64) * 32, int64_t(1536) * 1536 * 18);
  const QuantSpec q8{DType::kInt8, 0, DType::kF16, false};
  EXPECT_EQ(quant_packed_bytes(q8, 100, 50, 64), 2 * (128 + 50 * 64));
  // With zero points: one more byte per group and column.
  const QuantSpec q4z{DType::kInt4, 64, DType::kF16, true};
  EXPECT_EQ(quant_packed_bytes(q4z, 64, 128, 64), 2 * (128 + 64 + 32 * 64));
}

TEST(QuantLayout, RejectsBadSpecsAndLayouts) {
  char err[256];
  struct Case {
    QuantSpec q;
    const char* in_message;
  };
  const Case cases[] = {
      {{DType::kBF16, 32, DType::kBF16, false}, "format"},
      {{DType::kInt4, 0, DType::kBF16, false}, "int4 needs a group size"},
      {{DType::kInt8, 33, DType::kBF16, false}, "group size 33"},
      {{DType::kInt8, 8, DType::kBF16, false}, "group size 8"},
      {{DType::kInt8, 32, DType::kF32, false}, "scale dtype"},
      {{DType::kInt8, 32, DType::kBF16, true}, "zero points are supported for int4 only"},
  };
  for (const Case& c : cases) {
    err[0] = '\0';
    EXPECT_NE(validate_quant_spec(c.q, err, sizeof err), Status::kOk) << c.in_message;
    EXPECT_NE(std::string(err).find(c.in_message), std::string::npos) << err;
    EXPECT_EQ(quant_packed_bytes(c.q, 10, 64, 8), -1);
  }
  // An int4 value outside [0, 15] is refused, not truncated.
  const QuantSpec q4{DType::kInt4, 32, DType::kBF16, false};
  std::vector<int8_t> v(64, 3);
  v[5] = 16;
  std::vector<uint16_t> s(2, 0x3F80);
  std::vector<uint8_t> out(size_t(quant_packed_bytes(q4, 1, 64, 8)));
  EXPECT_EQ(pack_quantized(q4, v.data(), 64, s.data(), nullptr, 1, 64, 8, out.data(), err, sizeof err),
            Status::kBadShape);
  EXPECT_NE(std::string(err).find("outside [0, 15]"), std::string::npos) << err;
  // A layout whose byte count does not match its spec is refused by the dispatcher's check.
  PackedLayout l = make_quant_layout(q4, 1, 64, 8, 0);
  l.bytes += 2;
  EXPECT_EQ(validate_layout(l, 1, 64, 8, err, sizeof err), Status::kLayoutMismatch);
  EXPECT_NE(std::string(err).find("bytes"), std::string::npos) << err;
  l = make_quant_layout(q4, 1, 64, 8, 0);
  l.group_size = 31;
  EXPECT_EQ(validate_layout(l, 1, 64, 8, err, sizeof err), Status::kLayoutMismatch);
  // unpack_bf16 does not read a quantized layout as bf16.
  std::vector<uint16_t> wout(64);
  l = make_quant_layout(q4, 1, 64, 8, 0);
  EXPECT_EQ(unpack_bf16(reinterpret_cast<const uint16_t*>(out.data()), l, wout.data(), 64, err, sizeof err),
            Status::kLayoutMismatch);
}

TEST(QuantLayout, ReferenceQuantizerRoundsToNearest) {
  std::mt19937 rng(5);
  const int64_t N = 9, K = 200;
  std::vector<uint16_t> W = random_bf16_vector(rng, size_t(N * K));
  for (int64_t k = 64; k < 96; ++k) W[size_t(3 * K + k)] = 0;  // an all-zero group
  for (DType f : {DType::kInt8, DType::kInt4})
    for (bool zp : {false, true})
      for (DType sd : {DType::kBF16, DType::kF16}) {
        const QuantSpec spec{f, 32, sd, zp};
        if (validate_quant_spec(spec) != Status::kOk) continue;
        const int64_t G = quant_num_groups(spec, K);
        std::vector<int8_t> v(size_t(N * K));
        std::vector<uint16_t> s(size_t(N * G));
        std::vector<uint8_t> z(size_t(N * G));
        ASSERT_EQ(quantize_reference(spec, W.data(), K, N, K, v.data(), s.data(), z.data()), Status::kOk);
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < K; ++k) {
            const int64_t g = k / 32;
            const double sc = scale_to_f32(s[size_t(n * G + g)], sd);
            const int zz = zp ? z[size_t(n * G + g)] : implicit_zero(f);
            const double w = bf16_value(W[size_t(n * K + k)]), deq = (v[size_t(n * K + k)] - zz) * sc;
            if (n == 3 && g == 2) {
              ASSERT_EQ(deq, 0.0);  // zeros stay exactly zero
              continue;
            }
            // Round to nearest: within half a step, except where the range clamps (INT4
            // symmetric maps +max to 7 steps, so the top may be off by at most one step).
            const double slack = (f == DType::kInt4 && !zp) ? 1.0 : 0.5;
            // The scale itself was rounded to 8 (bf16) or 11 (f16) bits: the grid moved by
            // up to 2^-8 relative, which can cost up to 2^-8 * 127 steps at the range end.
            const double scale_err = std::fabs(sc) * (sd == DType::kBF16 ? 128 : 16) * std::ldexp(1.0, -8);
            ASSERT_LE(std::fabs(deq - w), slack * std::fabs(sc) + scale_err + 1e-30)
                << "n=" << n << " k=" << k << " w=" << w << " deq=" << deq;
          }
      }
}

// Every quantized kernel against the FP64 reference.
TEST(QuantKernels, MatchFp64ReferenceOnDequantizedWeights) {
  std::mt19937 rng(2024);
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  const int64_t pref = preferred_nb(hw);
  struct Shape {
    int64_t N, K;
  };
  const Shape shapes[] = {{1, 32}, {40, 64}, {77, 133}, {130, 256}, {65, 511}};
  int ran = 0;
  for (DType f : {DType::kInt8, DType::kInt4})
    for (const Variant& var : variants_for(f))
      for (int32_t g : {0, 32, 64, 128})
        for (bool zp : {false, true}) {
          const QuantSpec spec{f, g, (g / 32) % 2 ? DType::kF16 : DType::kBF16, zp};
          if (validate_quant_spec(spec) != Status::kOk) continue;
          for (const Shape& sh : shapes)
            for (int64_t nb : {pref, int64_t(17)})
              for (int64_t M : {1, 2, 5}) {
                const QuantWeight w = random_quant(rng, spec, sh.N, sh.K, nb);
                const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * sh.K));
                const bool with_bias = (sh.N + M) % 2 == 0;
                const std::vector<uint16_t> bias = random_bf16_vector(rng, size_t(sh.N));
                const DType y_dtype = M == 2 ? DType::kBF16 : DType::kF32;
                std::vector<float> y(size_t(M * sh.N), -7.0f);
                LinearProblem p = quant_problem(w, x, M, y);
                p.bias = with_bias ? bias.data() : nullptr;
                p.bias_dtype = DType::kBF16;
                p.y_dtype = y_dtype;
                char err[256] = "";
                KernelPath used;
                ASSERT_EQ(linear_bf16(p, var.cpu, &used, err, sizeof err), Status::kOk) << err;
                double amax = 0;
                const RefMatrix ref = quant_reference(w, x, M, p.bias, DType::kBF16, &amax);
                const std::string what = var.name + " " + (f == DType::kInt8 ? "int8" : "int4") + " g=" +
                                         std::to_string(g) + (zp ? " zp" : "") + " N=" + std::to_string(sh.N) +
                                         " K=" + std::to_string(sh.K) + " nb=" + std::to_string(nb) +
                                         " M=" + std::to_string(M);
                EXPECT_TRUE(check_output(ref, y.data(), y_dtype, sh.N, M, sh.N, 0, sh.N)) << what;
                ++ran;
              }
        }
  EXPECT_GT(ran, 0);
}

// A block range writes exactly its columns, on every variant.
TEST(QuantKernels, BlockRangeWritesOnlyItsColumns) {
  std::mt19937 rng(7);
  for (DType f : {DType::kInt8, DType::kInt4})
    for (const Variant& var : variants_for(f)) {
      const QuantSpec spec{f, 32, DType::kF16, f == DType::kInt4};
      const int64_t N = 100, K = 96, nb = 16;
      const QuantWeight w = random_quant(rng, spec, N, K, nb);
      for (int64_t M : {1, 3}) {
        const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
        std::vector<float> y(size_t(M * N), -7.0f);
        LinearProblem p = quant_problem(w, x, M, y);
        p.nb = nb;
        p.block_begin = 2, p.block_end = 5;
        ASSERT_EQ(linear_bf16(p, var.cpu), Status::kOk);
        double amax;
        const RefMatrix ref = quant_reference(w, x, M, nullptr, DType::kBF16, &amax);
        EXPECT_TRUE(check_output(ref, y.data(), DType::kF32, N, M, N, 2 * nb, 5 * nb)) << var.name;
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            if (n >= 2 * nb && n < 5 * nb) continue;
            ASSERT_EQ(y[size_t(m * N + n)], -7.0f) << var.name << " wrote column " << n;
          }
      }
    }
}

#if defined(__riscv)
// The GEMM's cache blocking (row blocks, K blocks, column groups) with block sizes small
// enough that these shapes cross every boundary: K blocks inside a group and across
// groups, a partial last group with an odd row (INT4's lone low nibble), row blocks with a
// short tile, column groups with a partial block. Blocking must not change the result:
// the same fp32 sums in the same order, so it equals the unblocked run bit for bit, and
// both are within the FP64 bound.
TEST(QuantKernels, GemmBlockingIsExactAtEveryBoundary) {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  if (!hw.has_v) GTEST_SKIP() << "no V extension: the RVV GEMM cannot run here (the scalar path is tested above)";
  std::mt19937 rng(11);
  struct Blocking {
    int64_t mc, kc, ncb;
  };
  const Blocking blockings[] = {{4, 2, 1}, {8, 6, 2}, {4, 32, 3}, {12, 40, 1}, {4, 64, 2}, {16, 130, 1}};
  int ran = 0;
  for (const QuantSpec spec : {QuantSpec{DType::kInt4, 32, DType::kF16, true}, QuantSpec{DType::kInt4, 64, DType::kBF16, false},
                               QuantSpec{DType::kInt8, 32, DType::kF16, false}, QuantSpec{DType::kInt8, 0, DType::kBF16, false}})
    for (int64_t K : {133, 96}) {
      const int64_t N = 70, nb = 16;
      const QuantWeight w = random_quant(rng, spec, N, K, nb);
      for (int64_t M : {2, 9, 13}) {
        const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
        const std::vector<uint16_t> bias = random_bf16_vector(rng, size_t(N));
        LinearOperands a{};
        a.M = M, a.N = N, a.K = K, a.x = x.data(), a.ldx = K;
        a.weight_layout = WeightLayout::kPacked, a.w = w.packed.data(), a.layout = &w.layout, a.nb = nb;
        a.bias = bias.data(), a.bias_dtype = DType::kBF16, a.ldy = N, a.y_dtype = DType::kF32;
        a.block_begin = 0, a.block_end = w.layout.num_blocks;
        std::vector<float> unblocked(size_t(M * N), -7.0f);
        a.y = unblocked.data();
        ASSERT_EQ(quant_gemm_entry_rvv(a, M, K, w.layout.num_blocks), Status::kOk);
        double amax;
        const RefMatrix ref = quant_reference(w, x, M, bias.data(), DType::kBF16, &amax);
        ASSERT_TRUE(check_output(ref, unblocked.data(), DType::kF32, N, M, N, 0, N));
        for (const Blocking& bk : blockings) {
          std::vector<float> y(size_t(M * N), -7.0f);
          a.y = y.data();
          const std::string what = std::string(spec.format == DType::kInt8 ? "int8" : "int4") + " g=" +
                                   std::to_string(spec.group_size) + " K=" + std::to_string(K) + " M=" +
                                   std::to_string(M) + " mc=" + std::to_string(bk.mc) + " kc=" + std::to_string(bk.kc) +
                                   " ncb=" + std::to_string(bk.ncb);
          ASSERT_EQ(quant_gemm_entry_rvv(a, bk.mc, bk.kc, bk.ncb), Status::kOk) << what;
          ASSERT_EQ(0, std::memcmp(y.data(), unblocked.data(), y.size() * sizeof(float))) << what;
          ++ran;
        }
        // A block range inside a column group: only its columns are written.
        std::vector<float> y(size_t(M * N), -7.0f);
        a.y = y.data();
        a.block_begin = 1, a.block_end = 4;
        ASSERT_EQ(quant_gemm_entry_rvv(a, 4, 2, 2), Status::kOk);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            const float want = n >= nb && n < 4 * nb ? unblocked[size_t(m * N + n)] : -7.0f;
            ASSERT_EQ(y[size_t(m * N + n)], want) << "block range 1..4, row " << m << " column " << n;
          }
        // Block sizes the kernel cannot run: an odd K block splits an INT4 row pair, a row
        // block that is not whole tiles, empty blocks.
        a.block_begin = 0, a.block_end = w.layout.num_blocks;
        EXPECT_EQ(quant_gemm_entry_rvv(a, 4, 3, 1), Status::kBadShape);
        if (M > 6) EXPECT_EQ(quant_gemm_entry_rvv(a, 6, 4, 1), Status::kBadShape);
        EXPECT_EQ(quant_gemm_entry_rvv(a, 0, 4, 1), Status::kBadShape);
        EXPECT_EQ(quant_gemm_entry_rvv(a, 4, 4, 0), Status::kBadShape);
      }
    }
  EXPECT_EQ(ran, 4 * 2 * 3 * 6);
}

// The sizes the kernel picks: whole tiles, K blocks on group (or INT4 pair) boundaries,
// the activation block, the accumulators and the weight slice within their cache budgets,
// and no K blocks (so no accumulators and one column group) when a row block's whole K
// fits.
TEST(QuantKernels, GemmDefaultBlockingFitsItsBudgets) {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  if (!hw.has_v) GTEST_SKIP() << "no V extension";
  for (int bits : {4, 8})
    for (int64_t M : {2, 5, 16, 64, 65, 256})
      for (int64_t K : {96, 1536, 8960, 8961})
        for (int64_t gr : {int64_t(32), int64_t(64), int64_t(128), K})
          for (int64_t nb : {16, 32, 64}) {
            int64_t mc, kc, ncb;
            quant_gemm_default_blocking_rvv(M, K, nb, gr, bits, &mc, &kc, &ncb);
            const std::string what = "bits=" + std::to_string(bits) + " M=" + std::to_string(M) +
                                     " K=" + std::to_string(K) + " gr=" + std::to_string(gr) + " nb=" + std::to_string(nb);
            EXPECT_TRUE(mc == M || (mc % 4 == 0 && mc < M)) << what;
            EXPECT_LE(mc * kc, 16384) << what;  // 64 KB of fp32 activations
            if (mc * K <= 16384) {
              EXPECT_EQ(kc, K) << what;
              EXPECT_GE(ncb, int64_t(1) << 30) << what;  // every block in one group
              continue;
            }
            EXPECT_TRUE(kc % 2 == 0 && kc < K && (gr > kc || kc % gr == 0)) << what;
            EXPECT_GE(ncb, 1) << what;
            if (ncb > 1) {
              EXPECT_LE(mc * ncb * nb, 16384) << what;             // 64 KB of accumulators
              EXPECT_LE(kc * ncb * nb * bits / 8, 131072) << what;  // 128 KB of weights per K block
            }
          }
}
#endif

// Activations spanning the whole bf16 exponent range: the fp16 path rescales x by a power
// of two and must stay within the fp32 bound (values below 2^-31 of max|x| may lose up to
// 2^-39 max|x| each, which is added to the bound).
TEST(QuantKernels, WideActivationRange) {
  std::mt19937 rng(3);
  for (const Variant& var : variants_for(DType::kInt8)) {
    const QuantSpec spec{DType::kInt8, 64, DType::kBF16, false};
    const int64_t N = 64, K = 256;
    const QuantWeight w = random_quant(rng, spec, N, K, 64);
    for (float big : {1e-30f, 1.0f, 3e4f, 1e30f}) {
      std::vector<uint16_t> x = random_bf16_vector(rng, size_t(K));
      for (int64_t k = 0; k < K; ++k) x[size_t(k)] = f32_to_bf16(bf16_to_f32(x[size_t(k)]) * big);
      std::vector<float> y(static_cast<size_t>(N));
      const LinearProblem p = quant_problem(w, x, 1, y);
      ASSERT_EQ(linear_bf16(p, var.cpu), Status::kOk);
      double amax;
      RefMatrix ref = quant_reference(w, x, 1, nullptr, DType::kBF16, &amax);
      for (int64_t n = 0; n < N; ++n) {
        double wsum = 0;
        for (int64_t k = 0; k < K; ++k) wsum += std::fabs(dequant(w, n, k));
        // Loss bound of the flushed activations, expressed in abs_sum units of the f32 bound.
        const double loss = std::ldexp(amax, -39) * wsum;
        ref.abs_sum[size_t(n)] += loss / f32_bound(1.0, ref.terms);
      }
      EXPECT_TRUE(check_output(ref, y.data(), DType::kF32, N, 1, N, 0, N)) << var.name << " scale " << big;
    }
  }
}

// The opt-in INT8-activation decode kernel (x_int8): within its stated bound
// sum_k |w_k| * dx_block(k) / 2 (dx = block max|x| / 127, 16-element blocks) plus the fp32
// bound, on every variant that has it; the scalar code (and any shape it does not cover)
// gives the fp result, which is inside the same bound.
TEST(QuantKernels, Int8ActivationsWithinTheirBound) {
  std::mt19937 rng(99);
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  std::vector<KernelInfo> ks(64);
  ks.resize(list_kernels(hw, ks.data(), ks.size()));
  std::vector<Variant> vars = {{"scalar", features_for_path(KernelPath::kScalar, 0)}};
  for (const KernelInfo& k : ks)
    if (k.kind == KernelKind::kGemvX8) vars.push_back({k.name, features_for_path(k.path, hw.vlenb)});
#if defined(__riscv)
  if (hw.has_v) EXPECT_GE(vars.size(), 2u) << "an RVV CPU lists the INT8-activation kernel";
#endif
  for (const Variant& var : vars)
    for (int32_t g : {32, 64, 128})
      for (bool zp : {false, true})
        for (int64_t K : {int64_t(64), int64_t(200), int64_t(1536)}) {
          const QuantSpec spec{DType::kInt4, g, DType::kF16, zp};
          const int64_t N = 72, nb = preferred_nb(hw);
          const QuantWeight w = random_quant(rng, spec, N, K, nb);
          std::vector<uint16_t> x = random_bf16_vector(rng, size_t(K));
          x[size_t(K / 3)] = f32_to_bf16(40.0f);  // one outlier: its block gets a coarse step
          std::vector<float> y(static_cast<size_t>(N));
          LinearProblem p = quant_problem(w, x, 1, y);
          p.x_int8 = 1;
          ASSERT_EQ(linear_bf16(p, var.cpu), Status::kOk);
          const char* name = selected_kernel_name(p, var.cpu);
          ASSERT_NE(name, nullptr);
          double amax;
          RefMatrix ref = quant_reference(w, x, 1, nullptr, DType::kBF16, &amax);
          for (int64_t n = 0; n < N; ++n) {
            double qerr = 0;
            for (int64_t k = 0; k < K; ++k) {
              double bmax = 0;
              for (int64_t i = k / 16 * 16; i < std::min(K, k / 16 * 16 + 16); ++i)
                bmax = std::fmax(bmax, std::fabs(bf16_value(x[size_t(i)])));
              qerr += std::fabs(dequant(w, n, k)) * bmax / 127.0 * 0.5 * (1 + 1e-6);
            }
            ref.abs_sum[size_t(n)] += qerr / f32_bound(1.0, ref.terms);
          }
          EXPECT_TRUE(check_output(ref, y.data(), DType::kF32, N, 1, N, 0, N))
              << var.name << " (" << name << ") g=" << g << (zp ? " zp" : "") << " K=" << K;
        }
}

// Inf and NaN activations give what IEEE arithmetic on the dequantized weights gives (the
// FP64 reference), on every quantized kernel, with and without x_int8, at M = 1 and 3.
TEST(QuantKernels, NonFiniteActivationsFollowIeee) {
  std::mt19937 rng(5);
  for (DType f : {DType::kInt8, DType::kInt4})
    for (const Variant& var : variants_for(f))
      for (int32_t x8 : {0, 1})
        for (int64_t M : {int64_t(1), int64_t(3)})
          for (float bad : {INFINITY, -INFINITY, NAN}) {
            const QuantSpec spec{f, 32, DType::kBF16, f == DType::kInt4 && M == 3};
            const int64_t N = 64, K = 64;
            const QuantWeight w = random_quant(rng, spec, N, K, 16);
            std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
            x[7] = f32_to_bf16(bad);
            std::vector<float> y(static_cast<size_t>(M * N));
            LinearProblem p = quant_problem(w, x, M, y);
            p.x_int8 = x8;
            ASSERT_EQ(linear_bf16(p, var.cpu), Status::kOk);
            double amax;
            const RefMatrix ref = quant_reference(w, x, M, nullptr, DType::kBF16, &amax);
            EXPECT_TRUE(check_output(ref, y.data(), DType::kF32, N, M, N, 0, N))
                << var.name << " " << selected_kernel_name(p, var.cpu) << " x has " << bad << " M=" << M;
          }
}

}  // namespace
