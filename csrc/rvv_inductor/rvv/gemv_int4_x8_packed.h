// Decode GEMV with a packed INT4 weight and dynamically quantized INT8 activations
// (opt-in: LinearOperands::x_int8), the integer path llama.cpp's Q4_0 x Q8_0 dot product
// takes.
//
// Kernel gemv_int4_x8_packed_1xm8: x is cut into blocks of 16 along K; each block gets
// dx = max|x| / 127 and x_q = rne(x / dx) in [-127, 127]. Per pair of K rows the inner
// loop is one byte load, vand / vsrl for the two nibbles and two vwmaccsu.vx (int8 x_q
// times uint8 q, summed in int16), all at SEW 8: no vtype change and no float conversion
// per row. 16 rows of |x_q * q| <= 127 * 15 sum to at most 30480, inside int16. At the end
// of a block the int16 sums are widened to fp32 (vfwcvt, exact) and added times dx into the
// group sum; at the end of a group the scale and zero point are applied as in the fp
// kernels (gemv_quant_packed.h), with the group's sum of dequantized x_q.
//
// Cost at VLEN 256, DLEN 128, per 128 weights: 28 datapath beats in the loop (vle8, vand,
// vsrl at m2: 4 each; two vwmaccsu into int16 m4: 8 each) against 60 for the fp16 path.
//
// Accuracy: only the activations are approximated: |x - x_q * dx| <= dx / 2 (plus fp32
// rounding of dx), so |y - y_exact| <= sum_k |w_k| * dx_block(k) / 2 + the fp32 bound.
// With 16-element blocks that is about 2^-8 of the block's max|x| per element, similar
// to rounding x to bf16 again, but correlated; it is not the fp32 bound of the other
// paths, hence opt-in.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/quant_packing.h"
#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/epilogue.h"
#include "rvv_inductor/rvv/gemv_quant_packed.h"
#include "rvv_inductor/scratch.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

constexpr int64_t kX8Block = 16;

// Scratch floats for K activations and G groups: fp32 x (K), x_q bytes ((K + 2) / 4 + 1),
// block scales (K / 16 + 1), group sums (G).
inline int64_t x8_scratch_floats(int64_t K, int64_t G) { return K + (K + 2) / 4 + 1 + K / kX8Block + 1 + G; }

struct X8Row {
  const int8_t* xq;         // K + 1 values (x_q[K] = 0)
  const float* dx;          // per 16-block
  const float* group_sums;  // per weight group: sum over the group of x_q * dx
};

// x must be finite (the caller checks).
inline X8Row prepare_x8(const uint16_t* xb, int64_t K, int64_t gr, int64_t G, float* scratch) {
  float* xf = scratch;
  int8_t* xq = reinterpret_cast<int8_t*>(scratch + K);
  float* dx = scratch + K + (K + 2) / 4 + 1;
  float* sums = dx + K / kX8Block + 1;
  widen_bf16_row<Bf16Soft>(xb, xf, K);
  const int64_t nblk = (K + kX8Block - 1) / kX8Block;
  const vfloat32m1_t fzero = __riscv_vfmv_s_f_f32m1(0.0f, 1);
  const vint32m1_t izero = __riscv_vmv_s_x_i32m1(0, 1);
  for (int64_t g = 0; g < G; ++g) sums[g] = 0.0f;
  for (int64_t b = 0; b < nblk; ++b) {
    const int64_t k0 = b * kX8Block;
    const size_t vl = __riscv_vsetvl_e32m4(size_t(K - k0 < kX8Block ? K - k0 : kX8Block));
    const vfloat32m4_t v = __riscv_vle32_v_f32m4(xf + k0, vl);
    const float amax =
        __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredmax_vs_f32m4_f32m1(__riscv_vfabs_v_f32m4(v, vl), fzero, vl));
    const float d = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    dx[b] = d;
    // fp32 -> int16 rounds to nearest even (frm), then int16 -> int8 (in range by construction).
    const vint16m2_t q16 = __riscv_vfncvt_x_f_w_i16m2(__riscv_vfmul_vf_f32m4(v, inv, vl), vl);
    __riscv_vse8_v_i8m1(xq + k0, __riscv_vncvt_x_x_w_i8m1(q16, vl), vl);
    const int32_t qs = __riscv_vmv_x_s_i32m1_i32(__riscv_vwredsum_vs_i16m2_i32m1(q16, izero, vl));
    // Blocks never straddle groups: group sizes are multiples of 16 (checked by the caller).
    sums[k0 / gr] += float(qs) * d;
  }
  xq[K] = 0;
  return X8Row{xq, dx, sums};
}

inline void gemv_int4_x8_row(const LinearOperands& a, const X8Row& xr, void* y) {
  const int64_t nb = a.nb;
  quant_gemv_row<DType::kInt4>(a, xr.group_sums, 1.0f, y, [&](const uint8_t* d, int64_t k0, int64_t rows, size_t vl) {
    // One 16-row block of x_q against the packed nibbles, widened to fp32 (exact).
    auto block = [&](int64_t r0) {
      const int64_t brows = rows - r0 < kX8Block ? rows - r0 : kX8Block;
      const int8_t* x = xr.xq + k0 + r0;
      const uint8_t* w = d + (r0 / 2) * nb;
      vint16m4_t s16 = __riscv_vmv_v_x_i16m4(0, vl);
      // An odd last row pairs with x_q[K] = 0; its high nibble is 0 too.
      for (int64_t p = 0; p < (brows + 1) / 2; ++p, w += nb, x += 2) {
        const vuint8m2_t v = __riscv_vle8_v_u8m2(w, vl);
        s16 = __riscv_vwmaccsu_vx_i16m4(s16, x[0], __riscv_vand_vx_u8m2(v, 0x0F, vl), vl);
        s16 = __riscv_vwmaccsu_vx_i16m4(s16, x[1], __riscv_vsrl_vx_u8m2(v, 4, vl), vl);
      }
      return __riscv_vfwcvt_f_x_v_f32m8(s16, vl);
    };
    vfloat32m8_t gs = __riscv_vfmul_vf_f32m8(block(0), xr.dx[k0 / kX8Block], vl);
    for (int64_t r0 = kX8Block; r0 < rows; r0 += kX8Block)
      gs = __riscv_vfmacc_vf_f32m8(gs, xr.dx[(k0 + r0) / kX8Block], block(r0), vl);
    return gs;
  });
}

// Needs group sizes that are multiples of 16 (the dispatcher falls back to the fp kernels
// otherwise). Inf and NaN cannot be carried by int8: such rows take the scalar reference.
inline Status gemv_int4_x8_packed_1xm8(const LinearOperands& a) {
  const QuantSpec q = quant_spec_of(*a.layout);
  const int64_t gr = quant_group_rows(q, a.K), G = quant_num_groups(q, a.K);
  return quant_gemv_rows(a, x8_scratch_floats(a.K, G), true, [&](const uint16_t* xb, float* s, void* y) {
    gemv_int4_x8_row(a, prepare_x8(xb, a.K, gr, G, s), y);
  });
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
