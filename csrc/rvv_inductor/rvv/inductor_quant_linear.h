// The entry Inductor-generated code calls for a Linear whose frozen BF16 weight was
// quantized at freeze time (python/rvv_inductor/inductor/quant_lowering.py,
// rvv_inductor.enable(weights="int8" | "int4")), or whose packed weight came from a GGUF
// file's blocks (export of a .gguf with the file's formats: INT8/INT4 for Q8_0/Q4_0, and
// the block formats q4_1, q4_k, q5_k, q6_k of block_quant.h):
//
//   Y[M, N] = X[M, K] . W^T (+ bias[N])    X, Y, bias bf16; W packed (quant_packing.h, block_quant.h)
//
// It runs the quantized kernels of the kernel table (kernel_table.inl) that the dispatcher
// would pick for the ISA the including TU is compiled for: the QuantF16 GEMV with Zvfh
// (the rvv_zvfh variant), the QuantF32 GEMV otherwise (rvv), and for M >= 2 the 4 x m4
// GEMM (kQuantGemm) or, with INT8 activations, the gemm_x8 kernel (kQuantGemmX8,
// rvv/gemm_quant_x8_packed.h). So a whole-model compile gives the same numbers, bit for
// bit, as rvv_linear_packed_opts on the same packed bytes and options
// (compile_linears(weights=..., activations=...)); the INT8-activation decode kernel
// (RVV_LINEAR_X_INT8, M == 1) is not used.
//
// Threads: the N blocks are split into contiguous ranges (partition_blocks), one per
// OpenMP thread, when the TU is compiled with OpenMP (Inductor's are); every column is
// computed by exactly one thread with the same arithmetic, so the result does not depend
// on the thread count. M >= 2: each thread converts the activation blocks it needs
// (gemm_quant_packed.h, cache blocking).
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

#include "rvv_inductor/bf16.h"
#include "rvv_inductor/block_quant.h"
#include "rvv_inductor/packing.h"
#include "rvv_inductor/quant_packing.h"
#include "rvv_inductor/rvv/gemm_quant_packed.h"
#include "rvv_inductor/rvv/gemm_quant_x8_packed.h"
#include "rvv_inductor/rvv/gemv_block_quant.h"
#include "rvv_inductor/rvv/gemv_quant_packed.h"
#include "rvv_inductor/types.h"

#ifdef _OPENMP
#include <omp.h>
#endif

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

#if RVV_INDUCTOR_HAS_ZVFH
using InductorQuantPolicy = QuantF16;
#else
using InductorQuantPolicy = QuantF32;
#endif

}  // namespace rvv

// Which kernel a generated call runs (its template argument; the first two are also
// what `true` / `false` meant before the INT8-activation GEMM existed).
enum QuantInductorKernel : int {
  kQuantGemm = 0,    // M >= 2, bf16 activations (gemm_quant_packed_4xm4)
  kQuantGemv = 1,    // M == 1 (gemv_quant_packed_1xm8)
  kQuantGemmX8 = 2,  // M >= 2, INT8 activations (gemm_quant_x8_packed)
};

namespace rvv {
// Only this one kernel is instantiated in a generated TU, which keeps its compile time down.
template <DType kFormat, int kKernel>
inline Status inductor_quant_blocks(const LinearOperands& a) {
  if constexpr (kKernel == kQuantGemv && is_block_format(kFormat))
    return gemv_block_quant_1xm8<InductorQuantPolicy, kFormat>(a);
  else if constexpr (kKernel == kQuantGemv) return gemv_quant_packed_1xm8<InductorQuantPolicy, kFormat>(a);
  else if constexpr (kKernel == kQuantGemmX8) return gemm_quant_x8_packed<kFormat>(a);
  else return gemm_quant_packed_4xm4<kFormat>(a);
}
}  // namespace rvv

// Runs the problem; kOk, or an error status with a message in err. `bytes` is the packed
// size the Python side quantized (or packed the file's blocks) into: a layout that
// disagrees is rejected before any weight byte is read, as are a format other than
// kFormat, M that is not the kernel's, and an INT8-activation kernel for a weight whose
// groups are not whole 32-element blocks. A block format's record fixes its group size
// (the super-block), f16 scales and no zero points: other values are a mismatch.
template <DType kFormat, int kKernel>
inline Status linear_quant_inductor(const uint16_t* x, int64_t ldx, int64_t M, int64_t N, int64_t K, const uint8_t* w,
                                    int32_t group_size, int32_t scale_dtype, int32_t zero_points, int64_t nb,
                                    int64_t bytes, const uint16_t* bias, uint16_t* y, int64_t ldy, int nthreads,
                                    char* err, size_t err_len) {
  static_assert(kFormat == DType::kInt8 || kFormat == DType::kInt4 || is_block_format(kFormat),
                "quantized or GGUF block formats only");
  static_assert(kKernel == kQuantGemm || kKernel == kQuantGemv || kKernel == kQuantGemmX8, "unknown kernel");
  constexpr bool kGemv = kKernel == kQuantGemv;
  if (kGemv != (M == 1))
    return fail(Status::kBadShape, err, err_len, "linear_quant_inductor: M=%lld with the %s kernel", (long long)M,
                kGemv ? "GEMV (M == 1)" : "GEMM (M >= 2)");
  PackedLayout l;
  if constexpr (is_block_format(kFormat)) {
    l = make_block_layout(kFormat, N, K, nb, 0);
    l.group_size = group_size, l.scale_dtype = scale_dtype, l.zero_points = zero_points;
  } else {
    l = make_quant_layout(QuantSpec{kFormat, group_size, DType(scale_dtype), zero_points != 0}, N, K, nb, 0);
  }
  Status s = validate_layout(l, N, K, nb, err, err_len);
  if (s != Status::kOk) return s;
  if (kKernel == kQuantGemmX8 && !x8_gemm_applies(l))
    return fail(Status::kBadShape, err, err_len,
                "linear_quant_inductor: INT8 activations need groups of whole 32-element blocks (group %d)", int(group_size));
  if (l.bytes != bytes)
    return fail(Status::kLayoutMismatch, err, err_len, "linear_quant_inductor: packed weight has %lld bytes, the layout %lld",
                (long long)bytes, (long long)l.bytes);
  if (M <= 0 || N <= 0) return Status::kOk;
  if (!x || !w || !y) return fail(Status::kNullPointer, err, err_len, "linear_quant_inductor: null pointer");
  if ((M > 1 && (ldx < K || ldy < N)))
    return fail(Status::kBadShape, err, err_len, "linear_quant_inductor: ldx=%lld ldy=%lld for K=%lld N=%lld", (long long)ldx,
                (long long)ldy, (long long)K, (long long)N);
  LinearOperands a{};
  a.M = M, a.N = N, a.K = K, a.x = x, a.ldx = ldx;
  a.weight_layout = WeightLayout::kPacked;
  a.w = w, a.layout = &l, a.nb = nb;
  a.bias = bias, a.bias_dtype = bias ? DType::kBF16 : DType::kNone;
  a.y = y, a.ldy = ldy, a.y_dtype = DType::kBF16;
  a.x_int8 = kKernel == kQuantGemmX8 ? kX8Gemm : 0;
  const int64_t nblocks = l.num_blocks;
  int nt = nthreads < 1 ? 1 : nthreads;
  if (int64_t(nt) > nblocks) nt = int(nblocks);
  int failed = int(Status::kOk);
  auto run = [&](int t, int nthr) {
    LinearOperands b = a;
    const BlockRange r = partition_blocks(nblocks, nthr, t);
    if (r.begin == r.end) return;
    b.block_begin = r.begin, b.block_end = r.end;
    const Status st = rvv::inductor_quant_blocks<kFormat, kKernel>(b);
    if (st != Status::kOk) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
      failed = int(st);
    }
  };
#ifdef _OPENMP
  if (nt > 1) {
#pragma omp parallel num_threads(nt)
    run(omp_get_thread_num(), omp_get_num_threads());
  } else {
    run(0, 1);
  }
#else
  run(0, 1);
#endif
  if (failed != int(Status::kOk))
    return fail(Status(failed), err, err_len, "linear_quant_inductor: %s", status_name(Status(failed)));
  return Status::kOk;
}

// What the generated kernel calls: kFormatCode RVV_DTYPE_INT8, RVV_DTYPE_INT4 or a block
// format's code (RVV_DTYPE_Q4_K, ...), bf16
// pointers as Inductor has them (c10::BFloat16), and a C++ exception on error (Inductor's
// Python binding turns it into a RuntimeError).
template <int32_t kFormatCode, int kKernel, class TX, class TB>
inline void linear_quant_inductor_or_throw(const TX* x, int64_t ldx, int64_t M, int64_t N, int64_t K, const uint8_t* w,
                                           int32_t group_size, int32_t scale_dtype, int32_t zero_points, int64_t nb,
                                           int64_t bytes, const TB* bias, TX* y, int64_t ldy, int nthreads) {
  char err[256];
  const Status s = linear_quant_inductor<DType(kFormatCode), kKernel>(
      as_bf16_bits(x), ldx, M, N, K, w, group_size, scale_dtype, zero_points, nb, bytes,
      bias ? as_bf16_bits(bias) : nullptr, as_bf16_bits(y), ldy, nthreads, err, sizeof err);
  if (s != Status::kOk) throw std::runtime_error(err);
}

RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
