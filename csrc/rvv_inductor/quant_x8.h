// INT8 activations for the M >= 2 GEMM with INT8/INT4 weights and the GGUF block formats
// (LinearOperands::x_int8 &
// kX8Gemm): what the activations become, when the scheme applies, and its portable scalar
// reference. The RVV kernel (rvv/gemm_quant_x8_packed.h) computes exactly the same
// numbers: same quantized activations, the same integer block sums, the same fp32
// operations in the same order per output, so the two agree bit for bit.
//
// Activations: each row of X is cut along K into blocks of 32 (llama.cpp's Q8_0 blocks).
// Per block dx = max|x| / 127 and x_q = rne(x * (127 / max|x|)) in [-127, 127] (x * inv
// is at most 127 * (1 + 2^-23)^2, which rounds to 127: no clamp is needed). A block whose
// max|x| is below 2^-96 is taken as zero (dx = 0, x_q = 0), which keeps 127 / max|x| and
// dx normal fp32 numbers.
//
// Weights as integers: INT4 q in [0, 15] as q - 8 in [-8, 7] (for stored zero points too;
// the difference z - 8 is applied per group below); INT8 q as stored.
//
// Per output (m, n), starting from the bias, for each weight group g in order, for each
// block b of g in order:
//     isum = sum_{k in b} x_q[m, k] * q'[n, k]           exact integers
//     acc  = fma(s[n, g], dx[m, b] * float(isum), acc)  (the product rounded to fp32 first)
// and with stored zero points, after the group's blocks:
//     acc  = fma(-xs[m, g], s[n, g] * (z[n, g] - 8), acc)
//     xs[m, g] = sum over the group's blocks of fma(dx[m, b], float(sum_{k in b} x_q), .)
// The integer sums are exact: INT4 |x_q * (q - 8)| <= 127 * 8, 32 of them <= 32512, fit
// int16 (the RVV kernel accumulates a block in int16); INT8 |x_q * q| <= 127 * 128, two of
// them fit int16, a block fits int32 (and float(isum) is exact: |isum| < 2^24).
//
// Error against the exact product of the bf16 activations and the dequantized weights:
// |x - x_q * dx| <= dx / 2 per element (+ fp32 rounding of dx), so the activation part is
// at most sum_k |w_k| * dx_block(k) / 2 (2^-96 * sum|w| for zeroed blocks); the fp32 part
// is that of a sum of (number of blocks [+ groups]) terms. Tests check both: the kernel
// against FP64 on the quantized activations (tight) and on the bf16 ones (the bound).
//
// GGUF block formats (block_quant.h): a sub-block of 32 rows (Q2_K, Q3_K, Q6_K: 16) has
// w = s * q + o with q in [0, 2c) stored unsigned, c = 2^(bits - 1) (a lookup format's q is
// a byte: c = 128). As integers
// q' = q - c in [-c, c), so w = s * q' + o' with o' = fma(s, c, o) (Q6_K: o = -32 s, so o'
// is 0 and its term is left out). Per output, for each sub-block in K order (activation
// block b holds one sub-block, or two for Q6_K):
//     isum = sum_{k in the sub-block} x_q[m, k] * q'[n, k]          exact integers
//     acc  = fma(s, dx[m, b] * float(isum), acc)
//     acc  = fma(o', xs[m, b], acc)        xs[m, b] = dx[m, b] * float(sum_{k in b} x_q)
// (a 16-row sub-block with an offset, Q2_K's: the sum over the sub-block's rows only).
// |x_q * q'| <= 127 c, so int16 holds a run of 32 / 16 / 8 rows at 4 / 5 / 6 bits (the
// RVV kernel widens each run into an int32 sub-block sum); |isum| < 2^24, float(isum) is
// exact. The error bound is the INT4/INT8 one above, with the file's weights.
//
// Applies to INT4 and INT8 packed weights whose groups are whole blocks (group size a
// multiple of 32, or 0 for INT8: per channel), and to the block formats. Rows holding Inf
// or NaN cannot be quantized; a call with such a row runs the FP path instead (correct,
// not fast).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include "rvv_inductor/bf16.h"
#include "rvv_inductor/block_quant.h"
#include "rvv_inductor/config.h"
#include "rvv_inductor/quant_packing.h"
#include "rvv_inductor/types.h"

// LinearOperands::x_int8 bits (the C ABI's RVV_LINEAR_X_INT8 / RVV_LINEAR_X_INT8_GEMM).
namespace rvv_inductor {
constexpr int32_t kX8Gemv = 1;  // M == 1, INT4: rvv/gemv_int4_x8_packed.h (16-element blocks)
constexpr int32_t kX8Gemm = 2;  // M >= 2, INT4, INT8 and the block formats: this file
}  // namespace rvv_inductor

RVV_INDUCTOR_BEGIN_NAMESPACE

constexpr int64_t kX8BlockRows = 32;
constexpr float kX8TinyAmax = 0x1p-96f;

// dx and the multiplier of one block from its max|x| (finite, >= 0).
struct X8BlockScale {
  float dx, inv;
};
// Block formats: the centre c of q and the rows of x_q * q' an int16 holds (above).
// (A lookup format's q is a byte, table entry + 128: centre 128.)
constexpr int32_t x8_center(DType f) {
  return weight_format(f)->lookup != RVV_LOOKUP_NONE ? 128 : int32_t(1) << (weight_format(f)->bits - 1);
}
constexpr int x8_int16_rows(DType f) { return int(256 / x8_center(f)); }
constexpr bool x8_has_offset(DType f) {
  return !(weight_format(f)->offset == RVV_OFFSET_ZERO && weight_format(f)->implicit_zero == x8_center(f));
}

inline X8BlockScale x8_block_scale(float amax) {
  if (!(amax >= kX8TinyAmax)) return {0.0f, 0.0f};
  return {amax / 127.0f, 127.0f / amax};
}

// Whether the INT8-activation GEMM computes this packed weight: INT4/INT8 with whole
// 32-element blocks per group.
inline bool x8_gemm_applies(const PackedLayout& l) {
  const DType f = DType(l.dtype);
  if (is_block_format(f)) return true;  // sub-blocks of 32 or 16 rows, K a multiple of 32
  if (f == DType::kInt4) return l.group_size > 0 && l.group_size % kX8BlockRows == 0;
  if (f == DType::kInt8) return l.group_size == 0 || l.group_size % kX8BlockRows == 0;
  return false;
}

// The problem takes the INT8-activation GEMM (vector kernel or this reference).
inline bool x8_gemm_requested(const LinearOperands& a) {
  return (a.x_int8 & kX8Gemm) && a.M >= 2 && a.weight_layout == WeightLayout::kPacked && a.layout &&
         x8_gemm_applies(*a.layout);
}

inline bool bf16_row_finite(const uint16_t* x, int64_t K) {
  for (int64_t k = 0; k < K; ++k)
    if ((x[k] & 0x7F80) == 0x7F80) return false;
  return true;
}

namespace ref {

// One row: x_q (K values, rne), dx (ceil(K / 32)), and per block the integer sum of x_q.
inline void quantize_x8_row(const uint16_t* x, int64_t K, int8_t* xq, float* dx, int32_t* qsum) {
  for (int64_t k0 = 0, b = 0; k0 < K; k0 += kX8BlockRows, ++b) {
    const int64_t n = K - k0 < kX8BlockRows ? K - k0 : kX8BlockRows;
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(bf16_to_f32(x[k0 + i])));
    const X8BlockScale sc = x8_block_scale(amax);
    int32_t s = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int32_t v = int32_t(std::nearbyint(bf16_to_f32(x[k0 + i]) * sc.inv));
      xq[k0 + i] = int8_t(v);
      s += v;
    }
    dx[b] = sc.dx;
    qsum[b] = s;
  }
}

// The rows' quantized activations (xq, dx, qsum: one row at a time) and the outputs of
// the block range: y = out(xq, dx, qsum, packed block, column j, bias), for both schemes.
template <class Out>
inline Status x8_ref_outputs(const LinearOperands& a, int64_t block_bytes, const Out& out) {
  const int64_t K = a.K, nb = a.nb, nblk = (K + kX8BlockRows - 1) / kX8BlockRows;
  std::unique_ptr<int8_t[]> xq(new (std::nothrow) int8_t[size_t(K > 0 ? K : 1)]);
  std::unique_ptr<float[]> dx(new (std::nothrow) float[size_t(nblk > 0 ? nblk : 1)]);
  std::unique_ptr<int32_t[]> qsum(new (std::nothrow) int32_t[size_t(nblk > 0 ? nblk : 1)]);
  if (!xq || !dx || !qsum) return Status::kNoMemory;
  const size_t ysize = a.y_dtype == DType::kBF16 ? sizeof(uint16_t) : sizeof(float);
  for (int64_t m = 0; m < a.M; ++m) {
    quantize_x8_row(a.x + m * a.ldx, K, xq.get(), dx.get(), qsum.get());
    void* y = static_cast<char*>(a.y) + size_t(m * a.ldy) * ysize;
    for (int64_t b = a.block_begin; b < a.block_end; ++b) {
      const int64_t n0 = b * nb, cols = a.N - n0 < nb ? a.N - n0 : nb;
      const uint8_t* blk = static_cast<const uint8_t*>(a.w) + b * block_bytes;
      for (int64_t j = 0; j < cols; ++j) {
        const float bias = a.bias ? (a.bias_dtype == DType::kBF16
                                         ? bf16_to_f32(static_cast<const uint16_t*>(a.bias)[n0 + j])
                                         : static_cast<const float*>(a.bias)[n0 + j])
                                  : 0.0f;
        const float acc = out(xq.get(), dx.get(), qsum.get(), blk, j, bias);
        if (a.y_dtype == DType::kBF16)
          static_cast<uint16_t*>(y)[n0 + j] = f32_to_bf16(acc);
        else
          static_cast<float*>(y)[n0 + j] = acc;
      }
    }
  }
  return Status::kOk;
}

// The INT4/INT8 scheme above, one output at a time. Requires x8_gemm_applies(layout) and
// finite x.
inline Status linear_quant_x8_ref(const LinearOperands& a) {
  const PackedLayout& l = *a.layout;
  const QuantSpec q = quant_spec_of(l);
  const int64_t K = a.K, nb = a.nb, gr = quant_group_rows(q, K), G = quant_num_groups(q, K);
  const int64_t full = quant_group_bytes(q, nb, gr);
  const int64_t zoff = quant_zeros_offset(nb), doff = quant_data_offset(q, nb);
  const bool int4 = q.format == DType::kInt4;
  return x8_ref_outputs(a, quant_block_bytes(q, K, nb), [&](const int8_t* xq, const float* dx, const int32_t* qsum,
                                                            const uint8_t* blk, int64_t j, float acc) {
    for (int64_t g = 0; g < G; ++g) {
      const uint8_t* rec = blk + g * full;
      uint16_t bits;
      std::memcpy(&bits, rec + 2 * j, 2);
      const float s = scale_to_f32(bits, q.scale_dtype);
      const int64_t gk0 = g * gr, gk1 = gk0 + gr < K ? gk0 + gr : K;
      float xs = 0.0f;
      for (int64_t k0 = gk0; k0 < gk1; k0 += kX8BlockRows) {
        const int64_t k1 = k0 + kX8BlockRows < gk1 ? k0 + kX8BlockRows : gk1;
        int32_t isum = 0;
        for (int64_t k = k0; k < k1; ++k) {
          const int64_t r = k - gk0;
          const int32_t w = int4 ? int32_t((rec[doff + (r / 2) * nb + j] >> (4 * (r % 2))) & 0xF) - 8
                                 : int32_t(int8_t(rec[doff + r * nb + j]));
          isum += int32_t(xq[k]) * w;
        }
        const int64_t bi = k0 / kX8BlockRows;
        acc = std::fma(s, dx[bi] * float(isum), acc);
        xs = std::fma(dx[bi], float(qsum[bi]), xs);
      }
      if (int4 && q.zero_points) acc = std::fma(-xs, s * float(int32_t(rec[zoff + j]) - 8), acc);
    }
    return acc;
  });
}

// The block formats' scheme above, one output at a time. Requires finite x.
inline Status linear_block_quant_x8_ref(const LinearOperands& a) {
  const DType f = DType(a.layout->dtype);
  const int64_t K = a.K, nb = a.nb, S = weight_format(f)->super_rows, R = weight_format(f)->block_rows;
  const int64_t rec_bytes = block_record_bytes(f, nb);
  const int32_t c = x8_center(f);
  return x8_ref_outputs(a, (K / S) * rec_bytes, [&](const int8_t* xq, const float* dx, const int32_t* qsum,
                                                    const uint8_t* blk, int64_t j, float acc) {
    for (int64_t k0 = 0; k0 < K; k0 += R) {
      const uint8_t* rec = blk + (k0 / S) * rec_bytes;
      const int row = int(k0 % S);
      const BlockParams p = block_params(f, rec, nb, j, row);
      int32_t isum = 0, xsum = 0;
      for (int i = 0; i < R; ++i) {
        isum += int32_t(xq[k0 + i]) * (block_q(f, rec, nb, j, row + i) - c);
        xsum += xq[k0 + i];
      }
      const int64_t bi = k0 / kX8BlockRows;
      acc = std::fma(p.scale, dx[bi] * float(isum), acc);
      // The offset meets the x_q sum of its sub-block: the activation block's (qsum) when a
      // sub-block is one, else its own rows' (Q2_K's 16).
      const int32_t xs = R < kX8BlockRows ? xsum : qsum[bi];
      if (x8_has_offset(f)) acc = std::fma(std::fma(p.scale, float(c), p.offset), std::fma(dx[bi], float(xs), 0.0f), acc);
    }
    return acc;
  });
}

}  // namespace ref
RVV_INDUCTOR_END_NAMESPACE
