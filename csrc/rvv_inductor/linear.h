// The runtime dispatcher: one entry that validates a Linear problem and runs it on the
// best implementation the CPU allows for its weight format: a kernel of the table
// (kernel_table.inl) in the strongest ISA variant the CPU supports (kernel_isas.inl: RVV
// with hardware BF16, RVV with Zvfh, plain RVV), or portable scalar code. These functions
// are compiled once, for the base ISA (rv64gc), in csrc/src/linear_dispatch.cpp; the
// vector kernels live in one TU per variant, compiled with its -march, and are reached
// only through here.
#pragma once
#include <cstddef>
#include <cstdint>

#include "rvv_inductor/attention_args.h"
#include "rvv_inductor/cpu_features.h"
#include "rvv_inductor/types.h"

namespace rvv_inductor {

// What a kernel of the table (kernel_table.inl) computes: packed weight with M == 1 or
// M >= 2, an unpacked row-major bf16 weight, or M == 1 / M >= 2 with dynamically
// INT8-quantized activations (LinearOperands::x_int8 bits kX8Gemv / kX8Gemm, quant_x8.h).
enum class KernelKind : int32_t { kGemv = 0, kGemm = 1, kRowMajor = 2, kGemvX8 = 3, kGemmX8 = 4 };

// A kernel of the table as tests and the benchmark see it.
struct KernelInfo {
  const char* name;  // "<isa>/<format>/<kind>_<tile>", e.g. "rvv_zvfh/int4/gemv_1xm8"
  KernelPath path;   // the ISA variant
  DType format;      // kBF16, kInt8, kInt4
  KernelKind kind;
};

// Every kernel of the table this build has whose ISA variant the CPU supports (features
// intersected with detection), strongest variant first. Writes up to `cap` entries and
// returns the total count.
size_t list_kernels(const rvv_cpu_features& cpu, KernelInfo* out, size_t cap);

// The features that select exactly `path` (its required extensions and nothing else), so
// a caller can run one variant's kernels; has_v = 0 for kScalar.
rvv_cpu_features features_for_path(KernelPath path, int vlenb);

// The kernel linear_bf16 runs for this problem shape, format and CPU: its name ("scalar/..."
// for the portable code), or nullptr when the problem is invalid.
const char* selected_kernel_name(const LinearProblem& p, const rvv_cpu_features& cpu);

// The implementation linear_bf16 runs for bf16 weights with these features on this build
// (kernel_path_for for a given weight format). Features that the running CPU lacks are
// ignored, so a hand-made struct cannot cause SIGILL.
KernelPath select_kernel_path(const rvv_cpu_features& cpu);
KernelPath kernel_path_for(DType format, KernelKind kind, const rvv_cpu_features& cpu);
const char* kernel_path_name(KernelPath path);  // "scalar", or a variant of kernel_isas.inl

// Block width to pack with for this CPU: 2 * vlenb (VLMAX of e32 at LMUL 8), 64 without V.
int64_t preferred_nb(const rvv_cpu_features& cpu);

// FP32 scratch a caller may provide to avoid a per-call allocation (any weight format).
int64_t linear_scratch_floats(int64_t M, int64_t K);

// Validates p (kOk, or an error status with a message in err) and runs it on the kernel
// of the table for its weight format (bf16, int8, int4: the packed layout says which) and
// M, or the scalar code. `used`, when non-null, receives the implementation that ran.
// Activations are bf16 for every format. The columns of [block_begin, block_end) are
// split over p.nthreads threads of libgomp's pool (partition_columns); the output does
// not depend on the thread count.
Status linear_bf16(const LinearProblem& p, const rvv_cpu_features& cpu, KernelPath* used = nullptr,
                   char* err = nullptr, size_t err_len = 0);

// How linear_bf16 splits the columns [col_begin, col_end) of a call over nthreads: thread
// t computes [begin, end). The unit of work is `unit` columns: nb (whole packed blocks),
// or, when there are fewer than 4 blocks per thread and slices are allowed, nb / 2^s
// (the smallest power-of-two slice giving >= 4 units per thread, at least min(nb, 16)
// columns wide), so thin weights (k/v projections: N = 256 is 4 blocks at VLEN 256) keep
// every thread busy. Units are dealt contiguously and evenly (partition_blocks); col_begin
// is a multiple of nb. Empty ranges only when there are fewer units than threads.
struct ColumnSplit {
  int64_t unit;          // columns per unit of work
  int64_t begin, end;    // thread t's columns
};
ColumnSplit partition_columns(int64_t col_begin, int64_t col_end, int64_t nb, bool slices, int nthreads, int t);

// The number of threads linear_bf16 would use for nthreads (LinearOperands::nthreads) in
// the calling thread: 1 without libgomp or inside an active parallel region.
int linear_threads(int nthreads);

// Attention over a packed batch of variable-length sequences (attention.h,
// attention_varlen_rows) with the strongest kernel the CPU supports, its query rows split
// over nthreads threads of libgomp's pool (0: the pool's size); the output does not depend
// on the thread count.
Status attention_varlen(const VarlenAttentionArgs& a, const rvv_cpu_features& cpu, int nthreads,
                        KernelPath* used = nullptr, char* err = nullptr, size_t err_len = 0);

// Elementwise conversions on the selected implementation (RNE, NaN stays quiet NaN).
Status convert_f32_to_bf16(const float* src, uint16_t* dst, int64_t n, const rvv_cpu_features& cpu);
Status convert_bf16_to_f32(const uint16_t* src, float* dst, int64_t n, const rvv_cpu_features& cpu);

}  // namespace rvv_inductor
