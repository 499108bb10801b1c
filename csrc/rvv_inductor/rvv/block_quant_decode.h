// Vector decoding of the GGUF block formats' records (block_quant.h), shared by their
// GEMV and GEMM: per column chunk [j, j + vl) of a record,
//   params_m4   a sub-block's scale and offset as fp32 (w = s * q + o), decoded from the
//               record's f16 d / dmin and integer sub-block scales for all vl channels at
//               once (the scale bytes are channel-interleaved, so every step is one vector
//               operation over the chunk);
//   for_pairs   a sub-block's integers q, two K rows at a time, as bytes: the low nibbles
//               of one qs byte per row pair, plus the high bits from qh (5 bits: 1 bit,
//               Q6_K: 2 bits per row), shifted into bit 4 with constant shifts.
// Byte vectors are m2 in the GEMV (e32 m8 accumulators) and m1 in the GEMM (e32 m4); the
// decoding is written once for both (U8<V>).
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/block_quant.h"
#include "rvv_inductor/rvv/quant_widen.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

template <class V>
struct U8;
#define RVV_U8_OPS(V, L)                                                                                 \
  template <>                                                                                           \
  struct U8<V> {                                                                                        \
    static V load(const uint8_t* p, size_t vl) { return __riscv_vle8_v_u8##L(p, vl); }                \
    static V andi(V v, uint8_t m, size_t vl) { return __riscv_vand_vx_u8##L(v, m, vl); }              \
    static V srl(V v, size_t s, size_t vl) { return __riscv_vsrl_vx_u8##L(v, s, vl); }                \
    static V sll(V v, size_t s, size_t vl) { return __riscv_vsll_vx_u8##L(v, s, vl); }                \
    static V orv(V a, V b, size_t vl) { return __riscv_vor_vv_u8##L(a, b, vl); }                      \
    static V gather(V table, V idx, size_t vl) { return __riscv_vrgather_vv_u8##L(table, idx, vl); }  \
  };
RVV_U8_OPS(vuint8m1_t, m1)
RVV_U8_OPS(vuint8m2_t, m2)
#undef RVV_U8_OPS

// (v moved so that its bit From lands on bit To) & mask, From and To known at compile time.
template <int From, int To, class V>
inline V bits_to(V v, uint8_t mask, size_t vl) {
  using O = U8<V>;
  if constexpr (From < To) return O::andi(O::sll(v, To - From, vl), mask, vl);
  else if constexpr (From > To) return O::andi(O::srl(v, From - To, vl), mask, vl);
  else return O::andi(v, mask, vl);
}

template <DType F>
struct BlockFmt {
  static constexpr const WeightFormatTraits& kTraits = *weight_format(F);
  static constexpr int kSuperRows = kTraits.super_rows, kSubRows = kTraits.block_rows;
  static constexpr int kSubs = kSuperRows / kSubRows, kRecordBytes = kTraits.record_bytes;
  static constexpr BlockRecordFields kFields = block_record_fields(F);

  // f16 field `field` (in units of nb bytes) of the chunk's channels as fp32.
  static vfloat32m4_t f16_m4(const uint8_t* rec, int64_t nb, int32_t field, int64_t j, size_t vl) {
    return load_scales_m4(reinterpret_cast<const uint16_t*>(rec + field * nb) + j, true, vl);
  }
  static vfloat32m4_t u8_to_f32_m4(vuint8m1_t v, size_t vl) {
    return __riscv_vfwcvt_f_xu_v_f32m4(__riscv_vzext_vf2_u16m2(v, vl), vl);
  }

  // Sub-block `sub` of the record: s and o with w = s * q + o, fp32, chunk columns.
  static void params_m4(const uint8_t* rec, int64_t nb, int64_t j, int sub, size_t vl, vfloat32m4_t& s,
                        vfloat32m4_t& o) {
    const vfloat32m4_t d = f16_m4(rec, nb, kFields.d, j, vl);
    if constexpr (F == DType::kQ4_1 || F == DType::kQ5_1) {
      s = d;
      o = f16_m4(rec, nb, kFields.dmin, j, vl);
    } else if constexpr (F == DType::kQ5_0 || F == DType::kIQ4_NL) {  // w = d * (q - z)
      s = d;
      o = __riscv_vfmul_vf_f32m4(d, -float(kTraits.implicit_zero), vl);
    } else if constexpr (F == DType::kQ2_K) {  // scale byte: 4-bit sc | 4-bit min << 4
      using O = U8<vuint8m1_t>;
      const vuint8m1_t b = O::load(rec + (kFields.scales + sub) * nb + j, vl);
      s = __riscv_vfmul_vv_f32m4(d, u8_to_f32_m4(O::andi(b, 0x0F, vl), vl), vl);
      o = __riscv_vfneg_v_f32m4(
          __riscv_vfmul_vv_f32m4(f16_m4(rec, nb, kFields.dmin, j, vl), u8_to_f32_m4(O::srl(b, 4, vl), vl), vl), vl);
    } else if constexpr (F == DType::kQ3_K) {  // s = d * (sc - 32), sc 6-bit; w = s * (q - 4)
      using O = U8<vuint8m1_t>;
      const uint8_t* sb = rec + kFields.scales * nb + j;
      const vuint8m1_t lo = sub < 8 ? O::andi(O::load(sb + sub * nb, vl), 0x0F, vl) : O::srl(O::load(sb + (sub - 8) * nb, vl), 4, vl);
      const vuint8m1_t hi = O::andi(O::srl(O::load(sb + (8 + sub % 4) * nb, vl), 2 * (sub / 4), vl), 3, vl);
      const vfloat32m4_t sc = __riscv_vfsub_vf_f32m4(u8_to_f32_m4(O::orv(lo, O::sll(hi, 4, vl), vl), vl), 32.0f, vl);
      s = __riscv_vfmul_vv_f32m4(d, sc, vl);
      o = __riscv_vfmul_vf_f32m4(s, -4.0f, vl);
    } else if constexpr (F == DType::kIQ4_XS) {  // s = d * (ls - 32), ls 6-bit; w = s * (q - 128)
      using O = U8<vuint8m1_t>;
      const uint8_t* sb = rec + kFields.scales * nb + j;
      const vuint8m1_t hi = O::andi(O::srl(O::load(sb + (sub / 4) * nb, vl), 2 * (sub % 4), vl), 3, vl);
      const vuint8m1_t lo = O::andi(O::srl(O::load(sb + (2 + sub / 2) * nb, vl), 4 * (sub % 2), vl), 0x0F, vl);
      const vfloat32m4_t ls = __riscv_vfsub_vf_f32m4(u8_to_f32_m4(O::orv(lo, O::sll(hi, 4, vl), vl), vl), 32.0f, vl);
      s = __riscv_vfmul_vv_f32m4(d, ls, vl);
      o = __riscv_vfmul_vf_f32m4(s, -128.0f, vl);
    } else if constexpr (F == DType::kQ6_K) {
      const vint8m1_t sc = __riscv_vle8_v_i8m1(reinterpret_cast<const int8_t*>(rec + (kFields.scales + sub) * nb + j), vl);
      s = __riscv_vfmul_vv_f32m4(d, __riscv_vfwcvt_f_x_v_f32m4(__riscv_vsext_vf2_i16m2(sc, vl), vl), vl);
      o = __riscv_vfmul_vf_f32m4(s, -32.0f, vl);
    } else {  // Q4_K, Q5_K: 6-bit scale and min of sub-block `sub` (llama.cpp's get_scale_min_k4)
      using O = U8<vuint8m1_t>;
      const uint8_t* sb = rec + kFields.scales * nb + j;
      vuint8m1_t sc, m;
      if (sub < 4) {
        sc = O::andi(O::load(sb + sub * nb, vl), 63, vl);
        m = O::andi(O::load(sb + (sub + 4) * nb, vl), 63, vl);
      } else {
        const vuint8m1_t lo = O::load(sb + (sub + 4) * nb, vl);
        sc = O::orv(O::andi(lo, 0x0F, vl), O::sll(O::srl(O::load(sb + (sub - 4) * nb, vl), 6, vl), 4, vl), vl);
        m = O::orv(O::srl(lo, 4, vl), O::sll(O::srl(O::load(sb + sub * nb, vl), 6, vl), 4, vl), vl);
      }
      s = __riscv_vfmul_vv_f32m4(d, u8_to_f32_m4(sc, vl), vl);
      o = __riscv_vfneg_v_f32m4(
          __riscv_vfmul_vv_f32m4(f16_m4(rec, nb, kFields.dmin, j, vl), u8_to_f32_m4(m, vl), vl), vl);
    }
  }

  // fn(q0, q1, i) for the row pairs i = 0 .. kSubRows / 2 - 1 of sub-block `sub`: rows 2i
  // and 2i + 1 of the sub-block as unsigned bytes (the stored q, before any offset).
  template <class V, class Fn>
  static void for_pairs(const uint8_t* rec, int64_t nb, int64_t j, int sub, size_t vl, const Fn& fn) {
    using O = U8<V>;
    const uint8_t* qs = rec + (kFields.qs + sub * (kSubRows / 2)) * nb + j;
    auto lo_hi = [&](int i, V& q0, V& q1) {
      const V v = O::load(qs + i * nb, vl);
      q0 = O::andi(v, 0x0F, vl);
      q1 = O::srl(v, 4, vl);
    };
    if constexpr (kTraits.bits == 4 && kTraits.lookup == RVV_LOOKUP_IQ4NL) {
      // The 16 table bytes in one register (16 <= VLMAX(e8, m1) at VLEN >= 128), loaded
      // once per sub-block; each row's indices become q with one vrgather.vv.
      const V table = O::load(kIq4NlQ, 16);
      for (int i = 0; i < kSubRows / 2; ++i) {
        V q0, q1;
        lo_hi(i, q0, q1);
        fn(O::gather(table, q0, vl), O::gather(table, q1, vl), i);
      }
    } else if constexpr (kTraits.bits == 4) {
      for (int i = 0; i < kSubRows / 2; ++i) {
        V q0, q1;
        lo_hi(i, q0, q1);
        fn(q0, q1, i);
      }
    } else if constexpr (kTraits.bits < 4) {
      // Q2_K, Q3_K: qs byte u holds the low 2 bits of rows 4u..4u+3 (row pairs 2u, 2u + 1);
      // Q3_K's third bit comes from qh byte t (rows 8t..8t+7, bit i: row 8t + i) into bit 2.
      const uint8_t* q2 = rec + (kFields.qs + sub * (kSubRows / 4)) * nb + j;
      for (int t = 0; t < kSubRows / 8; ++t) {
        V h{};
        if constexpr (kTraits.bits == 3) h = O::load(rec + (kFields.qh + sub * (kSubRows / 8) + t) * nb + j, vl);
        auto quad = [&](auto half) {
          constexpr int b = 4 * decltype(half)::value;  // the quad's first row inside qh byte t
          const V v = O::load(q2 + (2 * t + decltype(half)::value) * nb, vl);
          V q0 = O::andi(v, 3, vl), q1 = O::andi(O::srl(v, 2, vl), 3, vl);
          V q2v = O::andi(O::srl(v, 4, vl), 3, vl), q3 = O::srl(v, 6, vl);
          if constexpr (kTraits.bits == 3) {
            q0 = O::orv(q0, bits_to<b, 2>(h, 4, vl), vl), q1 = O::orv(q1, bits_to<b + 1, 2>(h, 4, vl), vl);
            q2v = O::orv(q2v, bits_to<b + 2, 2>(h, 4, vl), vl), q3 = O::orv(q3, bits_to<b + 3, 2>(h, 4, vl), vl);
          }
          const int i = 4 * t + 2 * decltype(half)::value;
          fn(q0, q1, i);
          fn(q2v, q3, i + 1);
        };
        quad(IntC<0>{}), quad(IntC<1>{});
      }
    } else {
      // 5 bits (Q5_0, Q5_1, Q5_K: H = 1 high bit per row, from bit 4 of qh) and Q6_K (H = 2,
      // bits 4-5): qh byte u holds the high bits of kPairs row pairs, pair p's two rows at
      // bits 2Hp and 2Hp + H.
      static_assert(kTraits.bits == 5 || kTraits.bits == 6, "a block format of 2 to 6 bits");
      constexpr int H = kTraits.bits - 4, kPairs = 4 / H;
      constexpr uint8_t kMask = uint8_t(((1 << H) - 1) << 4);
      const uint8_t* qh = rec + (kFields.qh + sub * (kSubRows / (2 * kPairs))) * nb + j;
      for (int u = 0; u < kSubRows / (2 * kPairs); ++u) {
        const V h = O::load(qh + u * nb, vl);
        auto pair = [&](auto from) {
          constexpr int p = decltype(from)::value, b = 2 * H * p;
          const int i = kPairs * u + p;
          V q0, q1;
          lo_hi(i, q0, q1);
          fn(O::orv(q0, bits_to<b, 4>(h, kMask, vl), vl), O::orv(q1, bits_to<b + H, 4>(h, kMask, vl), vl), i);
        };
        pair(IntC<0>{}), pair(IntC<1>{});
        if constexpr (kPairs == 4) pair(IntC<2>{}), pair(IntC<3>{});
      }
    }
  }

 private:
  template <int N>
  struct IntC {
    static constexpr int value = N;
  };
};

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
