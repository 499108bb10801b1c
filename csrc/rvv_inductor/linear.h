// The runtime dispatcher: one entry that validates a Linear problem and runs it on the
// best implementation the CPU allows: RVV with hardware BF16 (Zvfbfmin + Zvfbfwma), plain
// RVV, or portable scalar code. These functions are compiled once, for the base ISA
// (rv64gc), in csrc/src/linear_dispatch.cpp; the vector kernels live in their own TUs
// compiled with -march=rv64gcv[_zvfbfmin_zvfbfwma] and are reached only through here.
#pragma once
#include <cstddef>
#include <cstdint>

#include "rvv_inductor/cpu_features.h"
#include "rvv_inductor/types.h"

namespace rvv_inductor {

enum class WeightFormat : int32_t { kPacked = 0, kRowMajor = 1 };

// Y[m, n] = sum_k X[m, k] * W[n, k] (+ bias[n]) for m < M and n in the column blocks
// [block_begin, block_end) of width nb; Y outside those columns is not touched, so
// threads can share one Y. Value-initialise (`LinearProblem p{};`) and fill in.
struct LinearProblem {
  int64_t M, N, K;
  const uint16_t* x;  // bf16 bits; row m at x + m * ldx (ldx >= K when M > 1)
  int64_t ldx;
  WeightFormat weight_format;
  const uint16_t* w;           // packed data, or row-major W[N, K]
  const PackedLayout* layout;  // packed: describes w, must match N and K
  int64_t ldw;                 // row-major: row stride of W (>= K when N > 1)
  // Width of the blocks the range counts. Packed: 0 or layout->nb (a different value is
  // rejected, so a caller compiled for one nb cannot run a weight packed with another).
  // Row-major: any width, 0 meaning 1 (the range is then in columns).
  int64_t nb;
  const void* bias;  // N values of bias_dtype (kBF16 or kF32), or nullptr
  DType bias_dtype;
  void* y;  // y_dtype (kF32 or kBF16); row m at y + m * ldy elements (ldy >= N when M > 1)
  int64_t ldy;
  DType y_dtype;
  int64_t block_begin, block_end;  // block_end < 0: through the last block
  float* scratch;                  // optional, linear_scratch_floats(M, K) floats, per thread
  int64_t scratch_floats;
};

// The implementation linear_bf16 runs for these features on this build. Features that
// the running CPU lacks are ignored, so a hand-made struct cannot cause SIGILL.
KernelPath select_kernel_path(const rvv_cpu_features& cpu);
const char* kernel_path_name(KernelPath path);  // "scalar", "rvv", "rvv_zvfbf"

// Block width to pack with for this CPU: 2 * vlenb (VLMAX of e32 at LMUL 8), 64 without V.
int64_t preferred_nb(const rvv_cpu_features& cpu);

// FP32 scratch a caller may provide to avoid a per-call allocation.
int64_t linear_scratch_floats(int64_t M, int64_t K);

// Validates p (kOk, or an error status with a message in err) and runs it. `used`, when
// non-null, receives the implementation that ran.
Status linear_bf16(const LinearProblem& p, const rvv_cpu_features& cpu, KernelPath* used = nullptr,
                   char* err = nullptr, size_t err_len = 0);

// Elementwise conversions on the selected implementation (RNE, NaN stays quiet NaN).
Status convert_f32_to_bf16(const float* src, uint16_t* dst, int64_t n, const rvv_cpu_features& cpu);
Status convert_bf16_to_f32(const uint16_t* src, float* dst, int64_t n, const rvv_cpu_features& cpu);

}  // namespace rvv_inductor
