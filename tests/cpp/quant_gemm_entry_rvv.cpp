// Compiled with -march=rv64gcv: the INT8/INT4 GEMM with block sizes chosen by the test, so
// small problems cross every row, K and column block boundary (quant_test.cpp).
#include "quant_gemm_entries.h"
#include "rvv_inductor/rvv/gemm_quant_packed.h"

#if !RVV_INDUCTOR_HAS_RVV
#error "compile with -march=rv64gcv"
#endif

namespace ri = rvv_inductor;

ri::Status quant_gemm_entry_rvv(const ri::LinearOperands& a, int64_t mc, int64_t kc, int64_t nc_blocks) {
  const ri::rvv::QuantGemmBlocking bk{mc, kc, nc_blocks};
  return ri::quant_spec_of(*a.layout).format == ri::DType::kInt4 ? ri::rvv::gemm_quant_packed_blocked<ri::DType::kInt4>(a, bk)
                                              : ri::rvv::gemm_quant_packed_blocked<ri::DType::kInt8>(a, bk);
}

void quant_gemm_default_blocking_rvv(int64_t M, int64_t K, int64_t nb, int64_t group_rows, int weight_bits,
                                     int64_t* mc, int64_t* kc, int64_t* nc_blocks) {
  const ri::rvv::QuantGemmBlocking bk = ri::rvv::quant_gemm_blocking(M, K, nb, group_rows, weight_bits);
  *mc = bk.mc, *kc = bk.kc, *nc_blocks = bk.nc_blocks;
}
