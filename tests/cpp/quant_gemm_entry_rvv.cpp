// Compiled with -march=rv64gcv: the INT8/INT4 and GGUF block-format GEMM with block sizes chosen by the test, so
// small problems cross every row, K and column block boundary (quant_test.cpp), and the entry Inductor's generated
// code calls (block_quant_test.cpp).
#include <type_traits>

#include "quant_gemm_entries.h"
#include "rvv_inductor/rvv/gemm_quant_packed.h"
#include "rvv_inductor/rvv/gemm_quant_x8_packed.h"
#include "rvv_inductor/rvv/inductor_quant_linear.h"

#if !RVV_INDUCTOR_HAS_RVV
#error "compile with -march=rv64gcv"
#endif

namespace ri = rvv_inductor;

namespace {

template <ri::DType F>
using Format = std::integral_constant<ri::DType, F>;

// fn(Format<f>{}) for the weight format of a layout; `other` for a format no kernel takes.
template <class Fn, class R>
R on_format(const ri::PackedLayout& l, const Fn& fn, R other) {
  switch (ri::DType(l.dtype)) {
    case ri::DType::kInt4: return fn(Format<ri::DType::kInt4>{});
    case ri::DType::kInt8: return fn(Format<ri::DType::kInt8>{});
    case ri::DType::kQ4_1: return fn(Format<ri::DType::kQ4_1>{});
    case ri::DType::kQ5_0: return fn(Format<ri::DType::kQ5_0>{});
    case ri::DType::kQ5_1: return fn(Format<ri::DType::kQ5_1>{});
    case ri::DType::kIQ4_NL: return fn(Format<ri::DType::kIQ4_NL>{});
    case ri::DType::kIQ4_XS: return fn(Format<ri::DType::kIQ4_XS>{});
    case ri::DType::kQ2_K: return fn(Format<ri::DType::kQ2_K>{});
    case ri::DType::kQ3_K: return fn(Format<ri::DType::kQ3_K>{});
    case ri::DType::kQ4_K: return fn(Format<ri::DType::kQ4_K>{});
    case ri::DType::kQ5_K: return fn(Format<ri::DType::kQ5_K>{});
    case ri::DType::kQ6_K: return fn(Format<ri::DType::kQ6_K>{});
    default: return other;
  }
}

}  // namespace

ri::Status quant_gemm_entry_rvv(const ri::LinearOperands& a, int64_t mc, int64_t kc, int64_t nc_blocks) {
  const ri::rvv::QuantGemmBlocking bk{mc, kc, nc_blocks};
  return on_format(
      *a.layout, [&](auto f) { return ri::rvv::gemm_quant_packed_blocked<decltype(f)::value>(a, bk); },
      ri::Status::kBadDtype);
}

void quant_gemm_default_blocking_rvv(int64_t M, int64_t K, int64_t nb, int64_t group_rows, int weight_bits,
                                     int64_t* mc, int64_t* kc, int64_t* nc_blocks) {
  const ri::rvv::QuantGemmBlocking bk = ri::rvv::quant_gemm_blocking(M, K, nb, group_rows, weight_bits);
  *mc = bk.mc, *kc = bk.kc, *nc_blocks = bk.nc_blocks;
}

ri::Status quant_x8_gemm_entry_rvv(const ri::LinearOperands& a, int64_t mc, int64_t kc, int64_t nc_blocks) {
  const ri::rvv::X8Blocking bk{mc, kc, nc_blocks};
  return on_format(
      *a.layout, [&](auto f) { return ri::rvv::gemm_quant_x8_blocked<decltype(f)::value>(a, bk); },
      ri::Status::kBadDtype);
}

void quant_x8_default_blocking_rvv(const ri::LinearOperands& a, int64_t* mc, int64_t* kc, int64_t* nc_blocks,
                                   int64_t* kc_step, int64_t* tile_rows, int64_t* vlmax) {
  *vlmax = int64_t(__riscv_vsetvlmax_e32m4());
  const bool known = on_format(
      *a.layout,
      [&](auto f) {
        constexpr ri::DType F = decltype(f)::value;
        const ri::rvv::X8Geometry geo = ri::rvv::x8_geometry<F>(*a.layout, a.K, a.nb);
        *tile_rows = ri::rvv::x8_tile_rows<F>();
        *kc_step = geo.step;
        const ri::rvv::X8Blocking bk =
            ri::rvv::x8_gemm_blocking(a.M, a.K, a.nb, geo.step, geo.panel, int(*tile_rows), *vlmax);
        *mc = bk.mc, *kc = bk.kc, *nc_blocks = bk.nc_blocks;
        return true;
      },
      false);
  if (!known) *mc = *kc = *nc_blocks = *kc_step = *tile_rows = 0;
}

static_assert(kEntryQuantGemm == ri::kQuantGemm && kEntryQuantGemv == ri::kQuantGemv &&
              kEntryQuantGemmX8 == ri::kQuantGemmX8);

ri::Status inductor_quant_entry_rvv(int32_t format, int kernel, const uint16_t* x, int64_t ldx, int64_t M, int64_t N,
                                    int64_t K, const uint8_t* w, int32_t group_size, int32_t scale_dtype,
                                    int32_t zero_points, int64_t nb, int64_t bytes, const uint16_t* bias, uint16_t* y,
                                    int64_t ldy, int nthreads, char* err, size_t err_len) {
  ri::PackedLayout l{};
  l.dtype = format;
  return on_format(
      l,
      [&](auto f) {
        constexpr ri::DType F = decltype(f)::value;
        auto call = [&](auto k) {
          return ri::linear_quant_inductor<F, decltype(k)::value>(x, ldx, M, N, K, w, group_size, scale_dtype,
                                                                   zero_points, nb, bytes, bias, y, ldy, nthreads, err,
                                                                   err_len);
        };
        switch (kernel) {
          case ri::kQuantGemv: return call(std::integral_constant<int, ri::kQuantGemv>{});
          case ri::kQuantGemm: return call(std::integral_constant<int, ri::kQuantGemm>{});
          case ri::kQuantGemmX8: return call(std::integral_constant<int, ri::kQuantGemmX8>{});
          default: return ri::Status::kBadDtype;
        }
      },
      ri::Status::kBadDtype);
}
