// Packed layout of weight-only quantized weights (INT8, INT4), their reference quantizer
// and dequantizer.
//
// Same panels as BF16 (packing.h): ceil(N/nb) blocks of nb output channels, the last one
// zero-padded, each streamed front to back by one kernel call, so every byte is read once.
// Inside a block, K is cut into groups of G rows (G = group_size; 0 = one group of K rows,
// i.e. one scale per output channel). Each group is one record:
//
//   scales  nb x 16-bit (bf16 or f16, the layout's scale_dtype)
//   zeros   nb x uint8, padded to an even count   (only with zero_points)
//   data    INT8: rows x nb int8, row k of the group at k * nb
//           INT4: ceil(rows/2) x nb bytes; byte j of pair p holds row 2p in its low nibble
//                 and row 2p+1 in its high nibble (an odd last row leaves the high nibble 0)
//   padding to an even size, so the next record's scales stay 2-byte aligned
//
// so the scales a group needs arrive right before its weights, and one unit-stride vector
// load along N feeds a whole block row (INT4: two rows).
//
// Values: INT8  w = q * s          q in [-127, 127] from the quantizer (any int8 accepted)
//         INT4  w = (q - z) * s    q in [0, 15]; z = 8 without zero points (llama.cpp Q4_0),
//                                  else the stored per-group, per-column z in [0, 15]
//                                  (GPTQ/AWQ integer zero points)
// (q - z) * s is exact in fp32, so the dequantized weight is one well-defined number.
// llama.cpp's Q8_0 is INT8 with G = 32 and f16 scales; Q4_0 is INT4 symmetric, G = 32, f16
// scales: pack_quantized takes their q and scales as they are, bit for bit. Q4_1
// (w = q * d + m with a float m) has no integer zero point and is not representable.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "rvv_inductor/bf16.h"
#include "rvv_inductor/block_quant.h"
#include "rvv_inductor/config.h"
#include "rvv_inductor/error.h"
#include "rvv_inductor/packing.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE

// What a quantized weight is: format (kInt8, kInt4), group size (0: per output channel,
// INT8 only), scale dtype (kBF16, kF16), zero points (INT4 only).
struct QuantSpec {
  DType format;
  int32_t group_size;
  DType scale_dtype;
  bool zero_points;
};

constexpr int32_t kMinGroupSize = 16;
constexpr int32_t kMaxGroupSize = 4096;

inline bool is_quantized(DType format) { return format == DType::kInt8 || format == DType::kInt4; }

// Rows per group for a K-row weight.
inline int64_t quant_group_rows(const QuantSpec& q, int64_t K) { return q.group_size > 0 ? q.group_size : K; }
inline int64_t quant_num_groups(const QuantSpec& q, int64_t K) {
  const int64_t g = quant_group_rows(q, K);
  return K > 0 && g > 0 ? (K + g - 1) / g : 0;
}
inline int64_t round_up2(int64_t v) { return (v + 1) & ~int64_t(1); }

// Byte offsets inside a group record (see the file comment).
inline int64_t quant_zeros_offset(int64_t nb) { return 2 * nb; }
inline int64_t quant_data_offset(const QuantSpec& q, int64_t nb) {
  return 2 * nb + (q.zero_points ? round_up2(nb) : 0);
}
// Bytes of one group record holding `rows` K rows.
inline int64_t quant_group_bytes(const QuantSpec& q, int64_t nb, int64_t rows) {
  const int64_t data_rows = q.format == DType::kInt4 ? (rows + 1) / 2 : rows;
  return round_up2(quant_data_offset(q, nb) + data_rows * nb);
}
// Bytes of one block of nb columns (all groups).
inline int64_t quant_block_bytes(const QuantSpec& q, int64_t K, int64_t nb) {
  const int64_t G = quant_num_groups(q, K);
  if (G == 0) return 0;
  const int64_t rows = quant_group_rows(q, K);
  return (G - 1) * quant_group_bytes(q, nb, rows) + quant_group_bytes(q, nb, K - (G - 1) * rows);
}

// Checks the spec on its own; kBadDtype / kBadShape with a message.
inline Status validate_quant_spec(const QuantSpec& q, char* err = nullptr, size_t err_len = 0) {
  if (!is_quantized(q.format))
    return fail(Status::kBadDtype, err, err_len, "quantized weight: format code %d is neither int8 (%d) nor int4 (%d)",
                int(q.format), RVV_DTYPE_INT8, RVV_DTYPE_INT4);
  if (q.scale_dtype != DType::kBF16 && q.scale_dtype != DType::kF16)
    return fail(Status::kBadDtype, err, err_len, "quantized weight: scale dtype code %d is neither bf16 (%d) nor f16 (%d)",
                int(q.scale_dtype), RVV_DTYPE_BF16, RVV_DTYPE_F16);
  if (q.group_size == 0 && q.format == DType::kInt4)
    return fail(Status::kBadShape, err, err_len, "quantized weight: int4 needs a group size (32, 64 or 128 are usual)");
  if (q.group_size != 0 && (q.group_size < kMinGroupSize || q.group_size > kMaxGroupSize || q.group_size % 2 != 0))
    return fail(Status::kBadShape, err, err_len,
                "quantized weight: group size %d must be 0 (int8: per channel) or an even number in [%d, %d]",
                int(q.group_size), int(kMinGroupSize), int(kMaxGroupSize));
  if (q.zero_points && q.format != DType::kInt4)
    return fail(Status::kBadShape, err, err_len, "quantized weight: zero points are supported for int4 only");
  return Status::kOk;
}

inline QuantSpec quant_spec_of(const PackedLayout& l) {
  return QuantSpec{DType(l.dtype), l.group_size, DType(l.scale_dtype), l.zero_points != 0};
}

// Bytes of the packed form, or -1 for an invalid shape or spec.
inline int64_t quant_packed_bytes(const QuantSpec& q, int64_t N, int64_t K, int64_t nb) {
  if (validate_quant_spec(q) != Status::kOk || packed_size(N, K, nb) < 0) return -1;
  return num_blocks(N, nb) * quant_block_bytes(q, K, nb);
}

inline PackedLayout make_quant_layout(const QuantSpec& q, int64_t N, int64_t K, int64_t nb, int vlenb) {
  PackedLayout l = make_packed_layout(N, K, nb, vlenb);
  l.dtype = int32_t(q.format);
  l.group_size = q.group_size;
  l.scale_dtype = int32_t(q.scale_dtype);
  l.zero_points = q.zero_points ? 1 : 0;
  l.bytes = quant_packed_bytes(q, N, K, nb);
  return l;
}

// Scale bits (bf16 or f16) <-> fp32.
inline float scale_to_f32(uint16_t bits, DType dt) { return dt == DType::kF16 ? f16_to_f32(bits) : bf16_to_f32(bits); }
inline uint16_t f32_to_scale(float v, DType dt) { return dt == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v); }

// Zero point of INT4 column values without stored zero points; INT8 has none.
inline int32_t implicit_zero(DType format) { return format == DType::kInt4 ? 8 : 0; }

// Packs already-quantized values: q[n * ldq + k] (INT8: int8 values; INT4: 0..15 in the low
// bits of each byte), scales[n * num_groups + g] (scale_dtype bits), zeros[n * num_groups + g]
// (INT4 with zero points: 0..15; else unused, may be null). `out` holds quant_packed_bytes.
inline Status pack_quantized(const QuantSpec& q, const int8_t* values, int64_t ldq, const uint16_t* scales,
                             const uint8_t* zeros, int64_t N, int64_t K, int64_t nb, uint8_t* out, char* err = nullptr,
                             size_t err_len = 0) {
  Status s = validate_quant_spec(q, err, err_len);
  if (s != Status::kOk) return s;
  if (packed_size(N, K, nb) < 0)
    return fail(Status::kBadShape, err, err_len, "pack_quantized: invalid N=%lld K=%lld nb=%lld", (long long)N,
                (long long)K, (long long)nb);
  if (ldq < K) return fail(Status::kBadShape, err, err_len, "pack_quantized: ldq=%lld < K=%lld", (long long)ldq, (long long)K);
  if (N * K > 0 && (!values || !scales || !out || (q.zero_points && !zeros)))
    return fail(Status::kNullPointer, err, err_len, "pack_quantized: null values, scales, zeros or out");
  const int64_t G = quant_num_groups(q, K), gr = quant_group_rows(q, K), nblk = num_blocks(N, nb);
  const int64_t block_bytes = quant_block_bytes(q, K, nb), full = quant_group_bytes(q, nb, gr);
  const int64_t zoff = quant_zeros_offset(nb), doff = quant_data_offset(q, nb);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int v = values[n * ldq + k];
      if (q.format == DType::kInt4 && (v < 0 || v > 15))
        return fail(Status::kBadShape, err, err_len, "pack_quantized: int4 value %d at [%lld, %lld] is outside [0, 15]", v,
                    (long long)n, (long long)k);
    }
  if (q.zero_points)
    for (int64_t i = 0; i < N * G; ++i)
      if (zeros[i] > 15)
        return fail(Status::kBadShape, err, err_len, "pack_quantized: zero point %d outside [0, 15]", int(zeros[i]));
  if (nblk * block_bytes > 0) std::memset(out, 0, size_t(nblk * block_bytes));
  for (int64_t b = 0; b < nblk; ++b) {
    const int64_t n0 = b * nb, cols = N - n0 < nb ? N - n0 : nb;
    for (int64_t g = 0; g < G; ++g) {
      uint8_t* rec = out + b * block_bytes + g * full;
      const int64_t k0 = g * gr, rows = K - k0 < gr ? K - k0 : gr;
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t n = n0 + j;
        std::memcpy(rec + 2 * j, &scales[n * G + g], 2);
        if (q.zero_points) rec[zoff + j] = zeros[n * G + g];
        const int8_t* src = values + n * ldq + k0;
        if (q.format == DType::kInt8) {
          for (int64_t r = 0; r < rows; ++r) rec[doff + r * nb + j] = uint8_t(src[r]);
        } else {
          for (int64_t r = 0; r < rows; ++r) rec[doff + (r / 2) * nb + j] |= uint8_t((src[r] & 0xF) << (4 * (r % 2)));
        }
      }
    }
  }
  return Status::kOk;
}

// Reads back what pack_quantized stored, for column n, row k: the stored value, scale bits
// and zero point (implicit zero when none is stored).
struct QuantElement {
  int32_t value;
  uint16_t scale;
  int32_t zero;
};
inline QuantElement quant_element(const uint8_t* packed, const PackedLayout& l, int64_t n, int64_t k) {
  const QuantSpec q = quant_spec_of(l);
  const int64_t gr = quant_group_rows(q, l.k), g = k / gr, r = k % gr, j = n % l.nb;
  const uint8_t* rec = packed + (n / l.nb) * quant_block_bytes(q, l.k, l.nb) + g * quant_group_bytes(q, l.nb, gr);
  QuantElement e;
  std::memcpy(&e.scale, rec + 2 * j, 2);
  e.zero = q.zero_points ? rec[quant_zeros_offset(l.nb) + j] : implicit_zero(q.format);
  const uint8_t* data = rec + quant_data_offset(q, l.nb);
  e.value = q.format == DType::kInt8 ? int32_t(int8_t(data[r * l.nb + j])) : (data[(r / 2) * l.nb + j] >> (4 * (r % 2))) & 0xF;
  return e;
}

// The weight a packed quantized layout describes: (q - z) * s, exact in fp32.
inline float dequantized_weight(const uint8_t* packed, const PackedLayout& l, int64_t n, int64_t k) {
  const QuantElement e = quant_element(packed, l, n, k);
  return float(e.value - e.zero) * scale_to_f32(e.scale, DType(l.scale_dtype));
}

// Checks the quantized fields of l (format, group size, scale dtype, zero points, bytes).
inline Status validate_quant_layout(const PackedLayout& l, char* err = nullptr, size_t err_len = 0) {
  const QuantSpec q = quant_spec_of(l);
  if (validate_quant_spec(q, err, err_len) != Status::kOk) return Status::kLayoutMismatch;
  if (l.bytes != quant_packed_bytes(q, l.n, l.k, l.nb))
    return fail(Status::kLayoutMismatch, err, err_len, "packed layout: %lld bytes, a %s weight [%lld, %lld] with nb=%lld needs %lld",
                (long long)l.bytes, q.format == DType::kInt8 ? "int8" : "int4", (long long)l.n, (long long)l.k,
                (long long)l.nb, (long long)quant_packed_bytes(q, l.n, l.k, l.nb));
  return Status::kOk;
}

// Everything about a packed layout of any format: validate_packed_layout, then the
// quantized format's own fields.
inline Status validate_layout(const PackedLayout& l, int64_t N, int64_t K, int64_t expected_nb, char* err = nullptr,
                              size_t err_len = 0) {
  const Status s = validate_packed_layout(l, N, K, expected_nb, err, err_len);
  if (s != Status::kOk) return s;
  if (is_block_format(DType(l.dtype))) return validate_block_layout(l, err, err_len);
  if (!is_quantized(DType(l.dtype))) return s;
  return validate_quant_layout(l, err, err_len);
}

// Writes W[N, K] (fp32, row stride ldw) = the dequantized weight.
inline Status dequantize_packed(const uint8_t* packed, const PackedLayout& l, float* W, int64_t ldw,
                                char* err = nullptr, size_t err_len = 0) {
  Status s = validate_layout(l, l.n, l.k, 0, err, err_len);
  if (s == Status::kOk && !is_quantized(DType(l.dtype)) && !is_block_format(DType(l.dtype)))
    s = fail(Status::kLayoutMismatch, err, err_len, "dequantize: the layout holds a bf16 weight");
  if (s != Status::kOk) return s;
  if (ldw < l.k) return fail(Status::kBadShape, err, err_len, "dequantize: ldw=%lld < K=%lld", (long long)ldw, (long long)l.k);
  if (l.bytes > 0 && (!packed || !W)) return fail(Status::kNullPointer, err, err_len, "dequantize: null pointer");
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t k = 0; k < l.k; ++k)
      W[n * ldw + k] = is_block_format(DType(l.dtype)) ? block_dequantized_weight(packed, l, n, k)
                                                       : dequantized_weight(packed, l, n, k);
  return Status::kOk;
}

// Reference round-to-nearest quantizer of a bf16 W[N, K] (row stride ldw), per group and
// output channel. Outputs in pack_quantized's input form (values [N, K], scales and zeros
// [N, num_groups]); the scale is rounded to scale_dtype first and q computed with the
// rounded scale, so dequantization reproduces exactly what the quantizer chose.
//   INT8            s = amax / 127,            q = rne(w / s) in [-127, 127]
//   INT4 symmetric  s = -m / 8 (m: the value of largest magnitude, as llama.cpp Q4_0),
//                   q = rne(w / s) + 8 clamped to [0, 15]
//   INT4 with zeros s = (max(w, 0) - min(w, 0)) / 15, z = rne(-min / s) in [0, 15],
//                   q = rne(w / s) + z clamped to [0, 15]
// A group of zeros gets s = 0 (and q = z), which dequantizes to exactly 0.
inline Status quantize_reference(const QuantSpec& q, const uint16_t* W, int64_t ldw, int64_t N, int64_t K,
                                 int8_t* values, uint16_t* scales, uint8_t* zeros, char* err = nullptr,
                                 size_t err_len = 0) {
  Status s = validate_quant_spec(q, err, err_len);
  if (s != Status::kOk) return s;
  if (N < 0 || K < 0 || ldw < K) return fail(Status::kBadShape, err, err_len, "quantize: bad shape or ldw");
  if (N * K > 0 && (!W || !values || !scales || (q.zero_points && !zeros)))
    return fail(Status::kNullPointer, err, err_len, "quantize: null pointer");
  const int64_t G = quant_num_groups(q, K), gr = quant_group_rows(q, K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t k0 = g * gr, k1 = K < k0 + gr ? K : k0 + gr;
      float amax = 0, mn = 0, mx = 0, extreme = 0;
      for (int64_t k = k0; k < k1; ++k) {
        const float w = bf16_to_f32(W[n * ldw + k]);
        if (!std::isfinite(w)) return fail(Status::kBadShape, err, err_len, "quantize: non-finite weight at [%lld, %lld]", (long long)n, (long long)k);
        if (std::fabs(w) > amax) amax = std::fabs(w), extreme = w;
        mn = w < mn ? w : mn;
        mx = w > mx ? w : mx;
      }
      float sc;
      int32_t z = implicit_zero(q.format);
      if (q.format == DType::kInt8) sc = amax / 127.0f;
      else if (!q.zero_points) sc = -extreme / 8.0f;
      else sc = (mx - mn) / 15.0f;
      const uint16_t sbits = f32_to_scale(sc, q.scale_dtype);
      const float sr = scale_to_f32(sbits, q.scale_dtype);
      if (q.zero_points) {
        const double zz = sr != 0 ? std::nearbyint(-double(mn) / double(sr)) : 0.0;
        z = int32_t(zz < 0 ? 0 : zz > 15 ? 15 : zz);
        zeros[n * G + g] = uint8_t(z);
      }
      scales[n * G + g] = sbits;
      const int32_t lo = q.format == DType::kInt8 ? -127 : 0, hi = q.format == DType::kInt8 ? 127 : 15;
      for (int64_t k = k0; k < k1; ++k) {
        const double w = bf16_to_f32(W[n * ldw + k]);
        double v = (sr != 0 && std::isfinite(w / sr)) ? std::nearbyint(w / double(sr)) + z : double(z);
        v = v < lo ? lo : v > hi ? hi : v;
        values[n * K + k] = int8_t(int32_t(v));
      }
    }
  return Status::kOk;
}

RVV_INDUCTOR_END_NAMESPACE
