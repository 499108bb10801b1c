// Test-only entries into the header-only INT8/INT4 GEMM (rvv/gemm_quant_packed.h),
// defined in a TU compiled with -march=rv64gcv (quant_gemm_entry_rvv.cpp). Call them only
// after detection confirmed V.
#pragma once
#include <cstdint>

#include "rvv_inductor/types.h"

#if defined(__riscv)
// The kernel over a.block_begin..a.block_end (resolved, nb = layout->nb) with the given
// row block, K block and column group (in packed blocks).
rvv_inductor::Status quant_gemm_entry_rvv(const rvv_inductor::LinearOperands& a, int64_t mc, int64_t kc,
                                          int64_t nc_blocks);
// The block sizes the kernel picks on its own.
void quant_gemm_default_blocking_rvv(int64_t M, int64_t K, int64_t nb, int64_t group_rows, int weight_bits,
                                     int64_t* mc, int64_t* kc, int64_t* nc_blocks);
// The INT8-activation GEMM (rvv/gemm_quant_x8_packed.h) with the given blocking, and the
// blocking it picks on its own (kc_step: the multiple K blocks start on).
rvv_inductor::Status quant_x8_gemm_entry_rvv(const rvv_inductor::LinearOperands& a, int64_t mc, int64_t kc,
                                             int64_t nc_blocks);
void quant_x8_default_blocking_rvv(const rvv_inductor::LinearOperands& a, int64_t* mc, int64_t* kc, int64_t* nc_blocks,
                                   int64_t* kc_step, int64_t* tile_rows, int64_t* vlmax);
#endif
