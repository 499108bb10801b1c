// Packed layout of the GGUF block formats (Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K; weight_formats.inl):
// the file's blocks rearranged for the kernels, value for value and at the file's bytes
// per weight (no re-quantization, no wider scales).
//
// Panels as every packed format: ceil(N/nb) blocks of nb output channels (the last one
// zero-padded), each streamed front to back. Inside a block, K is cut into records of
// super_rows rows (one GGUF block per channel). A record is a sequence of fields, each
// holding `width` bytes per channel, channel-interleaved (byte i of channel c at
// field + i * nb + c, 16-bit fields as nb little-endian values), so one unit-stride
// vector load along N gets one byte (or one scale) of every channel:
//
//   Q4_1 (32 rows)   d f16 | m f16 | qs 16
//   Q5_0 (32 rows)   d f16 | qh 4 | qs 16
//   Q5_1 (32 rows)   d f16 | m f16 | qh 4 | qs 16
//   IQ4_NL (32 rows) d f16 | qs 16 (4-bit indices into kIq4NlValues)
//   IQ4_XS (256 rows) d f16 | scales 6 (the file's scales_h u16, then scales_l 4) | qs 128
//   Q2_K (256 rows)  d f16 | dmin f16 | scales 16 (the file's: scale | min << 4) | qs 64
//   Q3_K (256 rows)  d f16 | scales 12 (the file's 6-bit packing) | qh 32 | qs 64
//   Q4_K (256 rows)  d f16 | dmin f16 | scales 12 (the file's 6-bit packing) | qs 128
//   Q5_K (256 rows)  d f16 | dmin f16 | scales 12 | qh 32 | qs 128
//   Q6_K (256 rows)  d f16 | scales 16 (int8) | qh 64 | qs 128
//
//   qs  the low 4 bits: byte p holds row 2p in its low nibble and row 2p+1 in its high one;
//       2 and 3 bits (Q2_K, Q3_K): the low 2 bits, byte p holding rows 4p..4p+3 (bits 2i,
//       2i+1: row 4p+i)
//   qh  Q5_0, Q5_1, Q5_K: bit 4 of rows 8t..8t+7 in byte t (bit i: row 8t+i); Q3_K the
//       same for bit 2
//       Q6_K: bits 4-5 of rows 4t..4t+3 in byte t (bits 2i, 2i+1: row 4t+i)
//
// Values (as gguf.dequantize computes them, every product exact in fp32):
//   Q4_1  w = d * q + m
//   Q5_0  w = d * (q - 16)                    q 5-bit
//   Q5_1  w = d * q + m                       q 5-bit
//   IQ4_NL w = d * kIq4NlValues[i]            i the stored 4-bit index; the kernels take
//                                             q = kIq4NlValues[i] + 128 (RVV_LOOKUP_IQ4NL,
//                                             one byte) and w = d * (q - 128)
//   IQ4_XS w = (d * (ls_j - 32)) * kIq4NlValues[i]   j = row / 32, ls_j 6-bit: the low 4 bits
//                                             from scales_l, the high 2 from scales_h
//   Q2_K  w = (d * sc_j) * q - dmin * m_j     j = row / 16, sc_j and m_j 4-bit, q 2-bit
//   Q3_K  w = (d * (sc_j - 32)) * (q - 4)     j = row / 16, sc_j 6-bit, q 3-bit (the file's
//                                             "hmask bit clear: subtract 4" as q = lo + 4 hbit)
//   Q4_K  w = (d * sc_j) * q - dmin * m_j     j = row / 32, sc_j and m_j 6-bit
//   Q5_K  the same with a 5-bit q
//   Q6_K  w = (d * sc_j) * (q - 32)           j = row / 16, sc_j int8, q 6-bit
// Each is the file's value exactly: d * sc * q has at most 24 significant bits, so only
// the final addition rounds, as in the file's reference dequantization.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "rvv_inductor/bf16.h"
#include "rvv_inductor/config.h"
#include "rvv_inductor/error.h"
#include "rvv_inductor/packing.h"
#include "rvv_inductor/types.h"
#include "rvv_inductor/weight_format.h"

RVV_INDUCTOR_BEGIN_NAMESPACE

// IQ4_NL's (and IQ4_XS's) non-linear 4-bit grid (ggml's kvalues_iq4nl), and the same plus
// 128 as the unsigned q the kernels multiply (1 .. 241: a byte, exact in f16 and fp32).
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
inline constexpr uint8_t kIq4NlQ[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
static_assert(kIq4NlQ[0] == kIq4NlValues[0] + 128 && kIq4NlQ[15] == kIq4NlValues[15] + 128, "kIq4NlQ = values + 128");

// Field offsets of a record, in units of nb bytes (-1: the format has no such field).
struct BlockRecordFields {
  int32_t d, dmin, scales, qh, qs;
};
inline constexpr BlockRecordFields block_record_fields(DType f) {
  switch (f) {
    case DType::kQ4_1: return {0, 2, -1, -1, 4};
    case DType::kQ5_0: return {0, -1, -1, 2, 6};
    case DType::kQ5_1: return {0, 2, -1, 4, 8};
    case DType::kIQ4_NL: return {0, -1, -1, -1, 2};
    case DType::kIQ4_XS: return {0, -1, 2, -1, 8};
    case DType::kQ2_K: return {0, 2, 4, -1, 20};
    case DType::kQ3_K: return {0, -1, 2, 14, 46};
    case DType::kQ4_K: return {0, 2, 4, -1, 16};
    case DType::kQ5_K: return {0, 2, 4, 16, 48};
    case DType::kQ6_K: return {0, -1, 2, 18, 82};
    default: return {-1, -1, -1, -1, -1};
  }
}

inline int64_t block_record_bytes(DType f, int64_t nb) {
  const WeightFormatTraits* t = weight_format(f);
  return t ? int64_t(t->record_bytes) * nb : -1;
}

// Bytes of the packed weight, or -1 when the shape does not fit the format (K must be a
// whole number of records, as in a GGUF file).
inline int64_t block_packed_bytes(DType f, int64_t N, int64_t K, int64_t nb) {
  const WeightFormatTraits* t = weight_format(f);
  if (!t || t->record_bytes <= 0 || packed_size(N, K, nb) < 0 || K % t->super_rows != 0) return -1;
  return num_blocks(N, nb) * (K / t->super_rows) * block_record_bytes(f, nb);
}

inline PackedLayout make_block_layout(DType f, int64_t N, int64_t K, int64_t nb, int vlenb) {
  PackedLayout l = make_packed_layout(N, K, nb, vlenb);
  const WeightFormatTraits* t = weight_format(f);
  l.dtype = int32_t(f);
  l.group_size = t ? t->super_rows : 0;
  l.scale_dtype = int32_t(DType::kF16);
  l.zero_points = 0;
  l.bytes = block_packed_bytes(f, N, K, nb);
  return l;
}

inline Status validate_block_layout(const PackedLayout& l, char* err = nullptr, size_t err_len = 0) {
  const DType f = DType(l.dtype);
  const WeightFormatTraits* t = weight_format(f);
  if (!t || t->record_bytes <= 0)
    return fail(Status::kLayoutMismatch, err, err_len, "packed layout: format code %d is not a block format", int(l.dtype));
  if (l.k % t->super_rows != 0)
    return fail(Status::kLayoutMismatch, err, err_len, "packed layout: %s needs K a multiple of %d, K=%lld", t->name,
                int(t->super_rows), (long long)l.k);
  if (l.group_size != t->super_rows || l.scale_dtype != int32_t(DType::kF16) || l.zero_points != 0 ||
      l.bytes != block_packed_bytes(f, l.n, l.k, l.nb))
    return fail(Status::kLayoutMismatch, err, err_len,
                "packed layout: a %s weight [%lld, %lld] with nb=%lld has group_size %d, f16 scales, no zero points and "
                "%lld bytes; this layout says group_size %d, scale dtype %d, zero points %d, %lld bytes",
                t->name, (long long)l.n, (long long)l.k, (long long)l.nb, int(t->super_rows),
                (long long)block_packed_bytes(f, l.n, l.k, l.nb), int(l.group_size), int(l.scale_dtype),
                int(l.zero_points), (long long)l.bytes);
  return Status::kOk;
}

namespace block_quant_detail {

// Element e (0 <= e < super_rows) of one GGUF block as the file stores it: the integer q
// (unsigned, before any offset) and its sub-block index.
inline int32_t file_q(DType f, const uint8_t* blk, int e) {
  switch (f) {
    case DType::kQ4_1: return (blk[4 + e % 16] >> (4 * (e / 16))) & 0xF;
    case DType::kIQ4_NL: return (blk[2 + e % 16] >> (4 * (e / 16))) & 0xF;  // d | qs: the index
    case DType::kIQ4_XS: return (blk[8 + 16 * (e / 32) + e % 16] >> (4 * ((e % 32) / 16))) & 0xF;
    case DType::kQ2_K: {  // scales 16 | qs 64 | d | dmin; 128-row halves of 4 shifts x 32 bytes
      const int h = e / 128, r = e % 128;
      return (blk[16 + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
    }
    case DType::kQ3_K: {  // hmask 32 | qs 64 | scales 12 | d; hmask bit e / 32 of byte e % 32
      const int h = e / 128, r = e % 128;
      const int lo = (blk[32 + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
      return lo | (((blk[e % 32] >> (e / 32)) & 1) << 2);
    }
    case DType::kQ5_0:  // d | qh (u32, bit e: element e) | qs (elements e and e + 16 in byte e)
    case DType::kQ5_1: {  // d | m | qh | qs
      const int h = f == DType::kQ5_0 ? 2 : 4;
      const int lo = (blk[h + 4 + e % 16] >> (4 * (e / 16))) & 0xF;
      return lo | (((blk[h + e / 8] >> (e % 8)) & 1) << 4);
    }
    case DType::kQ4_K: return (blk[16 + 32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0xF;
    case DType::kQ5_K: {
      const int lo = (blk[48 + 32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0xF;
      return lo | (((blk[16 + e % 32] >> (e / 32)) & 1) << 4);
    }
    case DType::kQ6_K: {
      const int h = e / 128, r = e % 128;
      const int lo = (blk[64 * h + r % 64] >> (4 * (r / 64))) & 0xF;
      const int hi = (blk[128 + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
      return lo | (hi << 4);
    }
    default: return 0;
  }
}

inline void put16(uint8_t* rec, int32_t field, int64_t nb, int64_t c, const uint8_t* src) {
  std::memcpy(rec + field * nb + 2 * c, src, 2);
}

}  // namespace block_quant_detail

// Packs a tensor stored as GGUF blocks: `blocks` holds N rows of K / super_rows file blocks
// each (file_block_bytes apiece, the tensor's bytes as in the file), row n at
// blocks + n * ldb bytes. `out` holds block_packed_bytes.
inline Status pack_gguf_blocks(DType f, const uint8_t* blocks, int64_t ldb, int64_t N, int64_t K, int64_t nb,
                               uint8_t* out, char* err = nullptr, size_t err_len = 0) {
  const WeightFormatTraits* t = weight_format(f);
  if (!t || t->record_bytes <= 0)
    return fail(Status::kBadDtype, err, err_len, "pack_gguf_blocks: format code %d is not a block format", int(f));
  const int64_t bytes = block_packed_bytes(f, N, K, nb);
  if (bytes < 0)
    return fail(Status::kBadShape, err, err_len, "pack_gguf_blocks: %s [N=%lld, K=%lld] with nb=%lld: K must be a multiple of %d",
                t->name, (long long)N, (long long)K, (long long)nb, int(t->super_rows));
  const int64_t S = t->super_rows, nrec = K / S, fb = t->file_block_bytes;
  if (ldb < nrec * fb)
    return fail(Status::kBadShape, err, err_len, "pack_gguf_blocks: row stride %lld < %lld bytes", (long long)ldb,
                (long long)(nrec * fb));
  if (N * K > 0 && (!blocks || !out)) return fail(Status::kNullPointer, err, err_len, "pack_gguf_blocks: null pointer");
  if (bytes > 0) std::memset(out, 0, size_t(bytes));
  const BlockRecordFields fl = block_record_fields(f);
  const int64_t rec_bytes = block_record_bytes(f, nb), blk_bytes = nrec * rec_bytes;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t c = n % nb;
    for (int64_t r = 0; r < nrec; ++r) {
      const uint8_t* src = blocks + n * ldb + r * fb;
      uint8_t* rec = out + (n / nb) * blk_bytes + r * rec_bytes;
      using namespace block_quant_detail;
      switch (f) {
        case DType::kQ4_1:
        case DType::kQ5_1: put16(rec, fl.d, nb, c, src), put16(rec, fl.dmin, nb, c, src + 2); break;
        case DType::kQ5_0:
        case DType::kIQ4_NL: put16(rec, fl.d, nb, c, src); break;
        case DType::kQ4_K:
        case DType::kQ5_K:
          put16(rec, fl.d, nb, c, src), put16(rec, fl.dmin, nb, c, src + 2);
          for (int i = 0; i < 12; ++i) rec[(fl.scales + i) * nb + c] = src[4 + i];
          break;
        case DType::kQ2_K:
          put16(rec, fl.d, nb, c, src + 80), put16(rec, fl.dmin, nb, c, src + 82);
          for (int i = 0; i < 16; ++i) rec[(fl.scales + i) * nb + c] = src[i];
          break;
        case DType::kQ3_K:
          put16(rec, fl.d, nb, c, src + 108);
          for (int i = 0; i < 12; ++i) rec[(fl.scales + i) * nb + c] = src[96 + i];
          break;
        case DType::kIQ4_XS:
          put16(rec, fl.d, nb, c, src);
          for (int i = 0; i < 6; ++i) rec[(fl.scales + i) * nb + c] = src[2 + i];
          break;
        case DType::kQ6_K:
          put16(rec, fl.d, nb, c, src + 208);
          for (int i = 0; i < 16; ++i) rec[(fl.scales + i) * nb + c] = src[192 + i];
          break;
        default: break;
      }
      for (int e = 0; e < S; ++e) {
        const int q = file_q(f, src, e);
        if (t->bits < 4) {
          rec[(fl.qs + e / 4) * nb + c] |= uint8_t((q & 3) << (2 * (e % 4)));
          if (t->bits == 3) rec[(fl.qh + e / 8) * nb + c] |= uint8_t(((q >> 2) & 1) << (e % 8));
          continue;
        }
        rec[(fl.qs + e / 2) * nb + c] |= uint8_t((q & 0xF) << (4 * (e % 2)));
        if (t->bits == 5) rec[(fl.qh + e / 8) * nb + c] |= uint8_t(((q >> 4) & 1) << (e % 8));
        if (f == DType::kQ6_K) rec[(fl.qh + e / 4) * nb + c] |= uint8_t(((q >> 4) & 3) << (2 * (e % 4)));
      }
    }
  }
  return Status::kOk;
}

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K record's 12 scale bytes (s[i]:
// byte i), as llama.cpp's get_scale_min_k4.
inline void k4_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63, *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The parameters of row k's sub-block for one channel: w = scale * q + offset.
struct BlockParams {
  float scale, offset;
};

inline uint16_t get16(const uint8_t* rec, int32_t field, int64_t nb, int64_t c) {
  uint16_t v;
  std::memcpy(&v, rec + field * nb + 2 * c, 2);
  return v;
}

// Record pointer, channel and row inside it of element (n, k) of a packed block weight.
struct BlockElementRef {
  const uint8_t* rec;
  int64_t c;
  int row;
};
inline BlockElementRef block_element_ref(const uint8_t* packed, const PackedLayout& l, int64_t n, int64_t k) {
  const DType f = DType(l.dtype);
  const int64_t S = weight_format(f)->super_rows, rec_bytes = block_record_bytes(f, l.nb);
  return {packed + (n / l.nb) * (l.k / S) * rec_bytes + (k / S) * rec_bytes, n % l.nb, int(k % S)};
}

inline BlockParams block_params(DType f, const uint8_t* rec, int64_t nb, int64_t c, int row) {
  const BlockRecordFields fl = block_record_fields(f);
  const float d = f16_to_f32(get16(rec, fl.d, nb, c));
  switch (f) {
    case DType::kQ4_1:
    case DType::kQ5_1: return {d, f16_to_f32(get16(rec, fl.dmin, nb, c))};
    case DType::kQ5_0: return {d, -16.0f * d};
    case DType::kIQ4_NL: return {d, -128.0f * d};
    case DType::kQ2_K: {
      const uint8_t sc = rec[(fl.scales + row / 16) * nb + c];
      return {d * float(sc & 0xF), -(f16_to_f32(get16(rec, fl.dmin, nb, c)) * float(sc >> 4))};
    }
    case DType::kQ3_K: {
      const int j = row / 16;
      const int lo = j < 8 ? rec[(fl.scales + j) * nb + c] & 0xF : rec[(fl.scales + j - 8) * nb + c] >> 4;
      const int hi = (rec[(fl.scales + 8 + j % 4) * nb + c] >> (2 * (j / 4))) & 3;
      const float s = d * float((lo | (hi << 4)) - 32);
      return {s, -4.0f * s};
    }
    case DType::kIQ4_XS: {
      const int j = row / 32;
      const int hi = (rec[(fl.scales + j / 4) * nb + c] >> (2 * (j % 4))) & 3;
      const int lo = (rec[(fl.scales + 2 + j / 2) * nb + c] >> (4 * (j % 2))) & 0xF;
      const float s = d * float((lo | (hi << 4)) - 32);
      return {s, -128.0f * s};
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      uint8_t s[12];
      for (int i = 0; i < 12; ++i) s[i] = rec[(fl.scales + i) * nb + c];
      int sc, m;
      k4_scale_min(s, row / 32, &sc, &m);
      return {d * float(sc), -(f16_to_f32(get16(rec, fl.dmin, nb, c)) * float(m))};
    }
    case DType::kQ6_K: {
      const float s = d * float(int8_t(rec[(fl.scales + row / 16) * nb + c]));
      return {s, -32.0f * s};
    }
    default: return {0.0f, 0.0f};
  }
}

// The integer q of the value formula at `row` of a record for channel c: the stored bits
// (unsigned, 0 .. 2^bits - 1), or for a lookup format the table's entry + 128.
inline int32_t block_q(DType f, const uint8_t* rec, int64_t nb, int64_t c, int row) {
  const BlockRecordFields fl = block_record_fields(f);
  if (weight_format(f)->bits < 4) {
    int32_t q = (rec[(fl.qs + row / 4) * nb + c] >> (2 * (row % 4))) & 3;
    if (weight_format(f)->bits == 3) q |= ((rec[(fl.qh + row / 8) * nb + c] >> (row % 8)) & 1) << 2;
    return q;
  }
  int32_t q = (rec[(fl.qs + row / 2) * nb + c] >> (4 * (row % 2))) & 0xF;
  if (weight_format(f)->lookup == RVV_LOOKUP_IQ4NL) return kIq4NlQ[q];
  if (weight_format(f)->bits == 5) q |= ((rec[(fl.qh + row / 8) * nb + c] >> (row % 8)) & 1) << 4;
  if (f == DType::kQ6_K) q |= ((rec[(fl.qh + row / 4) * nb + c] >> (2 * (row % 4))) & 3) << 4;
  return q;
}

// w from a sub-block's parameters and the stored q, as gguf.dequantize computes it: the
// formats with an implicit zero (Q5_0, Q6_K) as s * (q - z), the others as s * q + offset.
// The products are exact, so the one rounding is the file's (none for s * (q - z)).
inline float block_weight(DType f, const BlockParams& p, int32_t q) {
  const WeightFormatTraits* t = weight_format(f);
  if (t->offset == RVV_OFFSET_ZERO) return p.scale * float(q - t->implicit_zero);
  return p.scale * float(q) + p.offset;
}

// The weight a packed block layout describes at (n, k), as gguf.dequantize gives it.
inline float block_dequantized_weight(const uint8_t* packed, const PackedLayout& l, int64_t n, int64_t k) {
  const DType f = DType(l.dtype);
  const BlockElementRef e = block_element_ref(packed, l, n, k);
  return block_weight(f, block_params(f, e.rec, l.nb, e.c, e.row), block_q(f, e.rec, l.nb, e.c, e.row));
}

RVV_INDUCTOR_END_NAMESPACE
