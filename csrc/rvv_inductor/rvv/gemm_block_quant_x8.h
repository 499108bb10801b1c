// The GGUF block formats' pieces of the INT8-activation GEMM (gemm_quant_x8_packed.h; the
// scheme and its reference: quant_x8.h). Per column chunk and K block, the weights are
// decoded once into an int8 panel [k][vl] of q' = q - c, with each sub-block's s and
// o' = fma(s, c, o) as fp32 rows; every activation tile of the row block then streams
// the panel with one widening multiply-add (vwmacc.vx) per weight and row, as INT4 does.
// Runs of x8_int16_rows rows sum in int16 (32 at 4 bits: the whole sub-block); at 5 and
// 6 bits each run is widened into an int32 sub-block sum. Per sub-block and row the fp32
// work is three operations (and one more with an offset), 1/32 (Q6_K: 1/16) of the
// integer work.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/block_quant.h"
#include "rvv_inductor/quant_x8.h"
#include "rvv_inductor/rvv/block_quant_decode.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

// The chunk's K rows [k0, k1) (whole sub-blocks): q' into panel rows [0, k1 - k0), each
// sub-block's s into s[i][vl] and o' into o[i][vl] (formats with an offset), i counted
// from k0.
template <DType F>
inline void x8_prepare_block_chunk(const uint8_t* blk, int64_t nb, int64_t j, size_t vl, int64_t k0, int64_t k1,
                                   int8_t* panel, float* s, float* o) {
  using Fmt = BlockFmt<F>;
  // q - c in 8-bit wrap-around arithmetic: exact for c = 128 too (q' = q - 128 fits int8).
  constexpr int8_t kC = int8_t(uint8_t(x8_center(F)));
  const int64_t rec_bytes = int64_t(Fmt::kRecordBytes) * nb;
  for (int64_t g = k0 / Fmt::kSubRows, i = 0; g * Fmt::kSubRows < k1; ++g, ++i) {
    const int64_t row0 = g * Fmt::kSubRows;
    const uint8_t* rec = blk + (row0 / Fmt::kSuperRows) * rec_bytes;
    const int sub = int((row0 % Fmt::kSuperRows) / Fmt::kSubRows);
    vfloat32m4_t sv, ov;
    Fmt::params_m4(rec, nb, j, sub, vl, sv, ov);
    __riscv_vse32_v_f32m4(s + i * int64_t(vl), sv, vl);
    if constexpr (x8_has_offset(F))
      __riscv_vse32_v_f32m4(o + i * int64_t(vl), __riscv_vfmacc_vf_f32m4(ov, float(x8_center(F)), sv, vl), vl);
    int8_t* p = panel + (row0 - k0) * int64_t(vl);
    Fmt::template for_pairs<vuint8m1_t>(rec, nb, j, sub, vl, [&](vuint8m1_t q0, vuint8m1_t q1, int r) {
      __riscv_vse8_v_i8m1(p + 2 * r * int64_t(vl), __riscv_vsub_vx_i8m1(__riscv_vreinterpret_v_u8m1_i8m1(q0), kC, vl), vl);
      __riscv_vse8_v_i8m1(p + (2 * r + 1) * int64_t(vl),
                          __riscv_vsub_vx_i8m1(__riscv_vreinterpret_v_u8m1_i8m1(q1), kC, vl), vl);
    });
  }
}

// The tile helpers take the accumulators by reference: inlined, they stay in registers.
// RVV types are sizeless: no arrays or struct members of them. A tile's rows are named
// registers and X8_ROWS(f) applies f(row) to the first MR of them. Both macros serve
// gemm_quant_x8_packed.h too, which undefines them.
#define RVV_X8_INLINE inline __attribute__((always_inline))
#define X8_ROWS(F) \
  do {             \
    F(0);          \
    if constexpr (MR > 1) F(1); \
    if constexpr (MR > 2) F(2); \
    if constexpr (MR > 3) F(3); \
  } while (0)

// One int16 run of L rows of the panel (w, [k][vl]) times the tile's x_q (x, [k][MR]).
template <int MR, int L>
RVV_X8_INLINE void x8_block_run(vint16m2_t& i0, vint16m2_t& i1, vint16m2_t& i2, vint16m2_t& i3, const int8_t* w,
                                 const int8_t* x, size_t vl) {
  {
    const vint8m1_t v = __riscv_vle8_v_i8m1(w, vl);
#define X8B_FIRST(r) i##r = __riscv_vwmul_vx_i16m2(v, x[r], vl)
    X8_ROWS(X8B_FIRST);
#undef X8B_FIRST
  }
  auto row = [&](const int8_t* wr, const int8_t* xr) {
    const vint8m1_t v = __riscv_vle8_v_i8m1(wr, vl);
#define X8B_MACC(r) i##r = __riscv_vwmacc_vx_i16m2(i##r, xr[r], v, vl)
    X8_ROWS(X8B_MACC);
#undef X8B_MACC
  };
  // Three rows per loop step, as the INT4 tile (gemm_quant_x8_packed.h): unrolled
  // further, clang interleaves the rows' loads and spills the weight rows.
  int k = 1;
#if defined(__clang__)
#pragma clang loop unroll(disable)
#elif defined(__GNUC__)
#pragma GCC unroll 1
#endif
  for (; k + 3 <= L; k += 3) {
    row(w + k * vl, x + k * MR);
    row(w + (k + 1) * vl, x + (k + 1) * MR);
    row(w + (k + 2) * vl, x + (k + 2) * MR);
  }
  for (; k < L; ++k) row(w + k * vl, x + k * MR);
}

// The K block's nbk activation blocks for MR rows, into c0..c3. panel, s, o: from
// x8_prepare_block_chunk; xq: the tile's panel [k][MR]; dx[r * ldd + b], xs[r * ldxs + b]:
// row r's block scales and scaled x_q sums.
template <int MR, DType F>
RVV_X8_INLINE void x8_tile_block(vfloat32m4_t& c0, vfloat32m4_t& c1, vfloat32m4_t& c2, vfloat32m4_t& c3,
                                  const int8_t* panel, const int8_t* xq, const float* dx, int64_t ldd, int64_t nbk,
                                  const float* xs, int64_t ldxs, const float* s, const float* o, size_t vl) {
  // A run is the sub-block at most (2 and 3 bits: int16 would hold 128 / 64 rows).
  constexpr int R = weight_format(F)->block_rows, L = x8_int16_rows(F) < R ? x8_int16_rows(F) : R;
  constexpr int kSubs = int(kX8BlockRows) / R;
  // xs: one sum per activation block, or per sub-block where those are shorter and the
  // format has an offset term (x8_geometry's gr).
  constexpr int kXs = x8_has_offset(F) && R < int(kX8BlockRows) ? kSubs : 1;
  static_assert(R % L == 0 && kX8BlockRows % R == 0, "sub-blocks of whole int16 runs inside one activation block");
  for (int64_t bi = 0; bi < nbk; ++bi) {
    const float* d = dx + bi;
    for (int h = 0; h < kSubs; ++h) {
      const int64_t row0 = bi * kX8BlockRows + h * R;
      const int8_t* w = panel + row0 * int64_t(vl);
      const int8_t* x = xq + row0 * MR;
      const float* sh = s + (bi * kSubs + h) * int64_t(vl);
      vint16m2_t i0, i1, i2, i3;
      if constexpr (L == R) {
        x8_block_run<MR, L>(i0, i1, i2, i3, w, x, vl);
        const vfloat32m4_t sv = __riscv_vle32_v_f32m4(sh, vl);
#define X8B_STEP(r) \
  c##r = __riscv_vfmacc_vv_f32m4(c##r, sv, __riscv_vfmul_vf_f32m4(__riscv_vfwcvt_f_x_v_f32m4(i##r, vl), d[r * ldd], vl), vl)
        X8_ROWS(X8B_STEP);
#undef X8B_STEP
      } else {
        vint32m4_t t0, t1, t2, t3;
        x8_block_run<MR, L>(i0, i1, i2, i3, w, x, vl);
#define X8B_WIDEN(r) t##r = __riscv_vwcvt_x_x_v_i32m4(i##r, vl)
        X8_ROWS(X8B_WIDEN);
#undef X8B_WIDEN
        for (int u = L; u < R; u += L) {
          x8_block_run<MR, L>(i0, i1, i2, i3, w + u * int64_t(vl), x + u * MR, vl);
#define X8B_ADD(r) t##r = __riscv_vwadd_wv_i32m4(t##r, i##r, vl)
          X8_ROWS(X8B_ADD);
#undef X8B_ADD
        }
        const vfloat32m4_t sv = __riscv_vle32_v_f32m4(sh, vl);
#define X8B_STEP(r) \
  c##r = __riscv_vfmacc_vv_f32m4(c##r, sv, __riscv_vfmul_vf_f32m4(__riscv_vfcvt_f_x_v_f32m4(t##r, vl), d[r * ldd], vl), vl)
        X8_ROWS(X8B_STEP);
#undef X8B_STEP
      }
      if constexpr (x8_has_offset(F)) {
        const vfloat32m4_t ov = __riscv_vle32_v_f32m4(o + (bi * kSubs + h) * int64_t(vl), vl);
#define X8B_OFFSET(r) c##r = __riscv_vfmacc_vf_f32m4(c##r, xs[r * ldxs + bi * kXs + (kXs > 1 ? h : 0)], ov, vl)
        X8_ROWS(X8B_OFFSET);
#undef X8B_OFFSET
      }
    }
  }
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
