// Prefill / batched GEMM (M >= 2) with a packed INT4 or INT8 weight (and, through
// gemm_block_quant_x8.h, the GGUF block formats) and INT8 activations
// quantized per row in blocks of 32 (the scheme and its bound: quant_x8.h; the scalar
// reference there gives the same numbers bit for bit).
//
// Kernels gemm_x8_int4_4xm4 and gemm_x8_int8_3xm4. The inner loop is integer: per K row
// one vector load of vl weight bytes and, per activation row, one scalar load of x_q and
// one widening multiply-add vwmacc.vx (int8 x int8 -> int16). INT4: 32 rows of
// x_q * (q - 8) sum exactly in int16, so a block is 32 vwmacc per row and then three
// fp32 operations (vfwcvt, vfmul by dx, vfmacc with the scales). INT8: int8 x int8
// products fill int16 after two rows, so each pair is widened into an int32 block sum
// (vwadd.wv): the int8 datapath then does 4 multiply-adds per cycle at DLEN 128, the fp32
// rate, and the gain over the fp GEMM is the per-weight conversion and scaling it skips.
//
// Weights are unpacked once per row block (MC rows), not per tile: for INT4 the K block
// of a column chunk is expanded to int8 (q - 8) into a panel [KC][vl] (16 KB at most, in
// L1), which every tile of the row block then streams; INT8 is read in place. Scales
// (and s * (z - 8) for stored zero points) of the chunk are converted to fp32 once per
// K block too.
//
// Registers (VLEN-agnostic, vl = VLMAX(e32, m4) columns): INT4 tile 4 rows x (int16 m2 +
// fp32 m4) = 24, plus the weight row (m1) and, per block, the scales (m4): 29-32.
// INT8 tile 3 rows x (int32 m4 + fp32 m4) = 24, plus two weight rows and the int16 pair.
//
// Cache blocking as the fp GEMM (gemm_quant_packed.h): column groups > row blocks > K
// blocks, fp32 partial sums between K blocks; the activation block is quantized once per
// column group into panels [k][rows of the tile] so a tile's x_q for one K row are
// adjacent. K blocks start on group boundaries (stored zero points are applied at the end
// of a group), so the per-output order of operations is the reference's.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "rvv_inductor/quant_packing.h"
#include "rvv_inductor/quant_x8.h"
#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/epilogue.h"
#include "rvv_inductor/rvv/gemm_block_quant_x8.h"
#include "rvv_inductor/rvv/gemm_quant_packed.h"
#include "rvv_inductor/rvv/quant_widen.h"
#include "rvv_inductor/scratch.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

// Activation rows per tile: 4 where a block sums in int16 (INT4, Q4_1, Q4_K), else 3
// (the int32 sums take the registers of the fourth row).
template <DType kFormat>
constexpr int x8_tile_rows() {
  if constexpr (is_block_format(kFormat)) return x8_int16_rows(kFormat) >= kX8BlockRows ? 4 : 3;
  return kFormat == DType::kInt4 ? 4 : 3;
}

struct X8Blocking {
  int64_t mc;         // rows per row block: a multiple of the tile rows, or all of M
  int64_t kc;         // K rows per K block: a multiple of the group rows (32 for per-channel INT8)
  int64_t nc_blocks;  // packed blocks per column group
};

// Budgets: the int8 weight panel (INT4, block formats) kc x vl bytes <= 16 KB (L1), the activation block mc x kc bytes
// <= 32 KB, the fp32 partial sums mc x nc <= 64 KB. Without K blocks there are no partial
// sums and one column group.
// K blocks start on a multiple of this: a group boundary with stored zero points (their
// correction closes a group) and whenever a group is shorter than K, else a block of 32.
inline int64_t x8_k_step(const QuantSpec& q, int64_t K) {
  const int64_t gr = quant_group_rows(q, K);
  return q.zero_points || gr < K ? gr : kX8BlockRows;
}

// What the driver below needs of a format: gr, the rows of one xs sum (a weight group, or
// an activation block for the block formats); rs, the rows of one scale row in sc.s;
// the bytes of a packed block; the K step of the K blocks.
struct X8Geometry {
  int64_t gr, rs, block_bytes, step;
  bool panel, group_sums;
};
template <DType kFormat>
inline X8Geometry x8_geometry(const PackedLayout& l, int64_t K, int64_t nb) {
  if constexpr (is_block_format(kFormat)) {
    // The offset term needs the x sums of its sub-block: per activation block, or per
    // sub-block where a sub-block is shorter (Q2_K: 16 rows).
    const int64_t S = weight_format(kFormat)->super_rows, R = weight_format(kFormat)->block_rows;
    const int64_t gr = x8_has_offset(kFormat) && R < kX8BlockRows ? R : kX8BlockRows;
    return {gr, R, K / S * block_record_bytes(kFormat, nb), kX8BlockRows, true, x8_has_offset(kFormat)};
  } else {
    const QuantSpec q = quant_spec_of(l);
    const int64_t gr = quant_group_rows(q, K);
    return {gr, gr, quant_block_bytes(q, K, nb), x8_k_step(q, K), kFormat == DType::kInt4,
            kFormat == DType::kInt4 && q.zero_points};
  }
}

inline X8Blocking x8_gemm_blocking(int64_t M, int64_t K, int64_t nb, int64_t step, bool panel, int tile_rows,
                                   int64_t vlmax) {
  constexpr int64_t kPanelBytes = 16384, kXBytes = 32768, kAccFloats = 16384, kAllBlocks = int64_t(1) << 40;
  X8Blocking bk;
  const int64_t mc_max = 16 * int64_t(tile_rows);
  bk.mc = M < mc_max ? M : mc_max;
  int64_t budget = kXBytes / bk.mc;
  if (panel && kPanelBytes / vlmax < budget) budget = kPanelBytes / vlmax;
  int64_t kc = budget / step * step;
  if (kc < step) kc = step;
  if (kc >= K) {
    bk.kc = K, bk.nc_blocks = kAllBlocks;
    return bk;
  }
  bk.kc = kc;
  const int64_t ncb = kAccFloats / bk.mc / (nb > 0 ? nb : 1);
  bk.nc_blocks = ncb > 1 ? ncb : 1;
  return bk;
}

// Scratch of one call: the quantized activation block and its scales, the INT4 panel,
// the chunk's fp32 scales, the partial sums. Sizes in bytes, offsets 64-byte aligned.
struct X8Scratch {
  int8_t* xq;     // M x Kp (K padded to 32), tile panels [k][rows]
  float* dx;      // M x Kp / 32
  float* xs;      // M x G (stored zero points)
  int8_t* panel;  // kcp x vlmax (INT4, block formats)
  float* s;       // ngk x vlmax: per group (block formats: per sub-block) fp32 scales
  float* sz;      // ngk x vlmax: s * (z - 8) with stored zero points; block formats: o'
  float* acc;     // mc x nc_blocks * nb (with K blocks)
};

// Quantizes rows [mb, mb_end) x K rows [k0, k1) of X into the tile panels (zero rows up to
// kcp), their block scales dx and, with stored zero points, their per-group sums xs. The
// kernel calls it once for all M rows and all K: each column group then reads the panels.
template <int kTileRows>
inline void x8_quantize_block(const LinearOperands& a, int64_t mb, int64_t mb_end, int64_t k0, int64_t k1, int64_t kcp,
                              int64_t gr, bool group_sums, const X8Scratch& sc) {
  const int64_t nbk = kcp / kX8BlockRows, ngk = (k1 - k0 + gr - 1) / gr;
  const vfloat32m1_t fzero = __riscv_vfmv_s_f_f32m1(0.0f, 1);
  const vint32m1_t izero = __riscv_vmv_s_x_i32m1(0, 1);
  for (int64_t m = mb; m < mb_end; ++m) {
    const int64_t i = m - mb, t0 = i / kTileRows * kTileRows;
    const int64_t rows = mb_end - mb - t0 < kTileRows ? mb_end - mb - t0 : kTileRows;
    int8_t* base = sc.xq + t0 * kcp + (i - t0);
    const uint16_t* x = a.x + m * a.ldx;
    float* xs = sc.xs + i * ngk;
    if (group_sums)
      for (int64_t g = 0; g < ngk; ++g) xs[g] = 0.0f;
    for (int64_t bi = 0; bi < nbk; ++bi) {
      const int64_t kk = k0 + bi * kX8BlockRows;
      const int64_t n = k1 - kk < kX8BlockRows ? (k1 > kk ? k1 - kk : 0) : kX8BlockRows;
      int8_t* out = base + bi * kX8BlockRows * rows;
      // The block's x_q sums: one per block, or one per gr-row run where gr < 32 (the
      // 16-row sub-blocks of a format whose offset term needs them: at most 2 runs).
      int32_t qs[2] = {0, 0};
      const int64_t runs = gr < kX8BlockRows ? kX8BlockRows / gr : 1, run = gr < kX8BlockRows ? gr : kX8BlockRows;
      float dxv = 0.0f;
      if (n > 0) {
        // e32 m8 holds 32 elements at every VLEN >= 128.
        const size_t vl = __riscv_vsetvl_e32m8(size_t(n));
        const vfloat32m8_t v = Bf16Soft::load_m8(x + kk, vl);
        const float amax =
            __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredmax_vs_f32m8_f32m1(__riscv_vfabs_v_f32m8(v, vl), fzero, vl));
        const X8BlockScale s = x8_block_scale(amax);
        const vint16m4_t q16 = __riscv_vfncvt_x_f_w_i16m4_rm(__riscv_vfmul_vf_f32m8(v, s.inv, vl), __RISCV_FRM_RNE, vl);
        __riscv_vsse8_v_i8m2(out, rows, __riscv_vncvt_x_x_w_i8m2(q16, vl), vl);
        if (group_sums)
          for (int64_t r = 0; r < runs && r * run < n; ++r) {
            const size_t vr = size_t(n - r * run < run ? n - r * run : run);
            // (The first run needs no slide: one reduction per block, as before runs.)
            const vint16m4_t part = r == 0 ? q16 : __riscv_vslidedown_vx_i16m4(q16, size_t(r * run), vl);
            qs[r] = __riscv_vmv_x_s_i32m1_i32(__riscv_vwredsum_vs_i16m4_i32m1(part, izero, vr));
          }
        dxv = s.dx;
      }
      if (n < kX8BlockRows) {
        const size_t vz = __riscv_vsetvl_e8m2(size_t(kX8BlockRows - n));
        __riscv_vsse8_v_i8m2(out + n * rows, rows, __riscv_vmv_v_x_i8m2(0, vz), vz);
      }
      sc.dx[i * nbk + bi] = dxv;
      if (group_sums && n > 0)
        for (int64_t r = 0; r < runs && r * run < n; ++r) {
          float& g = xs[(kk - k0 + r * run) / gr];
          g = std::fma(dxv, float(qs[r]), g);
        }
    }
  }
}

// The chunk's per-group fp32 scales for K rows [k0, k1) (and s * (z - 8)), and for INT4
// its weights as int8 (q - 8) in the panel [kcp][vl] (rows past k1 zero).
template <DType kFormat>
inline void x8_prepare_chunk(const LinearOperands& a, const QuantSpec& q, const uint8_t* blk, int64_t j, size_t vl,
                             int64_t k0, int64_t k1, int64_t kcp, int64_t gr, const X8Scratch& sc) {
  const int64_t nb = a.nb, K = a.K;
  const bool f16 = q.scale_dtype == DType::kF16;
  const int64_t full = quant_group_bytes(q, nb, gr), zoff = quant_zeros_offset(nb), doff = quant_data_offset(q, nb);
  for (int64_t g = k0 / gr, gi = 0; g * gr < k1; ++g, ++gi) {
    const uint8_t* rec = blk + g * full;
    const vfloat32m4_t s = load_scales_m4(reinterpret_cast<const uint16_t*>(rec) + j, f16, vl);
    __riscv_vse32_v_f32m4(sc.s + gi * int64_t(vl), s, vl);
    if (kFormat == DType::kInt4 && q.zero_points) {
      const vfloat32m4_t z = __riscv_vfwcvt_f_xu_v_f32m4(__riscv_vzext_vf2_u16m2(__riscv_vle8_v_u8m1(rec + zoff + j, vl), vl), vl);
      __riscv_vse32_v_f32m4(sc.sz + gi * int64_t(vl), __riscv_vfmul_vv_f32m4(s, __riscv_vfsub_vf_f32m4(z, 8.0f, vl), vl), vl);
    }
    if constexpr (kFormat == DType::kInt4) {
      const int64_t g0 = g * gr, rows = K - g0 < gr ? K - g0 : gr;
      const uint8_t* d = rec + doff + j;
      int8_t* p = sc.panel + (g0 - k0) * int64_t(vl);
      for (int64_t r = 0; r < rows; r += 2, d += nb, p += 2 * vl) {
        const vint8m1_t v = __riscv_vreinterpret_v_u8m1_i8m1(__riscv_vle8_v_u8m1(d, vl));
        __riscv_vse8_v_i8m1(p, __riscv_vsub_vx_i8m1(__riscv_vand_vx_i8m1(v, 0x0F, vl), 8, vl), vl);
        // An odd last row (K odd) leaves the high nibble 0: its panel row lies in the
        // block's padding, where x_q is 0.
        __riscv_vse8_v_i8m1(p + vl, __riscv_vsub_vx_i8m1(__riscv_vreinterpret_v_u8m1_i8m1(__riscv_vsrl_vx_u8m1(
                                                             __riscv_vreinterpret_v_i8m1_u8m1(v), 4, vl)),
                                                         8, vl),
                            vl);
      }
    }
  }
  if constexpr (kFormat == DType::kInt4) {
    const int64_t filled = (k1 - k0 + 1) & ~int64_t(1);
    if (filled < kcp) std::memset(sc.panel + filled * int64_t(vl), 0, size_t((kcp - filled) * int64_t(vl)));
  }
}

// INT4: the K block's nbk blocks of the panel. Per block: c_r = fma(s, dx_r * float(isum_r),
// c_r) (the reference's order), and at the end of a group with stored zero points
// c_r -= xs_r * s * (z - 8).
template <int MR>
RVV_X8_INLINE void x8_tile_int4(vfloat32m4_t& c0, vfloat32m4_t& c1, vfloat32m4_t& c2, vfloat32m4_t& c3, const int8_t* panel,
                         const int8_t* xq, const float* dx, int64_t ldd, int64_t nbk, const float* xs, int64_t ldxs,
                         const float* s, const float* sz, int64_t bpg, size_t vl) {
  int64_t gb = 0, in_group = 0;  // the block's group in the K block, blocks of it done
  for (int64_t bi = 0; bi < nbk; ++bi) {
    const int8_t* w = panel + bi * kX8BlockRows * int64_t(vl);
    const int8_t* x = xq + bi * kX8BlockRows * MR;
    vint16m2_t i0, i1, i2, i3;
    {
      const vint8m1_t v = __riscv_vle8_v_i8m1(w, vl);
#define X8_FIRST(r) i##r = __riscv_vwmul_vx_i16m2(v, x[r], vl)
      X8_ROWS(X8_FIRST);
#undef X8_FIRST
    }
    // Rows 1..31, three per step over rows 1..30 then row 31: a loop step's pointer and
    // branch work is shared by three rows, and each x_q load has an immediate offset.
    const int8_t* wk = w + vl;
    const int8_t* xk = x + MR;
    auto row = [&](const int8_t* wr, const int8_t* xr) {
      const vint8m1_t v = __riscv_vle8_v_i8m1(wr, vl);
#define X8_MACC(r) i##r = __riscv_vwmacc_vx_i16m2(i##r, xr[r], v, vl)
      X8_ROWS(X8_MACC);
#undef X8_MACC
    };
    // Not unrolled further: clang then interleaves the rows' loads across the block and
    // spills the weight rows.
#if defined(__clang__)
#pragma clang loop unroll(disable)
#elif defined(__GNUC__)
#pragma GCC unroll 1
#endif
    for (int k = 1; k + 3 <= kX8BlockRows; k += 3, wk += 3 * vl, xk += 3 * MR) {
      row(wk, xk);
      row(wk + vl, xk + MR);
      row(wk + 2 * vl, xk + 2 * MR);
    }
    row(wk, xk);
    const int64_t gi = gb;
    const vfloat32m4_t sv = __riscv_vle32_v_f32m4(s + gi * int64_t(vl), vl);
    const float* d = dx + bi;
#define X8_STEP(r) \
  c##r = __riscv_vfmacc_vv_f32m4(c##r, sv, __riscv_vfmul_vf_f32m4(__riscv_vfwcvt_f_x_v_f32m4(i##r, vl), d[r * ldd], vl), vl)
    X8_ROWS(X8_STEP);
#undef X8_STEP
    const bool group_end = ++in_group == bpg || bi + 1 == nbk;
    if (sz && group_end) {
      const vfloat32m4_t z = __riscv_vle32_v_f32m4(sz + gi * int64_t(vl), vl);
#define X8_ZERO(r) c##r = __riscv_vfnmsac_vf_f32m4(c##r, xs[r * ldxs + gi], z, vl)
      X8_ROWS(X8_ZERO);
#undef X8_ZERO
    }
    if (group_end) ++gb, in_group = 0;
  }
}

// INT8: K rows [k0, k1), weights read in place (row k of group g at its record's data +
// (k - g * gr) * nb). Two rows of int8 x int8 fill an int16, so each pair is widened into
// the int32 block sum.
template <int MR>
RVV_X8_INLINE void x8_tile_int8(vfloat32m4_t& c0, vfloat32m4_t& c1, vfloat32m4_t& c2, vfloat32m4_t& c3, const uint8_t* blk,
                         int64_t full, int64_t doff, int64_t nb, int64_t gr, int64_t k0, int64_t k1, const int8_t* xq,
                         const float* dx, int64_t ldd, int64_t nbk, const float* s, size_t vl) {
  for (int64_t bi = 0; bi < nbk; ++bi) {
    const int64_t kb = k0 + bi * kX8BlockRows;
    if (kb >= k1) break;
    const int64_t g = kb / gr, rows = k1 - kb < kX8BlockRows ? k1 - kb : kX8BlockRows;
    const int8_t* w = reinterpret_cast<const int8_t*>(blk + g * full + doff) + (kb - g * gr) * nb;
    const int8_t* x = xq + bi * kX8BlockRows * MR;
    vint32m4_t i0, i1, i2, i3;
    int64_t k = 0;
    if (rows >= 2) {
      const vint8m1_t v0 = __riscv_vle8_v_i8m1(w, vl), v1 = __riscv_vle8_v_i8m1(w + nb, vl);
#define X8_FIRST2(r) \
  i##r = __riscv_vwcvt_x_x_v_i32m4(__riscv_vwmacc_vx_i16m2(__riscv_vwmul_vx_i16m2(v0, x[r], vl), x[MR + r], v1, vl), vl)
      X8_ROWS(X8_FIRST2);
#undef X8_FIRST2
      k = 2;
    } else {
      const vint8m1_t v0 = __riscv_vle8_v_i8m1(w, vl);
#define X8_FIRST1(r) i##r = __riscv_vwcvt_x_x_v_i32m4(__riscv_vwmul_vx_i16m2(v0, x[r], vl), vl)
      X8_ROWS(X8_FIRST1);
#undef X8_FIRST1
      k = 1;
    }
    for (; k + 2 <= rows; k += 2) {
      const vint8m1_t v0 = __riscv_vle8_v_i8m1(w + k * nb, vl), v1 = __riscv_vle8_v_i8m1(w + (k + 1) * nb, vl);
      const int8_t* xk = x + k * MR;
#define X8_PAIR(r) \
  i##r = __riscv_vwadd_wv_i32m4(i##r, __riscv_vwmacc_vx_i16m2(__riscv_vwmul_vx_i16m2(v0, xk[r], vl), xk[MR + r], v1, vl), vl)
      X8_ROWS(X8_PAIR);
#undef X8_PAIR
    }
    if (k < rows) {
      const vint8m1_t v0 = __riscv_vle8_v_i8m1(w + k * nb, vl);
      const int8_t* xk = x + k * MR;
#define X8_ONE(r) i##r = __riscv_vwadd_wv_i32m4(i##r, __riscv_vwmul_vx_i16m2(v0, xk[r], vl), vl)
      X8_ROWS(X8_ONE);
#undef X8_ONE
    }
    const vfloat32m4_t sv = __riscv_vle32_v_f32m4(s + (g - k0 / gr) * int64_t(vl), vl);
    const float* d = dx + bi;
#define X8_STEP(r) \
  c##r = __riscv_vfmacc_vv_f32m4(c##r, sv, __riscv_vfmul_vf_f32m4(__riscv_vfcvt_f_x_v_f32m4(i##r, vl), d[r * ldd], vl), vl)
    X8_ROWS(X8_STEP);
#undef X8_STEP
  }
}

// One MR x vl tile over the K block [k0, k1): from the bias (k0 == 0) or the partial sums,
// into Y (k1 == K) or the partial sums.
// The quantized activations of all M rows over all K (sc.xq: tile panels [Kp][rows] from
// row m0 * Kp; sc.dx [M][Kp / 32]; sc.xs [M][G]) were made once per call.
template <int MR, DType kFormat>
inline void x8_tile(const LinearOperands& a, const QuantSpec& q, const X8Geometry& geo, const X8Scratch& sc,
                    const uint8_t* blk, int64_t j, size_t vl, int64_t m0, int64_t n, int64_t k0, int64_t k1,
                    int64_t kcp, float* at, int64_t ldacc) {
  const int64_t gr = geo.gr;
  vfloat32m4_t c0, c1, c2, c3;
#define X8_INIT(r) \
  c##r = k0 == 0 ? bias_m4<Bf16Soft>(a.bias, a.bias_dtype, n, vl) : __riscv_vle32_v_f32m4(at + r * ldacc, vl)
  X8_ROWS(X8_INIT);
#undef X8_INIT
  const int64_t kpad = (a.K + kX8BlockRows - 1) / kX8BlockRows * kX8BlockRows, nblk = kpad / kX8BlockRows;
  const int64_t G = (a.K + gr - 1) / gr, nbk = kcp / kX8BlockRows;
  const int8_t* xq = sc.xq + m0 * kpad + k0 * MR;
  const float* dx = sc.dx + m0 * nblk + k0 / kX8BlockRows;
  if constexpr (is_block_format(kFormat)) {
    x8_tile_block<MR, kFormat>(c0, c1, c2, c3, sc.panel, xq, dx, nblk, nbk, sc.xs + m0 * G + k0 / gr, G, sc.s, sc.sz,
                               vl);
  } else if constexpr (kFormat == DType::kInt4) {
    x8_tile_int4<MR>(c0, c1, c2, c3, sc.panel, xq, dx, nblk, nbk, sc.xs + m0 * G + k0 / gr, G, sc.s,
                     q.zero_points ? sc.sz : nullptr, gr / kX8BlockRows, vl);
  } else {
    x8_tile_int8<MR>(c0, c1, c2, c3, blk + j, quant_group_bytes(q, a.nb, gr), quant_data_offset(q, a.nb), a.nb, gr,
                     k0, k1, xq, dx, nblk, nbk, sc.s, vl);
  }
  if (k1 < a.K) {
#define X8_PARTIAL(r) __riscv_vse32_v_f32m4(at + r * ldacc, c##r, vl)
    X8_ROWS(X8_PARTIAL);
#undef X8_PARTIAL
    return;
  }
#define X8_OUT(r) store_out<Bf16Soft>(a.y, a.y_dtype, (m0 + r) * a.ldy + n, c##r, vl)
  X8_ROWS(X8_OUT);
#undef X8_OUT
}
#undef X8_ROWS
#undef RVV_X8_INLINE

inline int64_t x8_scratch_bytes(const X8Blocking& bk, const X8Geometry& geo, int64_t M, int64_t K, int64_t nb,
                                int64_t vlmax) {
  const int64_t kc = bk.kc < K ? bk.kc : K;
  const int64_t kcp = (kc + kX8BlockRows - 1) / kX8BlockRows * kX8BlockRows;
  const int64_t kpad = (K + kX8BlockRows - 1) / kX8BlockRows * kX8BlockRows, G = (K + geo.gr - 1) / geo.gr;
  const int64_t ngk = (kc + geo.rs - 1) / geo.rs;
  auto al = [](int64_t b) { return (b + 63) & ~int64_t(63); };
  int64_t bytes = al(M * kpad) + al(4 * M * (kpad / kX8BlockRows)) + al(4 * M * G) + 2 * al(4 * ngk * vlmax);
  if (geo.panel) bytes += al(kcp * vlmax);
  if (kc < K) bytes += al(4 * bk.mc * bk.nc_blocks * nb);
  return bytes;
}

// The kernel with explicit block sizes (tests force small ones to reach every boundary).
template <DType kFormat>
inline Status gemm_quant_x8_blocked(const LinearOperands& a, const X8Blocking& bk) {
  constexpr int kMR = x8_tile_rows<kFormat>();
  const int64_t M = a.M, K = a.K, nb = a.nb;
  const QuantSpec q = quant_spec_of(*a.layout);
  const X8Geometry geo = x8_geometry<kFormat>(*a.layout, K, nb);
  const int64_t gr = geo.gr, block_bytes = geo.block_bytes;
  if (!x8_gemm_applies(*a.layout)) return Status::kBadDtype;
  // Inf / NaN cannot be quantized: the whole call takes the fp GEMM.
  for (int64_t m = 0; m < M; ++m)
    if (row_has_nonfinite(a.x + m * a.ldx, K)) return gemm_quant_packed_4xm4<kFormat>(a);
  const int64_t mc = bk.mc, kc = bk.kc < K ? bk.kc : K, ncb = bk.nc_blocks;
  if (mc < 1 || ncb < 1 || kc < 1 || (kc < K && kc % geo.step) || (mc < M && mc % kMR)) return Status::kBadShape;
  const int64_t vlmax = int64_t(__riscv_vsetvlmax_e32m4());
  const int64_t kcp = (kc + kX8BlockRows - 1) / kX8BlockRows * kX8BlockRows;
  const int64_t kpad = (K + kX8BlockRows - 1) / kX8BlockRows * kX8BlockRows;
  const int64_t ngk_max = (kc + geo.rs - 1) / geo.rs, ldacc = ncb * nb;
  const int64_t bytes = x8_scratch_bytes(bk, geo, M, K, nb, vlmax);
  F32Scratch<256> scratch;
  const int64_t floats = (bytes + 64) / 4 + 16;
  float* buf = scratch.get(a.scratch && a.scratch_floats >= floats ? a.scratch : nullptr, floats);
  if (!buf) return Status::kNoMemory;
  uint8_t* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf) + 63) & ~uintptr_t(63));
  auto take = [&](int64_t b) {
    uint8_t* r = p;
    p += (b + 63) & ~int64_t(63);
    return r;
  };
  X8Scratch sc;
  sc.xq = reinterpret_cast<int8_t*>(take(M * kpad));
  sc.dx = reinterpret_cast<float*>(take(4 * M * (kpad / kX8BlockRows)));
  sc.xs = reinterpret_cast<float*>(take(4 * M * ((K + gr - 1) / gr)));
  sc.s = reinterpret_cast<float*>(take(4 * ngk_max * vlmax));
  sc.sz = reinterpret_cast<float*>(take(4 * ngk_max * vlmax));
  sc.panel = geo.panel ? reinterpret_cast<int8_t*>(take(kcp * vlmax)) : nullptr;
  sc.acc = kc < K ? reinterpret_cast<float*>(take(4 * mc * ldacc)) : nullptr;
  x8_quantize_block<kMR>(a, 0, M, 0, K, kpad, gr, geo.group_sums, sc);
  const uint8_t* base = static_cast<const uint8_t*>(a.w);
  for (int64_t bg = a.block_begin; bg < a.block_end; bg += ncb) {
    const int64_t bg_end = bg + ncb < a.block_end ? bg + ncb : a.block_end;
    for (int64_t mb = 0; mb < M; mb += mc) {
      const int64_t mb_end = mb + mc < M ? mb + mc : M;
      for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t k1 = k0 + kc < K ? k0 + kc : K;
        const int64_t kp = (k1 - k0 + kX8BlockRows - 1) / kX8BlockRows * kX8BlockRows;
        for (int64_t b = bg; b < bg_end; ++b) {
          const int64_t n0 = b * nb, cols = a.N - n0 < nb ? a.N - n0 : nb;
          const uint8_t* blk = base + b * block_bytes;
          for (int64_t j = 0; j < cols;) {
            const size_t vl = __riscv_vsetvl_e32m4(size_t(cols - j));
            if constexpr (is_block_format(kFormat))
              x8_prepare_block_chunk<kFormat>(blk, nb, j, vl, k0, k1, sc.panel, sc.s, sc.sz);
            else
              x8_prepare_chunk<kFormat>(a, q, blk, j, vl, k0, k1, kp, gr, sc);
            for (int64_t m0 = mb; m0 < mb_end; m0 += kMR) {
              float* at = sc.acc ? sc.acc + (m0 - mb) * ldacc + (b - bg) * nb + j : nullptr;
              const int64_t rows = mb_end - m0 < kMR ? mb_end - m0 : kMR;
              if (rows >= kMR)
                x8_tile<kMR, kFormat>(a, q, geo, sc, blk, j, vl, m0, n0 + j, k0, k1, kp, at, ldacc);
              else if (kMR > 3 && rows == 3)
                x8_tile<3, kFormat>(a, q, geo, sc, blk, j, vl, m0, n0 + j, k0, k1, kp, at, ldacc);
              else if (rows == 2)
                x8_tile<2, kFormat>(a, q, geo, sc, blk, j, vl, m0, n0 + j, k0, k1, kp, at, ldacc);
              else
                x8_tile<1, kFormat>(a, q, geo, sc, blk, j, vl, m0, n0 + j, k0, k1, kp, at, ldacc);
            }
            j += int64_t(vl);
          }
        }
      }
    }
  }
  return Status::kOk;
}

template <DType kFormat>
inline Status gemm_quant_x8_packed(const LinearOperands& a) {
  const X8Geometry geo = x8_geometry<kFormat>(*a.layout, a.K, a.nb);
  return gemm_quant_x8_blocked<kFormat>(
      a, x8_gemm_blocking(a.M, a.K, a.nb, geo.step, geo.panel, x8_tile_rows<kFormat>(),
                          int64_t(__riscv_vsetvlmax_e32m4())));
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
