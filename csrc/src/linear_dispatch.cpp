// The dispatcher: validation, path selection and the scalar path. Base-ISA code
// (-march=rv64gc): it only calls into the vector TUs after detection confirmed V.
#include "rvv_inductor/linear.h"

#include <initializer_list>

#include "kernel_entries.h"
#include "rvv_inductor/bf16.h"
#include "rvv_inductor/error.h"
#include "rvv_inductor/packing.h"
#include "rvv_inductor/quant_packing.h"
#include "rvv_inductor/ref/linear_ref.h"

namespace rvv_inductor {
namespace {

struct IsaVariant {
  const char* name;
  KernelPath path;
  bool (*supported)(const rvv_cpu_features&);
  const detail::KernelSet& (*set)();
};

#if defined(RVV_INDUCTOR_WITH_RVV_KERNELS)
#define RVV_ISA(isa, march, p, req)                                              \
  {#isa, KernelPath::p, [](const rvv_cpu_features& c) {                          \
     const int has_v = c.has_v, has_zvfh = c.has_zvfh, has_zvfbfmin = c.has_zvfbfmin, \
               has_zvfbfwma = c.has_zvfbfwma;                                    \
     (void)has_zvfh, (void)has_zvfbfmin, (void)has_zvfbfwma;                     \
     return bool req;                                                            \
   }, &detail::kernels_##isa},
constexpr IsaVariant kVariants[] = {
#include "rvv_inductor/kernel_isas.inl"
};
#undef RVV_ISA
constexpr size_t kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]);
#else
constexpr IsaVariant* kVariants = nullptr;
constexpr size_t kNumVariants = 0;
#endif

// The caller's features intersected with what the CPU really has: the struct may be made up.
rvv_cpu_features usable(const rvv_cpu_features& cpu) {
  rvv_cpu_features hw;
  rvv_detect_cpu(&hw);
  rvv_cpu_features u = hw;
  u.has_v = cpu.has_v && hw.has_v;
  u.has_zvfh = u.has_v && cpu.has_zvfh && hw.has_zvfh;
  u.has_zvfbfmin = u.has_v && cpu.has_zvfbfmin && hw.has_zvfbfmin;
  u.has_zvfbfwma = u.has_v && cpu.has_zvfbfwma && hw.has_zvfbfwma;
  return u;
}

// The strongest variant the CPU supports with a kernel for (format, kind).
const detail::KernelEntry* find_kernel(DType format, KernelKind kind, const rvv_cpu_features& cpu,
                                       KernelPath* path) {
  const rvv_cpu_features u = usable(cpu);
  for (size_t i = 0; i < kNumVariants; ++i) {
    if (!kVariants[i].supported(u)) continue;
    const detail::KernelSet& set = kVariants[i].set();
    for (size_t e = 0; e < set.count; ++e)
      if (set.entries[e].format == format && set.entries[e].kind == kind) {
        if (path) *path = kVariants[i].path;
        return &set.entries[e];
      }
  }
  if (path) *path = KernelPath::kScalar;
  return nullptr;
}

// The conversions of the strongest supported variant that has them.
const detail::KernelSet* convert_set(const rvv_cpu_features& cpu) {
  const rvv_cpu_features u = usable(cpu);
  for (size_t i = 0; i < kNumVariants; ++i)
    if (kVariants[i].supported(u) && kVariants[i].set().bf16_to_f32) return &kVariants[i].set();
  return nullptr;
}

KernelKind kind_of(const LinearProblem& p) {
  if (p.weight_layout == WeightLayout::kRowMajor) return KernelKind::kRowMajor;
  return p.M == 1 ? KernelKind::kGemv : KernelKind::kGemm;
}

// The kernel for p: with x_int8, the INT8-activation decode kernel when the format has one
// and its 16-element activation blocks fit the weight's groups; otherwise (and always
// without x_int8) the kernel of the weight's format and M.
const detail::KernelEntry* kernel_for(const LinearProblem& p, DType format, const rvv_cpu_features& cpu,
                                      KernelPath* path) {
  if (p.x_int8 && p.M == 1 && p.weight_layout == WeightLayout::kPacked && p.layout && p.layout->group_size > 0 &&
      p.layout->group_size % 16 == 0)
    if (const detail::KernelEntry* k = find_kernel(format, KernelKind::kGemvX8, cpu, path)) return k;
  return find_kernel(format, kind_of(p), cpu, path);
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

// k: the table kernel chosen for the problem, or null for the scalar code.
Status run_kernel(const LinearOperands& a, const detail::KernelEntry* k, DType format, char* err, size_t len) {
  Status s;
  if (k) s = k->fn(a);
  else if (a.weight_layout == WeightLayout::kRowMajor) s = ref::linear_bf16_rowmajor_ref(a);
  else if (format == DType::kBF16) s = ref::linear_bf16_packed_ref(a);
  else s = ref::linear_quant_packed_ref(a);
  return s == Status::kOk ? s : fail(s, err, len, "linear_bf16: %s", status_name(s));
}

Status run_packed(const LinearProblem& p, const detail::KernelEntry* k, char* err, size_t len) {
  if (!p.layout) return fail(Status::kNullPointer, err, len, "linear_bf16: packed weight without layout");
  if (p.nb < 0) return fail(Status::kBadShape, err, len, "linear_bf16: nb=%lld < 0", (long long)p.nb);
  Status s = validate_layout(*p.layout, p.N, p.K, p.nb, err, len);
  if (s != Status::kOk) return s;
  if (p.layout->bytes > 0 && !p.w) return fail(Status::kNullPointer, err, len, "linear_bf16: packed weight is null");
  LinearOperands a = p;
  s = resolve_range(p, p.layout->num_blocks, &a.block_begin, &a.block_end, err, len);
  if (s != Status::kOk) return s;
  if (p.M == 0 || a.block_begin == a.block_end) return Status::kOk;
  a.nb = p.layout->nb;
  return run_kernel(a, k, DType(p.layout->dtype), err, len);
}

Status run_rowmajor(const LinearProblem& p, const detail::KernelEntry* k, char* err, size_t len) {
  if (p.N > 1 && p.ldw < p.K)
    return fail(Status::kBadShape, err, len, "linear_bf16: ldw=%lld < K=%lld", (long long)p.ldw, (long long)p.K);
  if (p.N > 0 && p.K > 0 && !p.w) return fail(Status::kNullPointer, err, len, "linear_bf16: weight is null");
  if (p.nb < 0) return fail(Status::kBadShape, err, len, "linear_bf16: nb=%lld < 0", (long long)p.nb);
  const int64_t width = p.nb > 0 ? p.nb : 1;
  int64_t b0, b1;
  Status s = resolve_range(p, num_blocks(p.N, width), &b0, &b1, err, len);
  if (s != Status::kOk) return s;
  // The kernels see the range in columns (block width 1).
  LinearOperands a = p;
  a.nb = 1;
  a.layout = nullptr;
  a.block_begin = b0 * width;
  a.block_end = b1 * width < p.N ? b1 * width : p.N;
  if (p.M == 0 || a.block_begin >= a.block_end) return Status::kOk;
  return run_kernel(a, k, DType::kBF16, err, len);
}

}  // namespace

KernelPath kernel_path_for(DType format, KernelKind kind, const rvv_cpu_features& cpu) {
  KernelPath path;
  find_kernel(format, kind, cpu, &path);
  return path;
}

KernelPath select_kernel_path(const rvv_cpu_features& cpu) {
  return kernel_path_for(DType::kBF16, KernelKind::kGemv, cpu);
}

const char* kernel_path_name(KernelPath path) {
  if (path == KernelPath::kScalar) return "scalar";
  for (size_t i = 0; i < kNumVariants; ++i)
    if (kVariants[i].path == path) return kVariants[i].name;
  return "unknown";
}

size_t list_kernels(const rvv_cpu_features& cpu, KernelInfo* out, size_t cap) {
  const rvv_cpu_features u = usable(cpu);
  size_t n = 0;
  for (size_t i = 0; i < kNumVariants; ++i) {
    if (!kVariants[i].supported(u)) continue;
    const detail::KernelSet& set = kVariants[i].set();
    for (size_t e = 0; e < set.count; ++e, ++n)
      if (out && n < cap) out[n] = KernelInfo{set.entries[e].name, kVariants[i].path, set.entries[e].format, set.entries[e].kind};
  }
  return n;
}

rvv_cpu_features features_for_path(KernelPath path, int vlenb) {
  rvv_cpu_features f{};
  f.is_riscv64 = 1;
  if (path == KernelPath::kScalar) return f;
  f.has_v = 1;
  f.vlenb = vlenb;
  // Each variant's own requirements: set every extension, keep those its predicate needs.
  for (size_t i = 0; i < kNumVariants; ++i) {
    if (kVariants[i].path != path) continue;
    rvv_cpu_features t = f;
    for (int* ext : {&t.has_zvfh, &t.has_zvfbfmin, &t.has_zvfbfwma}) {
      *ext = 0;
      if (!kVariants[i].supported(t)) *ext = 1;
    }
    return t;
  }
  return f;
}

const char* selected_kernel_name(const LinearProblem& p, const rvv_cpu_features& cpu) {
  DType format = DType::kBF16;
  if (p.weight_layout == WeightLayout::kPacked) {
    if (!p.layout) return nullptr;
    format = DType(p.layout->dtype);
  }
  const detail::KernelEntry* k = kernel_for(p, format, cpu, nullptr);
  if (k) return k->name;
  if (p.weight_layout == WeightLayout::kRowMajor) return "scalar/bf16/rowmajor";
  switch (format) {
    case DType::kBF16: return p.M == 1 ? "scalar/bf16/gemv" : "scalar/bf16/gemm";
    case DType::kInt8: return p.M == 1 ? "scalar/int8/gemv" : "scalar/int8/gemm";
    case DType::kInt4: return p.M == 1 ? "scalar/int4/gemv" : "scalar/int4/gemm";
    default: return nullptr;
  }
}

int64_t preferred_nb(const rvv_cpu_features& cpu) {
  return preferred_nb_for_vlenb(select_kernel_path(cpu) == KernelPath::kScalar ? 0 : cpu.vlenb);
}

// Enough for every format: bf16 needs M * K (x as fp32 panels); the quantized GEMV also
// keeps an fp16 copy of x and per-group sums (rvv/gemv_quant_packed.h).
int64_t linear_scratch_floats(int64_t M, int64_t K) { return (M > 1 ? M : 1) * (2 * (K > 0 ? K : 0) + 4); }

Status linear_bf16(const LinearProblem& p, const rvv_cpu_features& cpu, KernelPath* used, char* err, size_t err_len) {
  if (err && err_len) err[0] = '\0';
  // One lookup per call: the kernel for the weight's format and M (the layout's format is
  // validated before the kernel runs; an invalid one finds no kernel here).
  DType format = DType::kBF16;
  if (p.weight_layout == WeightLayout::kPacked && p.layout) format = DType(p.layout->dtype);
  KernelPath path;
  const detail::KernelEntry* k = kernel_for(p, format, cpu, &path);
  if (used) *used = path;
  Status s = check_common(p, err, err_len);
  if (s != Status::kOk) return s;
  switch (p.weight_layout) {
    case WeightLayout::kPacked: return run_packed(p, k, err, err_len);
    case WeightLayout::kRowMajor: return run_rowmajor(p, k, err, err_len);
  }
  return fail(Status::kBadDtype, err, err_len, "linear_bf16: unknown weight layout %d", int(p.weight_layout));
}

Status convert_f32_to_bf16(const float* src, uint16_t* dst, int64_t n, const rvv_cpu_features& cpu) {
  if (n < 0) return Status::kBadShape;
  if (n > 0 && (!src || !dst)) return Status::kNullPointer;
  if (const detail::KernelSet* vk = convert_set(cpu)) {
    vk->f32_to_bf16(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
  }
  return Status::kOk;
}

Status convert_bf16_to_f32(const uint16_t* src, float* dst, int64_t n, const rvv_cpu_features& cpu) {
  if (n < 0) return Status::kBadShape;
  if (n > 0 && (!src || !dst)) return Status::kNullPointer;
  if (const detail::KernelSet* vk = convert_set(cpu)) {
    vk->bf16_to_f32(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
  }
  return Status::kOk;
}

}  // namespace rvv_inductor
