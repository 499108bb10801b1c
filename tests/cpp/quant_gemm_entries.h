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
// What Inductor's generated code calls (rvv/inductor_quant_linear.h), compiled for the
// rvv variant: `kernel` one of the QuantInductorKernel values below (the enum lives in an
// RVV-only header; the entry checks they agree), `format` any quantized or block format;
// bf16 X, bias and Y. kBadDtype for a format the entry has no instance of.
constexpr int kEntryQuantGemm = 0, kEntryQuantGemv = 1, kEntryQuantGemmX8 = 2;
rvv_inductor::Status inductor_quant_entry_rvv(int32_t format, int kernel, const uint16_t* x, int64_t ldx, int64_t M,
                                              int64_t N, int64_t K, const uint8_t* w, int32_t group_size,
                                              int32_t scale_dtype, int32_t zero_points, int64_t nb, int64_t bytes,
                                              const uint16_t* bias, uint16_t* y, int64_t ldy, int nthreads, char* err,
                                              size_t err_len);
#endif
