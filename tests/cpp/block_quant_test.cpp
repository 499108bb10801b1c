// The GGUF block formats (Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K;
// block_quant.h,
// weight_formats.inl):
// packing from random file blocks against an independent decoder of the file format
// (written from gguf-py's dequantize, not from block_quant.h), bit for bit; every kernel
// of the table for these formats (each ISA variant the CPU has, plus the scalar code)
// against an FP64 product of the dequantized weights, over N tails, nb, M, bias and output
// dtypes; the GEMM's K blocks; the layout's validation and the C ABI. The INT8-activation
// GEMM (quant_x8.h) against an FP64 product of activations quantized here from the
// definition, bit for bit against its scalar reference, and over its blocking.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant_case.h"
#include "quant_gemm_entries.h"
#include "rvv_inductor/block_quant.h"
#include "rvv_inductor/capi.h"
#include "rvv_inductor/linear.h"
#include "rvv_inductor/quant_packing.h"
#include "rvv_inductor/quant_x8.h"
#include "test_util.h"

namespace {

using namespace rvv_inductor;
using namespace testutil;
using quantcase::Variant;
using quantcase::variants_for;

const DType kFormats[] = {DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kIQ4_XS,
                          DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// One file block's values, the way gguf-py's dequantize_blocks computes them (fp32: the
// scale products first, then q, then the offset), element by element from the file bytes.
void file_dequant(DType f, const uint8_t* b, float* out) {
  if (f == DType::kQ4_1) {
    const float d = half(b), m = half(b + 2);
    for (int i = 0; i < 16; ++i) {
      out[i] = d * float(b[4 + i] & 0xF) + m;
      out[i + 16] = d * float(b[4 + i] >> 4) + m;
    }
    return;
  }
  if (f == DType::kQ2_K) {
    // gguf-py: scales 16 | qs 64 | d | dmin. Sub-block j (16 values) has dl = d * (scales[j]
    // & 15), ml = dmin * (scales[j] >> 4); value e sits in qs[32 (e / 128) + e % 32] at
    // shift 2 ((e % 128) / 32); dl * q - ml.
    const float d = half(b + 80), dmin = half(b + 82);
    for (int e = 0; e < 256; ++e) {
      const int q = (b[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const uint8_t sc = b[e / 16];
      out[e] = (d * float(sc & 0xF)) * float(q) - dmin * float(sc >> 4);
    }
    return;
  }
  if (f == DType::kQ3_K) {
    // gguf-py: hmask 32 | qs 64 | scales 12 | d. Scale j: the low nibble of byte j (j < 8)
    // or the high nibble of byte j - 8, with bits 2 (j / 4) of byte 8 + j % 4 above it, minus
    // 32; value e: the 2 bits of qs as Q2_K's, minus 4 when bit e / 32 of hmask[e % 32] is 0.
    const uint8_t* sc = b + 96;
    const float d = half(b + 108);
    for (int e = 0; e < 256; ++e) {
      const int j = e / 16;
      const int ls = (j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4) | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
      const int lo = (b[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const int q = lo - (((b[e % 32] >> (e / 32)) & 1) ? 0 : 4);
      out[e] = (d * float(ls - 32)) * float(q);
    }
    return;
  }
  static const float kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  if (f == DType::kIQ4_XS) {
    // gguf-py: d | scales_h (u16) | scales_l (4 bytes) | qs; sub-block ib's scale is the low
    // nibble ib % 2 of scales_l[ib / 2] with bits 2ib..2ib+1 of scales_h above it, minus 32;
    // its 32 indices are qs[16 ib + j] (element j: low nibble, j + 16: high);
    // (d * (scale - 32)) * kvalues[index].
    const float d = half(b);
    const int scales_h = b[2] | b[3] << 8;
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * float(ls - 32);
      for (int j = 0; j < 16; ++j) {
        out[32 * ib + j] = dl * kValues[b[8 + 16 * ib + j] & 0xF];
        out[32 * ib + j + 16] = dl * kValues[b[8 + 16 * ib + j] >> 4];
      }
    }
    return;
  }
  if (f == DType::kIQ4_NL) {
    // gguf-py: d, then qs whose byte i holds the indices of elements i (low nibble) and
    // i + 16 (high) into ggml's kvalues_iq4nl; d * kvalues[index].
    const float d = half(b);
    for (int j = 0; j < 16; ++j) {
      out[j] = d * kValues[b[2 + j] & 0xF];
      out[j + 16] = d * kValues[b[2 + j] >> 4];
    }
    return;
  }
  if (f == DType::kQ5_0 || f == DType::kQ5_1) {
    // gguf-py: qh a little-endian uint32 whose bit j is bit 4 of element j; qs byte i holds
    // elements i (low nibble) and i + 16 (high); Q5_0 d * (q - 16) as int8, Q5_1 d * q + m.
    const bool q51 = f == DType::kQ5_1;
    const float d = half(b), m = q51 ? half(b + 2) : 0.0f;
    const uint8_t* h = b + (q51 ? 4 : 2);
    const uint32_t qh = uint32_t(h[0]) | uint32_t(h[1]) << 8 | uint32_t(h[2]) << 16 | uint32_t(h[3]) << 24;
    const uint8_t* qs = h + 4;
    for (int j = 0; j < 32; ++j) {
      const int q = ((qs[j % 16] >> (4 * (j / 16))) & 0xF) | int((qh >> j) & 1) << 4;
      out[j] = q51 ? d * float(q) + m : d * float(int8_t(q) - int8_t(16));
    }
    return;
  }
  if (f == DType::kQ6_K) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = half(b + 208);
    for (int h = 0; h < 2; ++h)          // two halves of 128 values
      for (int l = 0; l < 32; ++l)       // as llama.cpp's dequantize_row_q6_K
        for (int s = 0; s < 4; ++s) {    // the 4 values of qh[l]'s 2-bit fields
          const int e = 128 * h + 32 * s + l;
          const int lo = (ql[64 * h + l + 32 * (s % 2)] >> (4 * (s / 2))) & 0xF;
          const int q = (lo | (((qh[32 * h + l] >> (2 * s)) & 3) << 4)) - 32;
          out[e] = (d * float(sc[e / 16])) * float(q);
        }
    return;
  }
  // Q4_K, Q5_K: 4 chunks of 64 values, low nibbles then high nibbles of 32 bytes.
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* s = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = f == DType::kQ5_K ? b + 48 : b + 16;
  for (int j = 0; j < 8; ++j) {
    const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    const int mn = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    for (int l = 0; l < 32; ++l) {
      int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
      if (f == DType::kQ5_K) q |= ((qh[l] >> j) & 1) << 4;
      out[32 * j + l] = (d * float(sc)) * float(q) - dmin * float(mn);
    }
  }
}

// Random file blocks: random integer bits, and f16 d / dmin / m of both signs between
// 2^-14 and 2^-4 (some zero), which is what files hold.
std::vector<uint8_t> random_blocks(std::mt19937& rng, DType f, int64_t N, int64_t K) {
  const WeightFormatTraits& t = *weight_format(f);
  std::vector<uint8_t> b(size_t(N * (K / t.super_rows) * t.file_block_bytes));
  std::uniform_int_distribution<int> byte(0, 255), ex(-14, -4), coin(0, 15);
  for (auto& v : b) v = uint8_t(byte(rng));
  auto put_half = [&](uint8_t* p) {
    const float v = coin(rng) == 0 ? 0.0f : std::ldexp(1.0f + coin(rng) / 16.0f, ex(rng)) * (coin(rng) < 8 ? 1 : -1);
    const uint16_t h = f32_to_f16(v);
    std::memcpy(p, &h, 2);
  };
  for (size_t off = 0; off < b.size(); off += size_t(t.file_block_bytes)) {
    uint8_t* blk = b.data() + off;
    if (f == DType::kQ6_K) {
      put_half(blk + 208);
    } else if (f == DType::kQ2_K) {
      put_half(blk + 80);
      put_half(blk + 82);
    } else if (f == DType::kQ3_K) {
      put_half(blk + 108);
    } else if (f == DType::kQ5_0 || f == DType::kIQ4_NL || f == DType::kIQ4_XS) {
      put_half(blk);
    } else {
      put_half(blk);
      put_half(blk + 2);
    }
  }
  return b;
}

struct BlockWeight {
  DType f;
  int64_t N, K, nb;
  std::vector<uint8_t> file, packed;
  std::vector<float> w;  // [N, K] dequantized by file_dequant
  PackedLayout layout;
};

BlockWeight make_weight(std::mt19937& rng, DType f, int64_t N, int64_t K, int64_t nb) {
  const WeightFormatTraits& t = *weight_format(f);
  BlockWeight bw{f, N, K, nb, random_blocks(rng, f, N, K), {}, std::vector<float>(size_t(N * K)), {}};
  const int64_t fb = t.file_block_bytes, per_row = K / t.super_rows * fb;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t r = 0; r < K / t.super_rows; ++r)
      file_dequant(f, bw.file.data() + n * per_row + r * fb, bw.w.data() + n * K + r * t.super_rows);
  bw.layout = make_block_layout(f, N, K, nb, 0);
  EXPECT_GT(bw.layout.bytes, 0);
  bw.packed.assign(size_t(bw.layout.bytes) + 1, 0xEE);  // one guard byte past the end
  char err[256] = "";
  EXPECT_EQ(pack_gguf_blocks(f, bw.file.data(), per_row, N, K, nb, bw.packed.data(), err, sizeof err), Status::kOk) << err;
  EXPECT_EQ(bw.packed.back(), 0xEE) << "pack_gguf_blocks wrote past block_packed_bytes";
  return bw;
}

TEST(BlockQuantLayout, KeepsTheFilesBytesPerWeight) {
  for (DType f : kFormats) {
    const WeightFormatTraits& t = *weight_format(f);
    EXPECT_EQ(t.record_bytes, t.file_block_bytes) << t.name;
    const int64_t N = 64, K = 4 * t.super_rows;
    EXPECT_EQ(block_packed_bytes(f, N, K, 64), N * K / t.super_rows * t.file_block_bytes) << t.name;
    EXPECT_EQ(block_packed_bytes(f, N, K + t.super_rows / 2, 64), -1) << t.name << ": K not whole blocks";
  }
}

TEST(BlockQuantLayout, PackMatchesTheFileBitForBit) {
  std::mt19937 rng(5);
  for (DType f : kFormats)
    for (int64_t nb : {16, 17, 64})
      for (int64_t N : {1, 33, 70}) {
        const int64_t K = 2 * weight_format(f)->super_rows;
        const BlockWeight bw = make_weight(rng, f, N, K, nb);
        std::vector<float> got(size_t(N * K), -1.0f);
        char err[256] = "";
        ASSERT_EQ(dequantize_packed(bw.packed.data(), bw.layout, got.data(), K, err, sizeof err), Status::kOk) << err;
        ASSERT_EQ(0, std::memcmp(got.data(), bw.w.data(), got.size() * sizeof(float)))
            << weight_format(f)->name << " N=" << N << " nb=" << nb;
      }
}

TEST(BlockQuantLayout, RejectsLayoutsThatDoNotFit) {
  std::mt19937 rng(6);
  const BlockWeight bw = make_weight(rng, DType::kQ4_K, 20, 512, 16);
  char err[256] = "";
  EXPECT_EQ(validate_layout(bw.layout, 20, 512, 16, err, sizeof err), Status::kOk) << err;
  for (int field = 0; field < 4; ++field) {
    PackedLayout l = bw.layout;
    if (field == 0) l.group_size = 32;
    if (field == 1) l.bytes -= 1;
    if (field == 2) l.zero_points = 1;
    if (field == 3) l.scale_dtype = int32_t(DType::kBF16);
    EXPECT_EQ(validate_layout(l, 20, 512, 16, err, sizeof err), Status::kLayoutMismatch) << "field " << field;
    EXPECT_NE(std::string(err).find("q4_k"), std::string::npos) << err;
  }
  PackedLayout l = bw.layout;
  l.dtype = 42;
  EXPECT_EQ(validate_layout(l, 20, 512, 16), Status::kLayoutMismatch);
  // The C ABI: a K that is not whole super-blocks, a non-block format, a short buffer.
  rvv_packed_layout out{};
  EXPECT_EQ(rvv_block_layout(RVV_DTYPE_Q6_K, 8, 300, 16, &out), RVV_ERR_BAD_SHAPE);
  char msg[256] = "";
  rvv_last_error(msg, sizeof msg);
  EXPECT_NE(std::string(msg).find("multiple of 256"), std::string::npos) << msg;
  EXPECT_EQ(rvv_block_layout(RVV_DTYPE_INT4, 8, 256, 16, &out), RVV_ERR_BAD_DTYPE);
  ASSERT_EQ(rvv_block_layout(RVV_DTYPE_Q4_K, 20, 512, 16, &out), RVV_OK);
  std::vector<uint8_t> buf(size_t(out.bytes));
  EXPECT_EQ(rvv_pack_gguf_blocks(bw.file.data(), 2 * 144, &out, buf.data(), out.bytes - 1), RVV_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(rvv_pack_gguf_blocks(bw.file.data(), 2 * 144 - 1, &out, buf.data(), out.bytes), RVV_ERR_BAD_SHAPE);
  ASSERT_EQ(rvv_pack_gguf_blocks(bw.file.data(), 2 * 144, &out, buf.data(), out.bytes), RVV_OK);
  EXPECT_EQ(0, std::memcmp(buf.data(), bw.packed.data(), buf.size()));
  // The int8/int4 entry points refuse a block format instead of misreading it.
  std::vector<int8_t> values(20 * 512);
  std::vector<uint16_t> scales(20 * 16);
  EXPECT_EQ(rvv_unpack_quantized(buf.data(), &out, values.data(), scales.data(), nullptr), RVV_ERR_LAYOUT_MISMATCH);
}

TEST(BlockQuantLayout, FormatInfoThroughTheCAbi) {
  EXPECT_EQ(rvv_abi_sizeof(RVV_ABI_WEIGHT_FORMAT), sizeof(rvv_weight_format));
  rvv_weight_format info{};
  ASSERT_EQ(rvv_weight_format_info(RVV_DTYPE_Q6_K, &info), RVV_OK);
  EXPECT_EQ(info.version, RVV_WEIGHT_FORMAT_VERSION);
  EXPECT_STREQ(info.name, "q6_k");
  EXPECT_STREQ(info.gguf_type, "Q6_K");
  EXPECT_EQ(info.bits, 6);
  EXPECT_EQ(info.block_rows, 16);
  EXPECT_EQ(info.super_rows, 256);
  EXPECT_EQ(info.file_block_bytes, 210);  // ggml's block_q6_K: 128 + 64 + 16 + 2
  ASSERT_EQ(rvv_weight_format_info(RVV_DTYPE_INT4, &info), RVV_OK);
  EXPECT_EQ(info.configurable, 1);
  EXPECT_EQ(info.implicit_zero, 8);
  EXPECT_EQ(rvv_weight_format_info(RVV_DTYPE_F32, &info), RVV_ERR_BAD_DTYPE);
  EXPECT_EQ(rvv_weight_format_info(RVV_DTYPE_INT4, nullptr), RVV_ERR_NULL_POINTER);
}

// FP64 reference on the file's values. abs_sum bounds what the kernels add in fp32: per
// sub-block s * sum(x q) and o * sum(x), so |x| (|q s| + |o|) per weight.
RefMatrix block_reference(const BlockWeight& bw, const std::vector<uint16_t>& x, int64_t M, const void* bias) {
  const WeightFormatTraits& t = *weight_format(bw.f);
  RefMatrix r;
  r.value.assign(size_t(M * bw.N), 0.0);
  r.abs_sum.assign(size_t(M * bw.N), 0.0);
  r.terms = bw.K + 2 * (bw.K / t.block_rows) + 2;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < bw.N; ++n) {
      const double b = bias_value(bias, DType::kBF16, n);
      double s = b, a = std::fabs(b);
      for (int64_t k = 0; k < bw.K; ++k) {
        const double xv = bf16_value(x[size_t(m * bw.K + k)]), w = bw.w[size_t(n * bw.K + k)];
        s += xv * w;
        const BlockElementRef e = block_element_ref(bw.packed.data(), bw.layout, n, k);
        const BlockParams p = block_params(bw.f, e.rec, bw.nb, e.c, e.row);
        a += std::fabs(xv) * (std::fabs(double(p.scale)) * 63.0 + std::fabs(double(p.offset)) + std::fabs(w));
      }
      r.value[size_t(m * bw.N + n)] = s;
      r.abs_sum[size_t(m * bw.N + n)] = a;
    }
  return r;
}

TEST(BlockQuantKernels, MatchFp64ReferenceOnTheFilesValues) {
  std::mt19937 rng(2026);
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  const int64_t pref = preferred_nb(hw);
  int ran = 0;
  for (DType f : kFormats) {
    const int64_t S = weight_format(f)->super_rows;
    for (KernelKind kind : {KernelKind::kGemv, KernelKind::kGemm})
      for (const Variant& var : variants_for(f, kind))
        for (int64_t N : {1, 40, 77, 130})
          for (int64_t nb : {pref, int64_t(17)}) {
            const int64_t K = N % 2 ? S : 3 * S;
            const BlockWeight bw = make_weight(rng, f, N, K, nb);
            for (int64_t M : kind == KernelKind::kGemv ? std::vector<int64_t>{1} : std::vector<int64_t>{2, 5}) {
              const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
              const std::vector<uint16_t> bias = random_bf16_vector(rng, size_t(N));
              const bool with_bias = (N + M) % 2 == 0;
              const DType y_dtype = M == 2 ? DType::kBF16 : DType::kF32;
              std::vector<float> y(size_t(M * N), -7.0f);
              LinearProblem p{};
              p.M = M, p.N = N, p.K = K, p.x = x.data(), p.ldx = K;
              p.weight_layout = WeightLayout::kPacked, p.w = bw.packed.data(), p.layout = &bw.layout;
              p.bias = with_bias ? bias.data() : nullptr, p.bias_dtype = DType::kBF16;
              p.y = y.data(), p.ldy = N, p.y_dtype = y_dtype, p.block_end = -1;
              char err[256] = "";
              KernelPath used;
              ASSERT_EQ(linear_bf16(p, var.cpu, &used, err, sizeof err), Status::kOk) << err;
              const RefMatrix ref = block_reference(bw, x, M, p.bias);
              EXPECT_TRUE(check_output(ref, y.data(), y_dtype, N, M, N, 0, N))
                  << var.name << " " << weight_format(f)->name << " N=" << N << " K=" << K << " nb=" << nb << " M=" << M;
              ++ran;
            }
          }
  }
  EXPECT_GT(ran, 0);
}

// An Inf activation gives what IEEE arithmetic on the file's values gives (the vector
// kernels' offset term would turn it into Inf - Inf): the row takes the scalar reference.
TEST(BlockQuantKernels, NonFiniteActivationsFollowIeee) {
  std::mt19937 rng(9);
  for (DType f : kFormats) {
    const int64_t N = 24, K = weight_format(f)->super_rows;
    const BlockWeight bw = make_weight(rng, f, N, K, 16);
    std::vector<uint16_t> x = random_bf16_vector(rng, size_t(K));
    x[3] = 0x7F80;  // +Inf
    for (const Variant& var : variants_for(f)) {
      std::vector<float> y(size_t(N), -7.0f);
      LinearProblem p{};
      p.M = 1, p.N = N, p.K = K, p.x = x.data(), p.ldx = K;
      p.weight_layout = WeightLayout::kPacked, p.w = bw.packed.data(), p.layout = &bw.layout;
      p.y = y.data(), p.ldy = N, p.y_dtype = DType::kF32, p.block_end = -1;
      ASSERT_EQ(linear_bf16(p, var.cpu), Status::kOk);
      const RefMatrix ref = block_reference(bw, x, 1, nullptr);
      EXPECT_TRUE(check_output(ref, y.data(), DType::kF32, N, 1, N, 0, N)) << var.name << " " << weight_format(f)->name;
    }
  }
}

// The INT8-activation GEMM on the block formats: FP64 Y on x_q * dx (quantized by
// quantcase::quantize_row, from the definition) and the file's weights. abs_sum: what the
// kernel rounds in fp32, per sub-block s * dx * isum and o' * dx * sum x_q (o' = o + c s).
RefMatrix block_x8_reference(const BlockWeight& bw, const std::vector<uint16_t>& x, int64_t M, const void* bias) {
  const WeightFormatTraits& t = *weight_format(bw.f);
  const int64_t R = t.block_rows, c = int64_t(1) << (t.bits - 1);
  RefMatrix r;
  r.value.assign(size_t(M * bw.N), 0.0);
  r.abs_sum.assign(size_t(M * bw.N), 0.0);
  r.terms = 3 * (bw.K / R) + 2;
  for (int64_t m = 0; m < M; ++m) {
    const quantcase::QuantRow qr = quantcase::quantize_row(x.data() + m * bw.K, bw.K);
    for (int64_t n = 0; n < bw.N; ++n) {
      const double b = bias_value(bias, DType::kBF16, n);
      double s = b, a = std::fabs(b);
      for (int64_t k0 = 0; k0 < bw.K; k0 += R) {
        const BlockElementRef e = block_element_ref(bw.packed.data(), bw.layout, n, k0);
        const BlockParams p = block_params(bw.f, e.rec, bw.nb, e.c, e.row);
        // |s q'| <= c |s|, |o'| <= |o| + c |s|: per element at most what the two terms hold.
        const double bound = 2.0 * double(c) * std::fabs(double(p.scale)) + std::fabs(double(p.offset));
        for (int64_t k = k0; k < k0 + R; ++k) {
          const double xv = double(qr.q[size_t(k)]) * qr.dx[size_t(k / 32)];
          s += xv * bw.w[size_t(n * bw.K + k)];
          a += std::fabs(xv) * bound;
        }
      }
      r.value[size_t(m * bw.N + n)] = s;
      r.abs_sum[size_t(m * bw.N + n)] = a;
    }
  }
  return r;
}

std::vector<Variant> x8_block_variants(DType f) {
  std::vector<Variant> v = variants_for(f, KernelKind::kGemmX8);
#if defined(__riscv)
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  if (hw.has_v) EXPECT_GE(v.size(), 2u) << weight_format(f)->name << ": an RVV CPU lists the INT8-activation GEMM";
#endif
  return v;
}

LinearProblem block_problem(const BlockWeight& bw, const std::vector<uint16_t>& x, int64_t M, std::vector<float>& y) {
  LinearProblem p{};
  p.M = M, p.N = bw.N, p.K = bw.K, p.x = x.data(), p.ldx = bw.K;
  p.weight_layout = WeightLayout::kPacked, p.w = bw.packed.data(), p.layout = &bw.layout;
  p.y = y.data(), p.ldy = bw.N, p.y_dtype = DType::kF32, p.block_end = -1, p.x_int8 = kX8Gemm;
  return p;
}

TEST(BlockQuantX8, KernelsMatchTheReferenceBitForBitAndFp64) {
  std::mt19937 rng(77);
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  int compared = 0, cases = 0;
  for (DType f : kFormats)
    for (int64_t M : {2, 3, 5, 9})
      for (int64_t nb : {preferred_nb(hw), int64_t(17)}) {
        const int64_t S = weight_format(f)->super_rows, N = M == 9 ? 77 : 40, K = M % 2 ? S : 2 * S;
        const BlockWeight bw = make_weight(rng, f, N, K, nb);
        std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
        x[size_t(K / 3)] = f32_to_bf16(-40.0f);  // an outlier: a coarse step for its block
        const std::vector<uint16_t> bias = random_bf16_vector(rng, size_t(N));
        const bool with_bias = M != 3;
        const RefMatrix ref = block_x8_reference(bw, x, M, with_bias ? bias.data() : nullptr);
        const std::string what = std::string(weight_format(f)->name) + " M=" + std::to_string(M) + " N=" +
                                 std::to_string(N) + " K=" + std::to_string(K) + " nb=" + std::to_string(nb);
        std::vector<float> want;
        ++cases;
        for (const Variant& var : x8_block_variants(f)) {
          std::vector<float> y(size_t(M * N), -7.0f);
          LinearProblem p = block_problem(bw, x, M, y);
          if (with_bias) p.bias = bias.data(), p.bias_dtype = DType::kBF16;
          char err[256] = "";
          ASSERT_EQ(linear_bf16(p, var.cpu, nullptr, err, sizeof err), Status::kOk) << var.name << " " << what << err;
          const char* name = selected_kernel_name(p, var.cpu);
          ASSERT_NE(name, nullptr);
          EXPECT_NE(std::string(name).find("gemm_x8"), std::string::npos) << name << " " << what;
          EXPECT_TRUE(check_output(ref, y.data(), DType::kF32, N, M, N, 0, N)) << var.name << " " << what;
          if (want.empty()) {
            want = y;  // the scalar reference
          } else {
            ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float))) << var.name << " " << what;
            ++compared;
          }
        }
      }
#if defined(__riscv)
  if (hw.has_v) EXPECT_GE(compared, cases);
#endif
}

// Inf or NaN in a row: the whole call takes the fp path, bit for bit the call without
// x_int8. M == 1 never takes it.
TEST(BlockQuantX8, NonFiniteRowsAndGemvTakeTheFpPath) {
  std::mt19937 rng(78);
  for (DType f : kFormats) {
    const int64_t N = 33, K = weight_format(f)->super_rows;
    const BlockWeight bw = make_weight(rng, f, N, K, 16);
    std::vector<uint16_t> x = random_bf16_vector(rng, size_t(3 * K));
    x[size_t(K + 7)] = f32_to_bf16(f == DType::kQ6_K ? NAN : INFINITY);
    for (const Variant& var : x8_block_variants(f)) {
      std::vector<float> y8(size_t(3 * N)), yf(size_t(3 * N));
      LinearProblem p = block_problem(bw, x, 3, y8);
      ASSERT_EQ(linear_bf16(p, var.cpu), Status::kOk);
      p.y = yf.data(), p.x_int8 = 0;
      ASSERT_EQ(linear_bf16(p, var.cpu), Status::kOk);
      EXPECT_EQ(0, std::memcmp(y8.data(), yf.data(), y8.size() * sizeof(float))) << var.name << " " << weight_format(f)->name;
      p.M = 1, p.x_int8 = kX8Gemm;
      EXPECT_EQ(std::string(selected_kernel_name(p, var.cpu)).find("x8"), std::string::npos) << var.name;
    }
  }
}

#if defined(__riscv)
// The kernel entry points' operands over all of bw's columns, f32 output (y set by the caller).
LinearOperands whole_operands(const BlockWeight& bw, const std::vector<uint16_t>& x, int64_t M) {
  LinearOperands a{};
  a.M = M, a.N = bw.N, a.K = bw.K, a.x = x.data(), a.ldx = bw.K;
  a.weight_layout = WeightLayout::kPacked, a.w = bw.packed.data(), a.layout = &bw.layout, a.nb = bw.nb;
  a.ldy = bw.N, a.y_dtype = DType::kF32, a.block_begin = 0, a.block_end = bw.layout.num_blocks;
  return a;
}

// The GEMM's K blocks hold whole sub-blocks; blocked and unblocked runs agree bit for bit,
// and a K block that splits a sub-block is refused.
TEST(BlockQuantKernels, GemmBlockingIsExact) {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  if (!hw.has_v) GTEST_SKIP() << "no V extension: the RVV GEMM cannot run here (the scalar path is tested above)";
  std::mt19937 rng(12);
  for (DType f : kFormats) {
    const int64_t sub = weight_format(f)->block_rows, N = 50, K = 2 * weight_format(f)->super_rows, M = 9, nb = 16;
    const BlockWeight bw = make_weight(rng, f, N, K, nb);
    const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
    LinearOperands a = whole_operands(bw, x, M);
    std::vector<float> unblocked(size_t(M * N));
    a.y = unblocked.data();
    ASSERT_EQ(quant_gemm_entry_rvv(a, M, K, bw.layout.num_blocks), Status::kOk);
    ASSERT_TRUE(check_output(block_reference(bw, x, M, nullptr), unblocked.data(), DType::kF32, N, M, N, 0, N));
    for (int64_t kc : {sub, 3 * sub, 8 * sub + 0 * sub}) {
      std::vector<float> y(size_t(M * N), -7.0f);
      a.y = y.data();
      ASSERT_EQ(quant_gemm_entry_rvv(a, 4, kc, 2), Status::kOk) << weight_format(f)->name << " kc=" << kc;
      EXPECT_EQ(0, std::memcmp(y.data(), unblocked.data(), y.size() * sizeof(float)))
          << weight_format(f)->name << " kc=" << kc;
    }
    EXPECT_EQ(quant_gemm_entry_rvv(a, 4, sub + 2, 1), Status::kBadShape) << weight_format(f)->name;
  }
}

// Forced small blocks (rows, K, columns) give the default blocking's bits.
TEST(BlockQuantX8, BlockingIsExactAtEveryBoundary) {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  if (!hw.has_v) GTEST_SKIP() << "no V extension: the RVV GEMM cannot run here (the scalar path is tested above)";
  std::mt19937 rng(79);
  for (DType f : kFormats) {
    const int64_t N = 50, K = 2 * weight_format(f)->super_rows, nb = 16;
    const BlockWeight bw = make_weight(rng, f, N, K, nb);
    for (int64_t M : {2, 7, 13}) {
      const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
      LinearOperands a = whole_operands(bw, x, M);
      a.x_int8 = kX8Gemm;
      std::vector<float> whole(size_t(M * N), -7.0f);
      a.y = whole.data();
      ASSERT_EQ(quant_x8_gemm_entry_rvv(a, M, K, bw.layout.num_blocks), Status::kOk);
      ASSERT_TRUE(check_output(block_x8_reference(bw, x, M, nullptr), whole.data(), DType::kF32, N, M, N, 0, N));
      int64_t mc0, kc0, ncb0, step, mr, vlmax;
      quant_x8_default_blocking_rvv(a, &mc0, &kc0, &ncb0, &step, &mr, &vlmax);
      EXPECT_EQ(step, 32);
      for (int64_t mc : {mr, M})
        for (int64_t kc : {step, 3 * step, K})
          for (int64_t ncb : {int64_t(1), int64_t(3)}) {
            std::vector<float> y(size_t(M * N), -7.0f);
            a.y = y.data();
            const std::string what = std::string(weight_format(f)->name) + " M=" + std::to_string(M) +
                                     " mc=" + std::to_string(mc) + " kc=" + std::to_string(kc) + " ncb=" + std::to_string(ncb);
            ASSERT_EQ(quant_x8_gemm_entry_rvv(a, mc, kc, ncb), Status::kOk) << what;
            ASSERT_EQ(0, std::memcmp(y.data(), whole.data(), y.size() * sizeof(float))) << what;
          }
      EXPECT_EQ(quant_x8_gemm_entry_rvv(a, mr, step + 16, 1), Status::kBadShape) << weight_format(f)->name;
    }
  }
}

// The entry Inductor's generated code calls (rvv/inductor_quant_linear.h: an exported
// GGUF package's kernels) gives the dispatcher's bits for the same packed weight, kernel
// and options at every thread count, and refuses a layout that is not the format's.
TEST(BlockQuantInductor, GeneratedCodeEntryEqualsTheDispatcher) {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  if (!hw.has_v) GTEST_SKIP() << "no V extension: the generated code's kernels cannot run here";
  const rvv_cpu_features rvv = features_for_path(KernelPath::kRvv, hw.vlenb);
  std::mt19937 rng(80);
  for (DType f : kFormats)
    for (int64_t nb : {int64_t(16), int64_t(17)}) {
      const WeightFormatTraits& t = *weight_format(f);
      const int64_t N = 45, K = 2 * t.super_rows;
      const BlockWeight bw = make_weight(rng, f, N, K, nb);
      const std::vector<uint16_t> bias = random_bf16_vector(rng, size_t(N));
      const int32_t code = int32_t(f), g = int32_t(t.super_rows), f16 = int32_t(DType::kF16);
      for (int kernel : {int(kEntryQuantGemv), int(kEntryQuantGemm), int(kEntryQuantGemmX8)}) {
        const int64_t M = kernel == kEntryQuantGemv ? 1 : kernel == kEntryQuantGemm ? 5 : 6;
        const std::vector<uint16_t> x = random_bf16_vector(rng, size_t(M * K));
        std::vector<uint16_t> want(size_t(M * N));
        LinearProblem p{};
        p.M = M, p.N = N, p.K = K, p.x = x.data(), p.ldx = K;
        p.weight_layout = WeightLayout::kPacked, p.w = bw.packed.data(), p.layout = &bw.layout, p.nb = nb;
        p.bias = bias.data(), p.bias_dtype = DType::kBF16;
        p.y = want.data(), p.ldy = N, p.y_dtype = DType::kBF16, p.block_end = -1;
        p.x_int8 = kernel == kEntryQuantGemmX8 ? kX8Gemm : 0;
        ASSERT_EQ(linear_bf16(p, rvv), Status::kOk);
        const std::string what = std::string(t.name) + " nb=" + std::to_string(nb) + " kernel=" + std::to_string(kernel);
        for (int threads : {1, 3}) {
          std::vector<uint16_t> y(size_t(M * N), 0xFFFF);
          char err[256] = "";
          ASSERT_EQ(inductor_quant_entry_rvv(code, kernel, x.data(), K, M, N, K, bw.packed.data(), g, f16, 0, nb,
                                             bw.layout.bytes, bias.data(), y.data(), N, threads, err, sizeof err),
                    Status::kOk)
              << what << ": " << err;
          EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(uint16_t))) << what << " threads=" << threads;
        }
        std::vector<uint16_t> y(size_t(M * N));
        char err[256] = "";
        EXPECT_EQ(inductor_quant_entry_rvv(code, kernel, x.data(), K, M, N, K, bw.packed.data(), 32 * (g == 32 ? 2 : 1),
                                           f16, 0, nb, bw.layout.bytes, nullptr, y.data(), N, 1, err, sizeof err),
                  Status::kLayoutMismatch)
            << what << ": a group size other than the super-block";
        EXPECT_EQ(inductor_quant_entry_rvv(code, kernel, x.data(), K, M, N, K, bw.packed.data(), g, f16, 0, nb,
                                           bw.layout.bytes - 1, nullptr, y.data(), N, 1, err, sizeof err),
                  Status::kLayoutMismatch)
            << what << ": a packed size other than the layout's";
        EXPECT_EQ(inductor_quant_entry_rvv(code, kernel == kEntryQuantGemv ? kEntryQuantGemm : kEntryQuantGemv, x.data(), K, M, N, K,
                                           bw.packed.data(), g, f16, 0, nb, bw.layout.bytes, nullptr, y.data(), N, 1, err,
                                           sizeof err),
                  Status::kBadShape)
            << what << ": M that is not the kernel's";
      }
    }
}
#endif

}  // namespace
