// The dispatcher: validation, path selection and the scalar path. Base-ISA code
// (-march=rv64gc): it only calls into the vector TUs after detection confirmed V.
#include "rvv_inductor/linear.h"

#include "kernel_entries.h"
#include "rvv_inductor/bf16.h"
#include "rvv_inductor/error.h"
#include "rvv_inductor/packing.h"
#include "rvv_inductor/ref/linear_ref.h"

namespace rvv_inductor {
namespace {

const detail::KernelSet* vector_kernels(KernelPath path) {
#if defined(RVV_INDUCTOR_WITH_RVV_KERNELS)
  if (path == KernelPath::kRvvZvfbf) return &detail::kernels_rvv_zvfbf();
  if (path == KernelPath::kRvv) return &detail::kernels_rvv();
#else
  (void)path;
#endif
  return nullptr;
}

bool valid_out_dtype(DType d) { return d == DType::kF32 || d == DType::kBF16; }

Status check_common(const LinearProblem& p, char* err, size_t len) {
  if (p.M < 0 || p.N < 0 || p.K < 0 || p.M > kMaxDim || p.N > kMaxDim || p.K > kMaxDim)
    return fail(Status::kBadShape, err, len, "linear_bf16: invalid shape M=%lld N=%lld K=%lld (each must be in [0, 2^31])",
                (long long)p.M, (long long)p.N, (long long)p.K);
  if (p.M > 1 && p.ldx < p.K)
    return fail(Status::kBadShape, err, len, "linear_bf16: ldx=%lld < K=%lld", (long long)p.ldx, (long long)p.K);
  if (p.M > 1 && p.ldy < p.N)
    return fail(Status::kBadShape, err, len, "linear_bf16: ldy=%lld < N=%lld", (long long)p.ldy, (long long)p.N);
  if (!valid_out_dtype(p.y_dtype))
    return fail(Status::kBadDtype, err, len, "linear_bf16: y dtype code %d is neither bf16 (%d) nor f32 (%d)",
                int(p.y_dtype), RVV_DTYPE_BF16, RVV_DTYPE_F32);
  if (p.bias && !valid_out_dtype(p.bias_dtype))
    return fail(Status::kBadDtype, err, len, "linear_bf16: bias dtype code %d is neither bf16 (%d) nor f32 (%d)",
                int(p.bias_dtype), RVV_DTYPE_BF16, RVV_DTYPE_F32);
  if (p.M > 0 && p.K > 0 && !p.x) return fail(Status::kNullPointer, err, len, "linear_bf16: x is null");
  if (p.M > 0 && p.N > 0 && !p.y) return fail(Status::kNullPointer, err, len, "linear_bf16: y is null");
  if (p.scratch && p.scratch_floats < linear_scratch_floats(p.M, p.K))
    return fail(Status::kBufferTooSmall, err, len, "linear_bf16: scratch has %lld floats, %lld needed",
                (long long)p.scratch_floats, (long long)linear_scratch_floats(p.M, p.K));
  return Status::kOk;
}

// Resolves [block_begin, block_end) against `nblocks`.
Status resolve_range(const LinearProblem& p, int64_t nblocks, int64_t* b0, int64_t* b1, char* err, size_t len) {
  *b0 = p.block_begin;
  *b1 = p.block_end < 0 ? nblocks : p.block_end;
  if (*b0 < 0 || *b0 > *b1 || *b1 > nblocks)
    return fail(Status::kBadRange, err, len, "linear_bf16: block range [%lld, %lld) outside [0, %lld]",
                (long long)p.block_begin, (long long)p.block_end, (long long)nblocks);
  return Status::kOk;
}

Status run_packed(const LinearProblem& p, KernelPath path, char* err, size_t len) {
  if (!p.layout) return fail(Status::kNullPointer, err, len, "linear_bf16: packed weight without layout");
  if (p.nb < 0) return fail(Status::kBadShape, err, len, "linear_bf16: nb=%lld < 0", (long long)p.nb);
  Status s = validate_packed_layout(*p.layout, p.N, p.K, p.nb, err, len);
  if (s != Status::kOk) return s;
  if (p.layout->elements > 0 && !p.w) return fail(Status::kNullPointer, err, len, "linear_bf16: packed weight is null");
  PackedLinearArgs a{};
  s = resolve_range(p, p.layout->num_blocks, &a.block_begin, &a.block_end, err, len);
  if (s != Status::kOk) return s;
  if (p.M == 0 || a.block_begin == a.block_end) return Status::kOk;
  a.M = p.M;
  a.N = p.N;
  a.K = p.K;
  a.x = p.x;
  a.ldx = p.ldx;
  a.w = p.w;
  a.nb = p.layout->nb;
  a.bias = p.bias;
  a.bias_dtype = p.bias_dtype;
  a.y = p.y;
  a.ldy = p.ldy;
  a.y_dtype = p.y_dtype;
  a.scratch = p.scratch;
  const detail::KernelSet* vk = vector_kernels(path);
  s = vk ? vk->linear_packed(a) : ref::linear_bf16_packed_ref(a);
  return s == Status::kOk ? s : fail(s, err, len, "linear_bf16: %s", status_name(s));
}

Status run_rowmajor(const LinearProblem& p, KernelPath path, char* err, size_t len) {
  if (p.N > 1 && p.ldw < p.K)
    return fail(Status::kBadShape, err, len, "linear_bf16: ldw=%lld < K=%lld", (long long)p.ldw, (long long)p.K);
  if (p.N > 0 && p.K > 0 && !p.w) return fail(Status::kNullPointer, err, len, "linear_bf16: weight is null");
  if (p.nb < 0) return fail(Status::kBadShape, err, len, "linear_bf16: nb=%lld < 0", (long long)p.nb);
  const int64_t width = p.nb > 0 ? p.nb : 1;
  RowMajorLinearArgs a{};
  int64_t b0, b1;
  Status s = resolve_range(p, num_blocks(p.N, width), &b0, &b1, err, len);
  if (s != Status::kOk) return s;
  a.n_begin = b0 * width;
  a.n_end = b1 * width < p.N ? b1 * width : p.N;
  if (p.M == 0 || a.n_begin >= a.n_end) return Status::kOk;
  a.M = p.M;
  a.N = p.N;
  a.K = p.K;
  a.x = p.x;
  a.ldx = p.ldx;
  a.w = p.w;
  a.ldw = p.ldw;
  a.bias = p.bias;
  a.bias_dtype = p.bias_dtype;
  a.y = p.y;
  a.ldy = p.ldy;
  a.y_dtype = p.y_dtype;
  a.scratch = p.scratch;
  const detail::KernelSet* vk = vector_kernels(path);
  s = vk ? vk->linear_rowmajor(a) : ref::linear_bf16_rowmajor_ref(a);
  return s == Status::kOk ? s : fail(s, err, len, "linear_bf16: %s", status_name(s));
}

}  // namespace

KernelPath select_kernel_path(const rvv_cpu_features& cpu) {
#if defined(RVV_INDUCTOR_WITH_RVV_KERNELS)
  // Intersect with what the CPU really has: the caller's struct may be made up.
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  const bool v = cpu.has_v && hw.has_v;
  if (v && cpu.has_zvfbfmin && cpu.has_zvfbfwma && hw.has_zvfbfmin && hw.has_zvfbfwma) return KernelPath::kRvvZvfbf;
  if (v) return KernelPath::kRvv;
#else
  (void)cpu;
#endif
  return KernelPath::kScalar;
}

const char* kernel_path_name(KernelPath path) {
  switch (path) {
    case KernelPath::kScalar: return "scalar";
    case KernelPath::kRvv: return "rvv";
    case KernelPath::kRvvZvfbf: return "rvv_zvfbf";
  }
  return "unknown";
}

int64_t preferred_nb(const rvv_cpu_features& cpu) {
  return preferred_nb_for_vlenb(select_kernel_path(cpu) == KernelPath::kScalar ? 0 : cpu.vlenb);
}

int64_t linear_scratch_floats(int64_t M, int64_t K) { return (M > 1 ? M : 1) * (K > 0 ? K : 0); }

Status linear_bf16(const LinearProblem& p, const rvv_cpu_features& cpu, KernelPath* used, char* err, size_t err_len) {
  if (err && err_len) err[0] = '\0';
  const KernelPath path = select_kernel_path(cpu);
  if (used) *used = path;
  Status s = check_common(p, err, err_len);
  if (s != Status::kOk) return s;
  switch (p.weight_format) {
    case WeightFormat::kPacked: return run_packed(p, path, err, err_len);
    case WeightFormat::kRowMajor: return run_rowmajor(p, path, err, err_len);
  }
  return fail(Status::kBadDtype, err, err_len, "linear_bf16: unknown weight format %d", int(p.weight_format));
}

Status convert_f32_to_bf16(const float* src, uint16_t* dst, int64_t n, const rvv_cpu_features& cpu) {
  if (n < 0) return Status::kBadShape;
  if (n > 0 && (!src || !dst)) return Status::kNullPointer;
  if (const detail::KernelSet* vk = vector_kernels(select_kernel_path(cpu))) {
    vk->f32_to_bf16(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
  }
  return Status::kOk;
}

Status convert_bf16_to_f32(const uint16_t* src, float* dst, int64_t n, const rvv_cpu_features& cpu) {
  if (n < 0) return Status::kBadShape;
  if (n > 0 && (!src || !dst)) return Status::kNullPointer;
  if (const detail::KernelSet* vk = vector_kernels(select_kernel_path(cpu))) {
    vk->bf16_to_f32(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
  }
  return Status::kOk;
}

}  // namespace rvv_inductor
