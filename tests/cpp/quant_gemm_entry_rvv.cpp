// Compiled with -march=rv64gcv: the INT8/INT4 and GGUF block-format GEMM with block sizes chosen by the test, so
// small problems cross every row, K and column block boundary (quant_test.cpp).
#include "quant_gemm_entries.h"
#include "rvv_inductor/rvv/gemm_quant_packed.h"
#include "rvv_inductor/rvv/gemm_quant_x8_packed.h"

#if !RVV_INDUCTOR_HAS_RVV
#error "compile with -march=rv64gcv"
#endif

namespace ri = rvv_inductor;

ri::Status quant_gemm_entry_rvv(const ri::LinearOperands& a, int64_t mc, int64_t kc, int64_t nc_blocks) {
  const ri::rvv::QuantGemmBlocking bk{mc, kc, nc_blocks};
  switch (ri::DType(a.layout->dtype)) {
    case ri::DType::kInt4: return ri::rvv::gemm_quant_packed_blocked<ri::DType::kInt4>(a, bk);
    case ri::DType::kInt8: return ri::rvv::gemm_quant_packed_blocked<ri::DType::kInt8>(a, bk);
    case ri::DType::kQ4_1: return ri::rvv::gemm_quant_packed_blocked<ri::DType::kQ4_1>(a, bk);
    case ri::DType::kQ4_K: return ri::rvv::gemm_quant_packed_blocked<ri::DType::kQ4_K>(a, bk);
    case ri::DType::kQ5_K: return ri::rvv::gemm_quant_packed_blocked<ri::DType::kQ5_K>(a, bk);
    case ri::DType::kQ6_K: return ri::rvv::gemm_quant_packed_blocked<ri::DType::kQ6_K>(a, bk);
    default: return ri::Status::kBadDtype;
  }
}

void quant_gemm_default_blocking_rvv(int64_t M, int64_t K, int64_t nb, int64_t group_rows, int weight_bits,
                                     int64_t* mc, int64_t* kc, int64_t* nc_blocks) {
  const ri::rvv::QuantGemmBlocking bk = ri::rvv::quant_gemm_blocking(M, K, nb, group_rows, weight_bits);
  *mc = bk.mc, *kc = bk.kc, *nc_blocks = bk.nc_blocks;
}

ri::Status quant_x8_gemm_entry_rvv(const ri::LinearOperands& a, int64_t mc, int64_t kc, int64_t nc_blocks) {
  const ri::rvv::X8Blocking bk{mc, kc, nc_blocks};
  switch (ri::DType(a.layout->dtype)) {
    case ri::DType::kInt4: return ri::rvv::gemm_quant_x8_blocked<ri::DType::kInt4>(a, bk);
    case ri::DType::kInt8: return ri::rvv::gemm_quant_x8_blocked<ri::DType::kInt8>(a, bk);
    case ri::DType::kQ4_1: return ri::rvv::gemm_quant_x8_blocked<ri::DType::kQ4_1>(a, bk);
    case ri::DType::kQ4_K: return ri::rvv::gemm_quant_x8_blocked<ri::DType::kQ4_K>(a, bk);
    case ri::DType::kQ5_K: return ri::rvv::gemm_quant_x8_blocked<ri::DType::kQ5_K>(a, bk);
    case ri::DType::kQ6_K: return ri::rvv::gemm_quant_x8_blocked<ri::DType::kQ6_K>(a, bk);
    default: return ri::Status::kBadDtype;
  }
}

template <ri::DType F>
static void x8_default_blocking(const ri::LinearOperands& a, int64_t* mc, int64_t* kc, int64_t* nc_blocks,
                                int64_t* kc_step, int64_t* tile_rows, int64_t* vlmax) {
  const ri::rvv::X8Geometry geo = ri::rvv::x8_geometry<F>(*a.layout, a.K, a.nb);
  *tile_rows = ri::rvv::x8_tile_rows<F>();
  *kc_step = geo.step;
  *vlmax = int64_t(__riscv_vsetvlmax_e32m4());
  const ri::rvv::X8Blocking bk = ri::rvv::x8_gemm_blocking(a.M, a.K, a.nb, geo.step, geo.panel, int(*tile_rows), *vlmax);
  *mc = bk.mc, *kc = bk.kc, *nc_blocks = bk.nc_blocks;
}

void quant_x8_default_blocking_rvv(const ri::LinearOperands& a, int64_t* mc, int64_t* kc, int64_t* nc_blocks,
                                   int64_t* kc_step, int64_t* tile_rows, int64_t* vlmax) {
  switch (ri::DType(a.layout->dtype)) {
    case ri::DType::kInt4: return x8_default_blocking<ri::DType::kInt4>(a, mc, kc, nc_blocks, kc_step, tile_rows, vlmax);
    case ri::DType::kQ4_1: return x8_default_blocking<ri::DType::kQ4_1>(a, mc, kc, nc_blocks, kc_step, tile_rows, vlmax);
    case ri::DType::kQ4_K: return x8_default_blocking<ri::DType::kQ4_K>(a, mc, kc, nc_blocks, kc_step, tile_rows, vlmax);
    case ri::DType::kQ5_K: return x8_default_blocking<ri::DType::kQ5_K>(a, mc, kc, nc_blocks, kc_step, tile_rows, vlmax);
    case ri::DType::kQ6_K: return x8_default_blocking<ri::DType::kQ6_K>(a, mc, kc, nc_blocks, kc_step, tile_rows, vlmax);
    default: return x8_default_blocking<ri::DType::kInt8>(a, mc, kc, nc_blocks, kc_step, tile_rows, vlmax);
  }
}
