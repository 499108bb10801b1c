// Portable scalar kernels with the same arguments as the RVV ones: the fallback on CPUs
// without V (and on x86 hosts). Accumulates in fp32 in increasing k, starting from the
// bias, with bf16 products exact in fp32, so it obeys the same error bound as the vector
// kernels (whose summation order differs).
#pragma once
#include <cstddef>
#include <cstdint>

#include "rvv_inductor/bf16.h"
#include "rvv_inductor/config.h"
#include "rvv_inductor/quant_packing.h"
#include "rvv_inductor/scratch.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace ref {

inline float load_bias(const void* bias, DType dt, int64_t n) {
  if (!bias) return 0.0f;
  return dt == DType::kBF16 ? bf16_to_f32(static_cast<const uint16_t*>(bias)[n]) : static_cast<const float*>(bias)[n];
}

inline void store_out(void* y, DType dt, int64_t off, float v) {
  if (dt == DType::kBF16)
    static_cast<uint16_t*>(y)[off] = f32_to_bf16(v);
  else
    static_cast<float*>(y)[off] = v;
}

// Any M; walks each block row by row so that, as in the vector kernels, the weight is
// read sequentially. Columns are accumulated in a small local array per block chunk.
inline Status linear_bf16_packed_ref(const LinearOperands& a) {
  constexpr int64_t kChunk = 64;
  F32Scratch<1024> scratch;
  float* xf = scratch.get(a.scratch, a.K);
  if (!xf) return Status::kNoMemory;
  const size_t ysize = a.y_dtype == DType::kBF16 ? sizeof(uint16_t) : sizeof(float);
  for (int64_t m = 0; m < a.M; ++m) {
    for (int64_t k = 0; k < a.K; ++k) xf[k] = bf16_to_f32(a.x[m * a.ldx + k]);
    void* y = static_cast<char*>(a.y) + size_t(m * a.ldy) * ysize;
    for (int64_t b = a.block_begin; b < a.block_end; ++b) {
      const int64_t n0 = b * a.nb;
      const int64_t cols = a.N - n0 < a.nb ? a.N - n0 : a.nb;
      const uint16_t* wb = static_cast<const uint16_t*>(a.w) + b * a.K * a.nb;
      for (int64_t j0 = 0; j0 < cols; j0 += kChunk) {
        const int64_t cn = cols - j0 < kChunk ? cols - j0 : kChunk;
        float acc[kChunk];
        for (int64_t j = 0; j < cn; ++j) acc[j] = load_bias(a.bias, a.bias_dtype, n0 + j0 + j);
        for (int64_t k = 0; k < a.K; ++k) {
          const uint16_t* row = wb + k * a.nb + j0;
          for (int64_t j = 0; j < cn; ++j) acc[j] += xf[k] * bf16_to_f32(row[j]);
        }
        for (int64_t j = 0; j < cn; ++j) store_out(y, a.y_dtype, n0 + j0 + j, acc[j]);
      }
    }
  }
  return Status::kOk;
}

// Packed INT8 / INT4 weights (quant_packing.h), any M: each dequantized weight (q - z) * s
// is exact in fp32, then accumulated like the BF16 reference, walking every block record
// front to back.
inline Status linear_quant_packed_ref(const LinearOperands& a) {
  constexpr int64_t kChunk = 64;
  const PackedLayout& l = *a.layout;
  const QuantSpec q = quant_spec_of(l);
  const int64_t K = a.K, nb = a.nb, gr = quant_group_rows(q, K), G = quant_num_groups(q, K);
  const int64_t block_bytes = quant_block_bytes(q, K, nb), full = quant_group_bytes(q, nb, gr);
  const int64_t zoff = quant_zeros_offset(nb), doff = quant_data_offset(q, nb);
  F32Scratch<1024> scratch;
  float* xf = scratch.get(a.scratch, K);
  if (!xf) return Status::kNoMemory;
  const size_t ysize = a.y_dtype == DType::kBF16 ? sizeof(uint16_t) : sizeof(float);
  for (int64_t m = 0; m < a.M; ++m) {
    for (int64_t k = 0; k < K; ++k) xf[k] = bf16_to_f32(a.x[m * a.ldx + k]);
    void* y = static_cast<char*>(a.y) + size_t(m * a.ldy) * ysize;
    for (int64_t b = a.block_begin; b < a.block_end; ++b) {
      const int64_t n0 = b * nb, cols = a.N - n0 < nb ? a.N - n0 : nb;
      const uint8_t* blk = static_cast<const uint8_t*>(a.w) + b * block_bytes;
      for (int64_t j0 = 0; j0 < cols; j0 += kChunk) {
        const int64_t cn = cols - j0 < kChunk ? cols - j0 : kChunk;
        float acc[kChunk];
        for (int64_t j = 0; j < cn; ++j) acc[j] = load_bias(a.bias, a.bias_dtype, n0 + j0 + j);
        for (int64_t g = 0; g < G; ++g) {
          const uint8_t* rec = blk + g * full;
          const int64_t k0 = g * gr, rows = K - k0 < gr ? K - k0 : gr;
          float sc[kChunk], z[kChunk];
          for (int64_t j = 0; j < cn; ++j) {
            uint16_t bits;
            std::memcpy(&bits, rec + 2 * (j0 + j), 2);
            sc[j] = scale_to_f32(bits, q.scale_dtype);
            z[j] = float(q.zero_points ? rec[zoff + j0 + j] : implicit_zero(q.format));
          }
          for (int64_t r = 0; r < rows; ++r) {
            const float xv = xf[k0 + r];
            for (int64_t j = 0; j < cn; ++j) {
              int32_t v;
              if (q.format == DType::kInt8)
                v = int8_t(rec[doff + r * nb + j0 + j]);
              else
                v = (rec[doff + (r / 2) * nb + j0 + j] >> (4 * (r % 2))) & 0xF;
              acc[j] += xv * ((float(v) - z[j]) * sc[j]);
            }
          }
        }
        for (int64_t j = 0; j < cn; ++j) store_out(y, a.y_dtype, n0 + j0 + j, acc[j]);
      }
    }
  }
  return Status::kOk;
}

// Packed GGUF block formats (block_quant.h), any M: each weight dequantized as the file's
// reference does (exact products, one rounding), accumulated in fp32 in K order.
inline Status linear_block_quant_ref(const LinearOperands& a) {
  const PackedLayout& l = *a.layout;
  const DType f = DType(l.dtype);
  const int64_t K = a.K, nb = a.nb, S = weight_format(f)->super_rows, sub = weight_format(f)->block_rows;
  const int64_t rec_bytes = block_record_bytes(f, nb), blk_bytes = (K / S) * rec_bytes;
  F32Scratch<1024> scratch;
  float* xf = scratch.get(a.scratch, K);
  if (!xf) return Status::kNoMemory;
  const size_t ysize = a.y_dtype == DType::kBF16 ? sizeof(uint16_t) : sizeof(float);
  for (int64_t m = 0; m < a.M; ++m) {
    for (int64_t k = 0; k < K; ++k) xf[k] = bf16_to_f32(a.x[m * a.ldx + k]);
    void* y = static_cast<char*>(a.y) + size_t(m * a.ldy) * ysize;
    for (int64_t b = a.block_begin; b < a.block_end; ++b) {
      const int64_t n0 = b * nb, cols = a.N - n0 < nb ? a.N - n0 : nb;
      const uint8_t* blk = static_cast<const uint8_t*>(a.w) + b * blk_bytes;
      for (int64_t c = 0; c < cols; ++c) {
        float acc = load_bias(a.bias, a.bias_dtype, n0 + c);
        for (int64_t r0 = 0; r0 < K; r0 += S) {
          const uint8_t* rec = blk + (r0 / S) * rec_bytes;
          for (int row = 0; row < S; row += int(sub)) {
            const BlockParams p = block_params(f, rec, nb, c, row);
            for (int i = row; i < row + sub; ++i) {
              const int32_t q = block_q(f, rec, nb, c, i);
              const float w = block_weight(f, p, q);
              acc += xf[r0 + i] * w;
            }
          }
        }
        store_out(y, a.y_dtype, n0 + c, acc);
      }
    }
  }
  return Status::kOk;
}

inline Status linear_bf16_rowmajor_ref(const LinearOperands& a) {
  F32Scratch<1024> scratch;
  float* xf = scratch.get(a.scratch, a.K);
  if (!xf) return Status::kNoMemory;
  for (int64_t m = 0; m < a.M; ++m) {
    for (int64_t k = 0; k < a.K; ++k) xf[k] = bf16_to_f32(a.x[m * a.ldx + k]);
    for (int64_t n = a.block_begin; n < a.block_end; ++n) {
      const uint16_t* row = static_cast<const uint16_t*>(a.w) + n * a.ldw;
      float acc = load_bias(a.bias, a.bias_dtype, n);
      for (int64_t k = 0; k < a.K; ++k) acc += xf[k] * bf16_to_f32(row[k]);
      store_out(a.y, a.y_dtype, m * a.ldy + n, acc);
    }
  }
  return Status::kOk;
}

// Scalar counterpart of micro_gemm_bf16f32_rvv (rvv/micro_gemm_bf16.h), same contract.
inline void micro_gemm_bf16f32_ref(const uint16_t* A, const uint16_t* B, float* C, int64_t M, int64_t N, int64_t K,
                                   int64_t lda, int64_t ldb, int64_t ldc, bool accumulate) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float acc = accumulate ? C[m * ldc + n] : 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += bf16_to_f32(A[m * lda + k]) * bf16_to_f32(B[k * ldb + n]);
      C[m * ldc + n] = acc;
    }
}

template <class TA, class TB>
inline void micro_gemm_bf16f32_ref(const TA* A, const TB* B, float* C, int64_t M, int64_t N, int64_t K, int64_t lda,
                                   int64_t ldb, int64_t ldc, bool accumulate) {
  micro_gemm_bf16f32_ref(as_bf16_bits(A), as_bf16_bits(B), C, M, N, K, lda, ldb, ldc, accumulate);
}

}  // namespace ref
RVV_INDUCTOR_END_NAMESPACE
