// The register tile shared by the packed GEMM and the Inductor micro-kernel:
// C[MR, vl] = init + A[MR, K] * B[K, vl], with A already fp32 in [k][MR] order and B bf16
// rows of stride ldb, vl <= VLMAX(e32, m4) columns.
//
// Why 6 x m4: per k the tile does 1 vle16 + 2 widen (vzext, vsll) + 6 flw + 6 vfmacc.vf,
// plus 3 scalar loop instructions (one pointer bump each for A and B, one branch): 18
// instructions for 6 * VLMAX multiply-adds. With VLMAX = vlenb e32 elements at m4 that is
// 18 / 192 = 0.094 instructions per multiply-add at VLEN 256 (0.19 at 128, 0.047 at 512).
// Registers: 6 accumulators x 4 + 4 for the widened row + 2 for the loaded bf16 row = 30
// of 32, no spills. LMUL 8 would allow only 3 rows (24 + 8 > 32 once the load is added)
// and one more row at m4 (7 x 4 + 4 + 2 = 34) would spill.
// RVV types are sizeless (no arrays, no struct members), so the rows are named variables
// and `if constexpr` on MR drops the unused ones; MR < 6 covers the tails in M.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/rvv/bf16_widen.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

constexpr int kGemmMR = 6;

// B rows already widened to fp32 (a panel that several tiles share): the tile's "Ops" for
// them is a plain vle32. gemm_bf16_tile_m4<MR, F32Rows> over a panel does 1 vle32 (8 beats
// at VLEN 256) per k instead of vle16 + vzext + vsll (4 + 8 + 8): the widening is paid
// once per panel, not once per 6-row tile.
struct F32Rows {
  static vfloat32m4_t load_m4(const float* p, size_t vl) { return __riscv_vle32_v_f32m4(p, vl); }
};

// A bf16 B chunk is widened into an fp32 panel shared by the tiles when there are at least
// this many tiles: per K row the panel costs one vle32 per tile plus one widen + vse32,
// against a vle16 + 2 widens per tile (20 beats at VLEN 256 vs 8 + 28 / tiles), and the
// library GEMM's partial sums pass through memory between K blocks. Counted (q_proj,
// VLEN 256, one thread): M = 16 (3 tiles) 2.36 -> 2.33 multiply-adds per cycle, M = 64
// 2.42 -> 2.67; so from 4 tiles (M > 18).
constexpr int kGemmPanelMinTiles = 4;
// Floats of one panel (16 KB, in L1 with the A panels): K rows per panel = this / vl.
constexpr int64_t kGemmPanelFloats = 4096;

inline int64_t gemm_panel_rows(size_t vlmax) {
  const int64_t r = kGemmPanelFloats / int64_t(vlmax);
  return r > 0 ? r : 1;
}

// Widens rows [0, kc) x columns [0, vl) of bf16 B (row stride ldb) into out[k * vl + j].
template <class Ops>
inline void widen_b_panel(const uint16_t* b, int64_t ldb, int64_t kc, size_t vl, float* out) {
  for (int64_t k = 0; k < kc; ++k, b += ldb, out += vl) __riscv_vse32_v_f32m4(out, Ops::load_m4(b, vl), vl);
}

// init(r) gives row r's starting accumulator, store(r, acc) consumes the result. B is bf16
// (Ops: Bf16Soft / Bf16Zvfbfmin) or an fp32 panel (Ops = F32Rows, BT = float).
template <int MR, class Ops, class Init, class Store, class BT>
inline void gemm_bf16_tile_m4(const float* ap, const BT* b, int64_t ldb, int64_t K, size_t vl, const Init& init,
                              const Store& store) {
  static_assert(MR >= 1 && MR <= kGemmMR, "tile rows");
  vfloat32m4_t c0 = init(0);
  vfloat32m4_t c1 = MR > 1 ? init(1) : c0;
  vfloat32m4_t c2 = MR > 2 ? init(2) : c0;
  vfloat32m4_t c3 = MR > 3 ? init(3) : c0;
  vfloat32m4_t c4 = MR > 4 ? init(4) : c0;
  vfloat32m4_t c5 = MR > 5 ? init(5) : c0;
  // Every loaded and widened B row updates all MR accumulators.
  auto fma_rows = [&](vfloat32m4_t w, const float* a) {
    c0 = __riscv_vfmacc_vf_f32m4(c0, a[0], w, vl);
    if constexpr (MR > 1) c1 = __riscv_vfmacc_vf_f32m4(c1, a[1], w, vl);
    if constexpr (MR > 2) c2 = __riscv_vfmacc_vf_f32m4(c2, a[2], w, vl);
    if constexpr (MR > 3) c3 = __riscv_vfmacc_vf_f32m4(c3, a[3], w, vl);
    if constexpr (MR > 4) c4 = __riscv_vfmacc_vf_f32m4(c4, a[4], w, vl);
    if constexpr (MR > 5) c5 = __riscv_vfmacc_vf_f32m4(c5, a[5], w, vl);
  };
  // Not unrolled: GCC hoists the second row's load and widen above the first row's
  // multiply-adds, needs 6 more registers and spills an accumulator at MR = 6.
  for (int64_t k = 0; k < K; ++k, ap += MR, b += ldb) fma_rows(Ops::load_m4(b, vl), ap);
  store(0, c0);
  if constexpr (MR > 1) store(1, c1);
  if constexpr (MR > 2) store(2, c2);
  if constexpr (MR > 3) store(3, c3);
  if constexpr (MR > 4) store(4, c4);
  if constexpr (MR > 5) store(5, c5);
}

// Runs the tile with MR = rows (1..6) chosen at run time.
template <class Ops, class Init, class Store, class BT>
inline void gemm_bf16_tile_m4_rows(int rows, const float* ap, const BT* b, int64_t ldb, int64_t K, size_t vl,
                                   const Init& init, const Store& store) {
  switch (rows) {
    case 6: gemm_bf16_tile_m4<6, Ops>(ap, b, ldb, K, vl, init, store); break;
    case 5: gemm_bf16_tile_m4<5, Ops>(ap, b, ldb, K, vl, init, store); break;
    case 4: gemm_bf16_tile_m4<4, Ops>(ap, b, ldb, K, vl, init, store); break;
    case 3: gemm_bf16_tile_m4<3, Ops>(ap, b, ldb, K, vl, init, store); break;
    case 2: gemm_bf16_tile_m4<2, Ops>(ap, b, ldb, K, vl, init, store); break;
    default: gemm_bf16_tile_m4<1, Ops>(ap, b, ldb, K, vl, init, store); break;
  }
}

// Converts rows [0, rows) x columns [k0, k0 + kc) of bf16 A (row stride lda) to fp32 in
// the tile's [k][rows] order, with a strided store per row. Costs ~4 instructions per
// VLMAX elements, negligible next to the rows * kc * N multiply-adds that reuse it.
template <class Ops>
inline void pack_a_panel_f32(const uint16_t* A, int64_t lda, int rows, int64_t k0, int64_t kc, float* out) {
  const ptrdiff_t stride = ptrdiff_t(rows) * ptrdiff_t(sizeof(float));
  for (int r = 0; r < rows; ++r) {
    const uint16_t* src = A + r * lda + k0;
    for (int64_t k = 0; k < kc;) {
      const size_t vl = __riscv_vsetvl_e32m8(size_t(kc - k));
      __riscv_vsse32_v_f32m8(out + k * rows + r, stride, Ops::load_m8(src + k, vl), vl);
      k += int64_t(vl);
    }
  }
}

// All M rows of A as fp32 panels of mr rows (the last one shorter): the panel of row m0
// lives at out + m0 * K, [k][rows] as pack_a_panel_f32 writes it.
template <class Ops>
inline void pack_a_panels_f32(const uint16_t* A, int64_t lda, int64_t M, int64_t K, int mr, float* out) {
  for (int64_t m0 = 0; m0 < M; m0 += mr) {
    const int rows = int(M - m0 < mr ? M - m0 : mr);
    pack_a_panel_f32<Ops>(A + m0 * lda, lda, rows, 0, K, out + m0 * K);
  }
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
