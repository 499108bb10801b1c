// BF16 <-> FP32 on vectors, as two interchangeable policies the kernels are templated on:
//   Bf16Soft     any RVV 1.0 CPU (the K1 has no BF16 hardware)
//   Bf16Zvfbfmin CPUs with Zvfbfmin (only declared when the TU is compiled with it)
// Both give bit-identical results for non-NaN values; NaN stays a quiet NaN in both.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

struct Bf16Soft {
  // A bf16 is the top half of an f32: zero-extend to 32 bits, shift left by 16 and
  // reinterpret. Exact; 2 instructions after the load. (A widening multiply by 65536 would
  // be one, but .vx operands are SEW wide, so 65536 does not fit in e16.)
  static vfloat32m2_t widen(vuint16m1_t h, size_t vl) {
    return __riscv_vreinterpret_v_u32m2_f32m2(__riscv_vsll_vx_u32m2(__riscv_vzext_vf2_u32m2(h, vl), 16, vl));
  }
  static vfloat32m4_t widen(vuint16m2_t h, size_t vl) {
    return __riscv_vreinterpret_v_u32m4_f32m4(__riscv_vsll_vx_u32m4(__riscv_vzext_vf2_u32m4(h, vl), 16, vl));
  }
  static vfloat32m8_t widen(vuint16m4_t h, size_t vl) {
    return __riscv_vreinterpret_v_u32m8_f32m8(__riscv_vsll_vx_u32m8(__riscv_vzext_vf2_u32m8(h, vl), 16, vl));
  }
  static vfloat32m4_t load_m4(const uint16_t* p, size_t vl) { return widen(__riscv_vle16_v_u16m2(p, vl), vl); }
  static vfloat32m8_t load_m8(const uint16_t* p, size_t vl) { return widen(__riscv_vle16_v_u16m4(p, vl), vl); }

  // Round to nearest even by the same carry trick as the scalar f32_to_bf16 (bf16.h);
  // NaN lanes skip the carry (it could make them Inf or flip the sign) and get the quiet
  // bit instead, via a masked OR that leaves the other lanes as rounded.
  static vuint16m1_t narrow(vfloat32m2_t v, size_t vl) {
    const vuint32m2_t u = __riscv_vreinterpret_v_f32m2_u32m2(v);
    const vuint32m2_t lsb = __riscv_vand_vx_u32m2(__riscv_vsrl_vx_u32m2(u, 16, vl), 1, vl);
    vuint32m2_t r = __riscv_vadd_vv_u32m2(__riscv_vadd_vx_u32m2(u, 0x7FFFu, vl), lsb, vl);
    const vbool16_t nan = __riscv_vmfne_vv_f32m2_b16(v, v, vl);
    r = __riscv_vor_vx_u32m2_mu(nan, r, u, 0x00400000u, vl);
    return __riscv_vnsrl_wx_u16m1(r, 16, vl);
  }
  static vuint16m2_t narrow(vfloat32m4_t v, size_t vl) {
    const vuint32m4_t u = __riscv_vreinterpret_v_f32m4_u32m4(v);
    const vuint32m4_t lsb = __riscv_vand_vx_u32m4(__riscv_vsrl_vx_u32m4(u, 16, vl), 1, vl);
    vuint32m4_t r = __riscv_vadd_vv_u32m4(__riscv_vadd_vx_u32m4(u, 0x7FFFu, vl), lsb, vl);
    const vbool8_t nan = __riscv_vmfne_vv_f32m4_b8(v, v, vl);
    r = __riscv_vor_vx_u32m4_mu(nan, r, u, 0x00400000u, vl);
    return __riscv_vnsrl_wx_u16m2(r, 16, vl);
  }
  static vuint16m4_t narrow(vfloat32m8_t v, size_t vl) {
    const vuint32m8_t u = __riscv_vreinterpret_v_f32m8_u32m8(v);
    const vuint32m8_t lsb = __riscv_vand_vx_u32m8(__riscv_vsrl_vx_u32m8(u, 16, vl), 1, vl);
    vuint32m8_t r = __riscv_vadd_vv_u32m8(__riscv_vadd_vx_u32m8(u, 0x7FFFu, vl), lsb, vl);
    const vbool4_t nan = __riscv_vmfne_vv_f32m8_b4(v, v, vl);
    r = __riscv_vor_vx_u32m8_mu(nan, r, u, 0x00400000u, vl);
    return __riscv_vnsrl_wx_u16m4(r, 16, vl);
  }
};

#if RVV_INDUCTOR_HAS_ZVFBFMIN
struct Bf16Zvfbfmin {
  // One vfwcvtbf16 replaces vzext + vsll.
  static vfloat32m4_t widen(vuint16m2_t h, size_t vl) {
    return __riscv_vfwcvtbf16_f_f_v_f32m4(__riscv_vreinterpret_v_u16m2_bf16m2(h), vl);
  }
  static vfloat32m8_t widen(vuint16m4_t h, size_t vl) {
    return __riscv_vfwcvtbf16_f_f_v_f32m8(__riscv_vreinterpret_v_u16m4_bf16m4(h), vl);
  }
  static vfloat32m4_t load_m4(const uint16_t* p, size_t vl) { return widen(__riscv_vle16_v_u16m2(p, vl), vl); }
  static vfloat32m8_t load_m8(const uint16_t* p, size_t vl) { return widen(__riscv_vle16_v_u16m4(p, vl), vl); }
  // vfncvtbf16 rounds with the dynamic rounding mode, round-to-nearest-even unless a
  // caller changed frm; NaN becomes the canonical quiet NaN 0x7FC0.
  static vuint16m2_t narrow(vfloat32m4_t v, size_t vl) {
    return __riscv_vreinterpret_v_bf16m2_u16m2(__riscv_vfncvtbf16_f_f_w_bf16m2(v, vl));
  }
  static vuint16m4_t narrow(vfloat32m8_t v, size_t vl) {
    return __riscv_vreinterpret_v_bf16m4_u16m4(__riscv_vfncvtbf16_f_f_w_bf16m4(v, vl));
  }
};
#endif

// Whole-array conversions (the x row of a GEMV, test and C ABI helpers).
template <class Ops>
inline void widen_bf16_row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n;) {
    const size_t vl = __riscv_vsetvl_e32m8(size_t(n - i));
    __riscv_vse32_v_f32m8(dst + i, Ops::load_m8(src + i, vl), vl);
    i += int64_t(vl);
  }
}

template <class Ops>
inline void narrow_f32_row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n;) {
    const size_t vl = __riscv_vsetvl_e32m8(size_t(n - i));
    __riscv_vse16_v_u16m4(dst + i, Ops::narrow(__riscv_vle32_v_f32m8(src + i, vl), vl), vl);
    i += int64_t(vl);
  }
}

// c10::BFloat16's own conversions, lane for lane, for Inductor's generated code
// (inductor_vec_math.h), where they must equal the scalar static_casts bit for bit:
// widening is exact; narrowing rounds to nearest even and turns every NaN into ATen's
// canonical 0x7FC0 (round_to_nearest_even), not the payload-keeping quiet NaN of narrow().
// Generated code converts one Vectorized at a time (8-16 lanes), so these run at LMUL 2
// (16 f32 at VLEN 256): an LMUL-8 group would cost 4x the datapath beats for the same
// lanes on an in-order core that issues by register group.
inline void bf16_to_f32_aten(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n;) {
    const size_t vl = __riscv_vsetvl_e32m2(n - i);
    __riscv_vse32_v_f32m2(dst + i, Bf16Soft::widen(__riscv_vle16_v_u16m1(src + i, vl), vl), vl);
    i += vl;
  }
}

inline void f32_to_bf16_aten(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n;) {
    const size_t vl = __riscv_vsetvl_e32m2(n - i);
    const vfloat32m2_t v = __riscv_vle32_v_f32m2(src + i, vl);
    const vbool16_t nan = __riscv_vmfne_vv_f32m2_b16(v, v, vl);
    __riscv_vse16_v_u16m1(dst + i, __riscv_vmerge_vxm_u16m1(Bf16Soft::narrow(v, vl), 0x7FC0, nan, vl), vl);
    i += vl;
  }
}

}  // namespace rvv
RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
