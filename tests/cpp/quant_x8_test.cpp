// The INT8-activation GEMM (M >= 2, LinearOperands::x_int8 & kX8Gemm; quant_x8.h): every
// kernel of the table that has it, and the scalar reference the dispatcher runs without V,
// against
//   - each other, bit for bit (they are specified to do the same operations in the same order);
//   - an FP64 product of the quantized activations (quantized here, from the definition)
//     and the dequantized weights: only fp32 rounding of a few terms per block may differ;
//   - an FP64 product of the bf16 activations: within the stated activation bound;
// and the blocking, the fallbacks (Inf/NaN rows, group sizes it does not cover, M == 1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant_case.h"
#include "quant_gemm_entries.h"
#include "rvv_inductor/linear.h"
#include "rvv_inductor/quant_x8.h"
#include "test_util.h"

namespace {

using namespace rvv_inductor;
using namespace testutil;
using namespace quantcase;

// The scalar code (the reference) first, then every gemm_x8 kernel the CPU has.
std::vector<Variant> x8_variants(DType format) {
  std::vector<Variant> v = variants_for(format, KernelKind::kGemmX8);
#if defined(__riscv)
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  if (hw.has_v) EXPECT_GE(v.size(), 2u) << "an RVV CPU lists the INT8-activation GEMM";
#endif
  return v;
}

// FP64 Y on the quantized activations. abs_sum: the magnitudes the kernel's fp32 steps
// round (per block |dx * isum * s|, the zero-point term per group, the bias); terms: the
// number of fp32 steps per output.
RefMatrix x8_reference(const QuantWeight& w, const std::vector<uint16_t>& x, int64_t M, const void* bias,
                       DType bias_dtype) {
  RefMatrix r;
  const int64_t K = w.K, N = w.N, G = quant_num_groups(w.spec, K), gr = quant_group_rows(w.spec, K);
  const int64_t nblk = (K + 31) / 32;
  r.value.assign(size_t(M * N), 0.0);
  r.abs_sum.assign(size_t(M * N), 0.0);
  r.terms = 2 * nblk + 2 * G + 2;
  for (int64_t m = 0; m < M; ++m) {
    const QuantRow qr = quantize_row(x.data() + m * K, K);
    for (int64_t n = 0; n < N; ++n) {
      const double b = bias_value(bias, bias_dtype, n);
      double s = b, a = std::fabs(b);
      for (int64_t k0 = 0; k0 < K; k0 += 32) {
        double blk = 0, zterm = 0;
        for (int64_t k = k0; k < std::min(K, k0 + 32); ++k) {
          const double xv = double(qr.q[size_t(k)]) * qr.dx[size_t(k0 / 32)];
          s += xv * dequant(w, n, k);
          const int64_t g = k / gr;
          const double sc = double(scale_to_f32(w.scales[size_t(n * G + g)], w.spec.scale_dtype));
          if (w.spec.format == DType::kInt4) {
            const int z = w.spec.zero_points ? w.zeros[size_t(n * G + g)] : 8;
            blk += xv * (w.values[size_t(n * K + k)] - 8) * sc;
            zterm += std::fabs(xv * (z - 8) * sc);
          } else {
            blk += xv * w.values[size_t(n * K + k)] * sc;
          }
        }
        a += std::fabs(blk) + zterm;
      }
      r.value[size_t(m * N + n)] = s;
      r.abs_sum[size_t(m * N + n)] = a;
    }
  }
  return r;
}

struct Case {
  QuantSpec spec;
  int64_t M, N, K;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int64_t K : {32, 200, 1536})
    for (int64_t M : {2, 3, 5, 9}) {
      const int64_t N = M == 9 ? 136 : 72;
      for (int32_t g : {32, 64, 128}) {
        out.push_back({{DType::kInt4, g, DType::kF16, false}, M, N, K});
        out.push_back({{DType::kInt4, g, M % 2 ? DType::kBF16 : DType::kF16, true}, M, N, K});
      }
      for (int32_t g : {0, 32, 128}) out.push_back({{DType::kInt8, g, g ? DType::kF16 : DType::kBF16, false}, M, N, K});
    }
  return out;
}

std::string describe(const Case& c) {
  return std::string(c.spec.format == DType::kInt4 ? "int4" : "int8") + " g=" + std::to_string(c.spec.group_size) +
         (c.spec.zero_points ? " zp" : "") + (c.spec.scale_dtype == DType::kF16 ? " f16" : " bf16") +
         " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K);
}

// Every kernel equals the scalar reference bit for bit, and both are within the fp32
// bound of the FP64 product on the quantized activations.
TEST(X8Gemm, KernelsMatchTheReferenceBitForBitAndFp64) {
  std::mt19937 rng(2026);
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  const int64_t nb = preferred_nb(hw);
  int compared = 0;
  for (const Case& c : cases()) {
    const QuantWeight w = random_quant(rng, c.spec, c.N, c.K, nb);
    std::vector<uint16_t> x = random_bf16_vector(rng, size_t(c.M * c.K));
    x[size_t(c.K / 3)] = f32_to_bf16(-40.0f);  // an outlier: a coarse step for its block
    const std::vector<uint16_t> bias = random_bf16_vector(rng, size_t(c.N));
    const bool with_bias = c.M != 3;
    const RefMatrix ref = x8_reference(w, x, c.M, with_bias ? bias.data() : nullptr, DType::kBF16);
    std::vector<float> want;
    for (const Variant& var : x8_variants(c.spec.format)) {
      std::vector<float> y(size_t(c.M * c.N), -7.0f);
      LinearProblem p = quant_problem(w, x, c.M, y);
      p.x_int8 = kX8Gemm;
      if (with_bias) p.bias = bias.data(), p.bias_dtype = DType::kBF16;
      ASSERT_EQ(linear_bf16(p, var.cpu), Status::kOk) << var.name << " " << describe(c);
      const char* name = selected_kernel_name(p, var.cpu);
      ASSERT_NE(name, nullptr);
      EXPECT_NE(std::string(name).find("gemm_x8"), std::string::npos) << name << " " << describe(c);
      EXPECT_TRUE(check_output(ref, y.data(), DType::kF32, c.N, c.M, c.N, 0, c.N)) << var.name << " " << describe(c);
      if (want.empty()) {
        want = y;  // the scalar reference
      } else {
        ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float))) << var.name << " " << describe(c);
        ++compared;
      }
    }
  }
#if defined(__riscv)
  if (hw.has_v) EXPECT_GE(compared, int(cases().size()));
#endif
}

// The bf16 output, f32 and no bias, and a block range: the same bits as the reference.
TEST(X8Gemm, OutputDtypesBiasAndRanges) {
  std::mt19937 rng(7);
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  const int64_t nb = preferred_nb(hw), M = 6, N = 5 * nb + 3, K = 288;
  for (DType f : {DType::kInt4, DType::kInt8}) {
    const QuantWeight w = random_quant(rng, {f, 32, DType::kF16, f == DType::kInt4}, N, K, nb);
    const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
    std::vector<float> fbias(static_cast<size_t>(N));
    for (auto& b : fbias) b = bf16_to_f32(random_bf16(rng));
    for (DType yd : {DType::kF32, DType::kBF16})
      for (DType bd : {DType::kNone, DType::kF32}) {
        std::vector<std::vector<uint16_t>> outs;
        for (const Variant& var : x8_variants(f)) {
          std::vector<uint16_t> y(size_t(M * N * 2), 0x5555);  // room for f32
          LinearProblem p{};
          p.M = M, p.N = N, p.K = K, p.x = x.data(), p.ldx = K;
          p.weight_layout = WeightLayout::kPacked, p.w = w.packed.data(), p.layout = &w.layout;
          p.y = y.data(), p.ldy = N, p.y_dtype = yd, p.block_begin = 1, p.block_end = 4, p.x_int8 = kX8Gemm;
          if (bd != DType::kNone) p.bias = fbias.data(), p.bias_dtype = bd;
          ASSERT_EQ(linear_bf16(p, var.cpu), Status::kOk) << var.name;
          // Only columns [nb, 4 nb) are written.
          const size_t es = yd == DType::kF32 ? 4 : 2;
          const auto* bytes = reinterpret_cast<const uint8_t*>(y.data());
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n)
              if (n < nb || n >= 4 * nb)
                for (size_t b = 0; b < es; ++b) ASSERT_EQ(bytes[(size_t(m * N + n)) * es + b], 0x55) << var.name;
          outs.push_back(y);
        }
        for (size_t i = 1; i < outs.size(); ++i) EXPECT_EQ(outs[i], outs[0]) << "variant " << i;
      }
  }
}

// Against the bf16 activations themselves: within sum_k |w_k| dx_block(k) / 2 plus the fp32
// bound, also for activations near the bottom and the top of the bf16 range (blocks below
// 2^-96 are zero: their error is at most 2^-96 sum|w|).
TEST(X8Gemm, WithinTheActivationBound) {
  std::mt19937 rng(31);
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  const int64_t nb = preferred_nb(hw), M = 4, N = 40, K = 320;
  for (DType f : {DType::kInt4, DType::kInt8})
    for (float scale : {1e-35f, 1e-20f, 1.0f, 1e30f}) {
      const QuantWeight w = random_quant(rng, {f, f == DType::kInt4 ? 64 : 0, DType::kF16, false}, N, K, nb);
      std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
      for (auto& v : x) v = f32_to_bf16(bf16_to_f32(v) * scale);
      x[5] = f32_to_bf16(30.0f * scale);
      double amax;
      RefMatrix ref = quant_reference(w, x, M, nullptr, DType::kBF16, &amax);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double qerr = 0;
          for (int64_t k = 0; k < K; ++k) {
            double bmax = 0;
            for (int64_t i = k / 32 * 32; i < std::min(K, k / 32 * 32 + 32); ++i)
              bmax = std::fmax(bmax, std::fabs(bf16_value(x[size_t(m * K + i)])));
            const double step = bmax < std::ldexp(1.0, -96) ? 2 * bmax : bmax / 127.0 * (1 + 1e-6);
            qerr += std::fabs(dequant(w, n, k)) * step * 0.5;
          }
          ref.abs_sum[size_t(m * N + n)] += qerr / f32_bound(1.0, ref.terms);
        }
      for (const Variant& var : x8_variants(f)) {
        std::vector<float> y(size_t(M * N));
        LinearProblem p = quant_problem(w, x, M, y);
        p.x_int8 = kX8Gemm;
        ASSERT_EQ(linear_bf16(p, var.cpu), Status::kOk);
        EXPECT_TRUE(check_output(ref, y.data(), DType::kF32, N, M, N, 0, N)) << var.name << " scale " << scale;
      }
    }
}

// Inf or NaN in any row: the call takes the fp path, bit for bit the result without x_int8.
TEST(X8Gemm, NonFiniteRowsTakeTheFpPath) {
  std::mt19937 rng(17);
  for (DType f : {DType::kInt4, DType::kInt8})
    for (float bad : {INFINITY, NAN}) {
      const QuantWeight w = random_quant(rng, {f, 32, DType::kF16, false}, 64, 96, 32);
      std::vector<uint16_t> x = random_bf16_vector(rng, size_t(3 * 96));
      x[96 + 11] = f32_to_bf16(bad);
      for (const Variant& var : x8_variants(f)) {
        std::vector<float> y8(3 * 64), yf(3 * 64);
        LinearProblem p = quant_problem(w, x, 3, y8);
        p.x_int8 = kX8Gemm;
        ASSERT_EQ(linear_bf16(p, var.cpu), Status::kOk);
        p.y = yf.data(), p.x_int8 = 0;
        ASSERT_EQ(linear_bf16(p, var.cpu), Status::kOk);
        EXPECT_EQ(0, std::memcmp(y8.data(), yf.data(), y8.size() * sizeof(float))) << var.name << " " << bad;
      }
    }
}

// Where the scheme does not apply the fp kernels run: group sizes that are not whole
// 32-element blocks, and M == 1.
TEST(X8Gemm, OnlyWhereItApplies) {
  std::mt19937 rng(5);
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  for (int32_t g : {16, 48, 96}) {
    const QuantWeight w = random_quant(rng, {DType::kInt4, g, DType::kF16, false}, 32, 192, 32);
    std::vector<uint16_t> x = random_bf16_vector(rng, size_t(2 * 192));
    std::vector<float> y(64);
    LinearProblem p = quant_problem(w, x, 2, y);
    p.x_int8 = kX8Gemm;
    const bool applies = g % 32 == 0;
    EXPECT_EQ(std::string(selected_kernel_name(p, hw)).find("gemm_x8") != std::string::npos, applies) << g;
    p.M = 1;
    EXPECT_EQ(std::string(selected_kernel_name(p, hw)).find("x8"), std::string::npos) << "M = 1, g=" << g;
  }
}

#if defined(__riscv)
// Forced small blocks cross every row, K and column block boundary; the result is the
// default blocking's bit for bit (each output's operations keep their order). The default
// blocking keeps its budgets.
TEST(X8Gemm, BlockingIsExactAtEveryBoundary) {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  if (!hw.has_v) GTEST_SKIP() << "no V extension";
  std::mt19937 rng(44);
  const int64_t nb = 16, N = 70;
  for (const QuantSpec& spec : {QuantSpec{DType::kInt4, 32, DType::kF16, false},
                                QuantSpec{DType::kInt4, 64, DType::kBF16, true}, QuantSpec{DType::kInt8, 0, DType::kF16, false},
                                QuantSpec{DType::kInt8, 32, DType::kF16, false}})
    for (int64_t K : {int64_t(200), int64_t(384)}) {
      const QuantWeight w = random_quant(rng, spec, N, K, nb);
      for (int64_t M : {2, 7, 13}) {
        const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
        const std::vector<uint16_t> bias = random_bf16_vector(rng, size_t(N));
        LinearOperands a{};
        a.M = M, a.N = N, a.K = K, a.x = x.data(), a.ldx = K;
        a.weight_layout = WeightLayout::kPacked, a.w = w.packed.data(), a.layout = &w.layout, a.nb = nb;
        a.bias = bias.data(), a.bias_dtype = DType::kBF16, a.ldy = N, a.y_dtype = DType::kF32;
        a.block_begin = 0, a.block_end = w.layout.num_blocks, a.x_int8 = kX8Gemm;
        std::vector<float> whole(size_t(M * N), -7.0f);
        a.y = whole.data();
        ASSERT_EQ(quant_x8_gemm_entry_rvv(a, M, K, w.layout.num_blocks), Status::kOk);
        const RefMatrix ref = x8_reference(w, x, M, bias.data(), DType::kBF16);
        ASSERT_TRUE(check_output(ref, whole.data(), DType::kF32, N, M, N, 0, N));
        int64_t mc0, kc0, ncb0, step, mr, vlmax;
        quant_x8_default_blocking_rvv(a, &mc0, &kc0, &ncb0, &step, &mr, &vlmax);
        const std::string base = std::string(spec.format == DType::kInt4 ? "int4" : "int8") + " g=" +
                                 std::to_string(spec.group_size) + " K=" + std::to_string(K) + " M=" + std::to_string(M);
        for (int64_t mc : {mr, 2 * mr, M})
          for (int64_t kc : {step, 2 * step, K})
            for (int64_t ncb : {int64_t(1), int64_t(2), w.layout.num_blocks}) {
              if (mc != M && mc % mr) continue;
              std::vector<float> y(size_t(M * N), -7.0f);
              a.y = y.data();
              const std::string what = base + " mc=" + std::to_string(mc) + " kc=" + std::to_string(kc) +
                                       " ncb=" + std::to_string(ncb);
              ASSERT_EQ(quant_x8_gemm_entry_rvv(a, mc, kc, ncb), Status::kOk) << what;
              ASSERT_EQ(0, std::memcmp(y.data(), whole.data(), y.size() * sizeof(float))) << what;
            }
        // Blocks it cannot run: a K block off the step, a row block that is not whole tiles.
        EXPECT_EQ(quant_x8_gemm_entry_rvv(a, mr, step + 2, 1), Status::kBadShape);
        if (M > mr + 1) EXPECT_EQ(quant_x8_gemm_entry_rvv(a, mr + 1, step, 1), Status::kBadShape);
        EXPECT_EQ(quant_x8_gemm_entry_rvv(a, 0, step, 1), Status::kBadShape);
      }
    }
  // The default sizes: whole tiles, K blocks on the step, the budgets of the header.
  for (DType f : {DType::kInt4, DType::kInt8})
    for (int64_t M : {2, 5, 64, 65, 512})
      for (int64_t K : {96, 1536, 8960})
        for (int32_t g : {0, 32, 128}) {
          if (f == DType::kInt4 && g == 0) continue;
          const QuantSpec spec{f, g, DType::kF16, false};
          PackedLayout l = make_quant_layout(spec, 256, K, 64, 0);
          LinearOperands a{};
          a.M = M, a.K = K, a.nb = 64, a.layout = &l;
          int64_t mc, kc, ncb, step, mr, vlmax;
          quant_x8_default_blocking_rvv(a, &mc, &kc, &ncb, &step, &mr, &vlmax);
          const std::string what = describe({spec, M, 256, K});
          EXPECT_TRUE(mc == M || (mc % mr == 0 && mc < M)) << what;
          EXPECT_TRUE(kc == K || (kc % step == 0 && kc < K)) << what;
          if (kc < K) {
            EXPECT_LE(mc * kc, 32768) << what;
            if (f == DType::kInt4 && step <= 16384 / vlmax) EXPECT_LE(kc * vlmax, 16384) << what;
            if (ncb > 1) EXPECT_LE(mc * ncb * 64, 16384) << what;
          }
        }
}
#endif

}  // namespace
