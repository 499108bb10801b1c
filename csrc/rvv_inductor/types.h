// C++ names for the ABI types plus the operand struct every kernel takes. Plain data
// only: no constructors, default member initialisers or inline functions, so these types
// can cross between translation units compiled for different ISAs (see config.h).
// Value-initialise them (`LinearOperands a{};`) to get zeros.
#pragma once
#include <cstddef>
#include <cstdint>

#include "rvv_inductor/abi_types.h"

namespace rvv_inductor {

enum class Status : int {
  kOk = RVV_OK,
  kNullPointer = RVV_ERR_NULL_POINTER,
  kBadShape = RVV_ERR_BAD_SHAPE,
  kLayoutMismatch = RVV_ERR_LAYOUT_MISMATCH,
  kBadDtype = RVV_ERR_BAD_DTYPE,
  kBadRange = RVV_ERR_BAD_RANGE,
  kNoMemory = RVV_ERR_NO_MEMORY,
  kBufferTooSmall = RVV_ERR_BUFFER_TOO_SMALL,
};

enum class DType : int32_t {
  kNone = RVV_DTYPE_NONE,
  kBF16 = RVV_DTYPE_BF16,
  kF32 = RVV_DTYPE_F32,
  kF16 = RVV_DTYPE_F16,
  kInt8 = RVV_DTYPE_INT8,
  kInt4 = RVV_DTYPE_INT4,
  kQ4_1 = RVV_DTYPE_Q4_1,
  kQ4_K = RVV_DTYPE_Q4_K,
  kQ5_K = RVV_DTYPE_Q5_K,
  kQ6_K = RVV_DTYPE_Q6_K,
  kQ5_0 = RVV_DTYPE_Q5_0,
  kQ5_1 = RVV_DTYPE_Q5_1,
  kIQ4_NL = RVV_DTYPE_IQ4_NL,
  kIQ4_XS = RVV_DTYPE_IQ4_XS,
  kQ2_K = RVV_DTYPE_Q2_K,
  kQ3_K = RVV_DTYPE_Q3_K,
};

enum class KernelPath : int {
  kScalar = RVV_PATH_SCALAR,
  kRvv = RVV_PATH_RVV,
  kRvvZvfbf = RVV_PATH_RVV_ZVFBF,
  kRvvZvfh = RVV_PATH_RVV_ZVFH,
};

using PackedLayout = rvv_packed_layout;

// A half-open range of column blocks [begin, end), the unit of work of one thread.
struct BlockRange {
  int64_t begin;
  int64_t end;
};

// How the weight operand is stored: packed blocks (packing.h, quant_packing.h) or a plain
// row-major bf16 W[N, K].
enum class WeightLayout : int32_t { kPacked = 0, kRowMajor = 1 };

// The one operand set of a Linear call, used by the dispatcher's callers (as
// LinearProblem) and, after validation, by every kernel:
//   Y[m, n] = sum_k X[m, k] * W[n, k] (+ bias[n])   for m < M and n in the column blocks
//   [block_begin, block_end) of width nb.
// Y outside those columns is not touched, so threads can share one Y. The weight's format
// (bf16, int8, int4), group size, scale dtype and zero points are in *layout for packed
// weights; row-major weights are bf16. Value-initialise (`LinearOperands p{};`) and fill in.
struct LinearOperands {
  int64_t M, N, K;
  const uint16_t* x;  // bf16 bits; row m at x + m * ldx (ldx >= K when M > 1)
  int64_t ldx;
  WeightLayout weight_layout;
  const void* w;               // packed data, or row-major bf16 W[N, K]
  const PackedLayout* layout;  // packed: describes w, must match N and K
  int64_t ldw;                 // row-major: row stride of W (>= K when N > 1)
  // Width of the blocks the range counts. Packed: 0 or layout->nb (a different value is
  // rejected, so a caller compiled for one nb cannot run a weight packed with another).
  // Row-major: any width, 0 meaning 1. Kernels see the resolved value (packed: layout->nb,
  // row-major: 1, with the range in columns).
  int64_t nb;
  const void* bias;  // N values of bias_dtype (kBF16 or kF32), or nullptr
  DType bias_dtype;
  void* y;  // y_dtype (kF32 or kBF16); row m at y + m * ldy elements (ldy >= N when M > 1)
  int64_t ldy;
  DType y_dtype;
  int64_t block_begin, block_end;  // block_end < 0: through the last block (kernels: resolved)
  float* scratch;                  // optional, linear_scratch_floats(M, K) floats, per thread
  int64_t scratch_floats;
  // Bits (quant_x8.h): kX8Gemv (1) lets INT4 decode (M == 1) quantize x dynamically to
  // INT8 per 16 elements (rvv/gemv_int4_x8_packed.h); kX8Gemm (2) lets INT4/INT8 calls
  // with M >= 2 quantize x to INT8 per 32 elements and multiply in integers
  // (rvv/gemm_quant_x8_packed.h). Both are faster and add an activation error of at most
  // sum|w| * dx / 2. Ignored where no such kernel applies.
  int32_t x_int8;
  // Threads linear_bf16 splits the columns over (rvv_inductor::partition_columns): 0 =
  // the OpenMP default (libgomp's omp_get_max_threads: OMP_NUM_THREADS, or what
  // torch.set_num_threads set on the calling thread), 1 = the calling thread only. Always
  // one thread inside an active OpenMP parallel region or without libgomp. The result is
  // the same bit for bit whatever the count: every column is computed by one thread with
  // the same arithmetic. Kernels ignore it.
  int32_t nthreads;
};
using LinearProblem = LinearOperands;

}  // namespace rvv_inductor
