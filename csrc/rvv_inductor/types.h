// C++ names for the ABI types plus the argument structs the kernels take. Plain data
// only: no constructors, default member initialisers or inline functions, so these types
// can cross between translation units compiled for different ISAs (see config.h).
// Value-initialise them (`PackedLinearArgs a{};`) to get zeros.
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

enum class DType : int32_t { kNone = RVV_DTYPE_NONE, kBF16 = RVV_DTYPE_BF16, kF32 = RVV_DTYPE_F32 };

enum class KernelPath : int { kScalar = RVV_PATH_SCALAR, kRvv = RVV_PATH_RVV, kRvvZvfbf = RVV_PATH_RVV_ZVFBF };

using PackedLayout = rvv_packed_layout;

// A half-open range of column blocks [begin, end), the unit of work of one thread.
struct BlockRange {
  int64_t begin;
  int64_t end;
};

// Y[m, n] = sum_k X[m, k] * W[n, k] (+ bias[n]) for n in the column blocks
// [block_begin, block_end) of width nb, with W packed as [ceil(N/nb)][K][nb].
// Arguments are trusted here: the dispatcher (linear.h) validates them.
struct PackedLinearArgs {
  int64_t M, N, K;
  const uint16_t* x;  // bf16 bits, row m at x + m * ldx
  int64_t ldx;
  const uint16_t* w;  // packed bf16 bits
  int64_t nb;
  const void* bias;  // N values of bias_dtype, or nullptr
  DType bias_dtype;
  void* y;  // y_dtype (kF32 or kBF16), row m at y + m * ldy elements
  int64_t ldy;
  DType y_dtype;
  int64_t block_begin, block_end;
  float* scratch;  // >= M * K floats, or nullptr to let the kernel allocate
};

// The same product with W row-major [N, K] (row n at w + n * ldw), for the columns
// [n_begin, n_end).
struct RowMajorLinearArgs {
  int64_t M, N, K;
  const uint16_t* x;
  int64_t ldx;
  const uint16_t* w;
  int64_t ldw;
  const void* bias;
  DType bias_dtype;
  void* y;
  int64_t ldy;
  DType y_dtype;
  int64_t n_begin, n_end;
  float* scratch;  // >= K floats, or nullptr
};

}  // namespace rvv_inductor
