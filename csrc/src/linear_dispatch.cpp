// The dispatcher: validation, path selection and the scalar path. Base-ISA code
// (-march=rv64gc): it only calls into the vector TUs after detection confirmed V.
#include "rvv_inductor/linear.h"

#include <dlfcn.h>

#include <atomic>
#include <initializer_list>

#include "kernel_entries.h"
#include "rvv_inductor/attention.h"
#include "rvv_inductor/bf16.h"
#include "rvv_inductor/error.h"
#include "rvv_inductor/packing.h"
#include "rvv_inductor/quant_packing.h"
#include "rvv_inductor/quant_x8.h"
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
// A variant's requirements (kernel_isas.inl) name the feature fields: Feat binds has_v
// and every extension of cpu_extensions.inl as members, so `req` reads them unqualified
// inside a member function.
struct Feat {
  int has_v;
#define RVV_CPU_EXT(field, name) int field;
#include "rvv_inductor/cpu_extensions.inl"
#undef RVV_CPU_EXT
  explicit Feat(const rvv_cpu_features& c) : has_v(c.has_v) {
#define RVV_CPU_EXT(field, name) field = c.field;
#include "rvv_inductor/cpu_extensions.inl"
#undef RVV_CPU_EXT
  }
};
#define RVV_ISA(isa, march, p, req)                                                        \
  {#isa, KernelPath::p, [](const rvv_cpu_features& c) {                                    \
     struct Req : Feat {                                                                   \
       using Feat::Feat;                                                                   \
       bool operator()() const { return bool req; }                                        \
     };                                                                                    \
     return Req(c)();                                                                      \
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
#define RVV_CPU_EXT(field, name) u.field = u.has_v && cpu.field && hw.field;
#include "rvv_inductor/cpu_extensions.inl"
#undef RVV_CPU_EXT
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

// The strongest supported variant whose set has `member` (a function pointer that a set
// may leave null), else null and path kScalar.
template <class Fn>
const detail::KernelSet* strongest_set_with(Fn detail::KernelSet::*member, const rvv_cpu_features& cpu,
                                            KernelPath* path = nullptr) {
  const rvv_cpu_features u = usable(cpu);
  for (size_t i = 0; i < kNumVariants; ++i)
    if (kVariants[i].supported(u) && kVariants[i].set().*member) {
      if (path) *path = kVariants[i].path;
      return &kVariants[i].set();
    }
  if (path) *path = KernelPath::kScalar;
  return nullptr;
}

// The conversions of the strongest supported variant that has them.
const detail::KernelSet* convert_set(const rvv_cpu_features& cpu) {
  return strongest_set_with(&detail::KernelSet::bf16_to_f32, cpu);
}

KernelKind kind_of(const LinearProblem& p) {
  if (p.weight_layout == WeightLayout::kRowMajor) return KernelKind::kRowMajor;
  return p.M == 1 ? KernelKind::kGemv : KernelKind::kGemm;
}

// The kernel for p: with x_int8 bits, the INT8-activation kernel when the format has one
// and its activation blocks fit the weight's groups (kX8Gemv: M == 1, 16-element blocks;
// kX8Gemm: M >= 2, quant_x8.h); otherwise the kernel of the weight's format and M. With
// kX8Gemm and no vector kernel, null: the scalar reference of the same scheme runs.
const detail::KernelEntry* kernel_for(const LinearProblem& p, DType format, const rvv_cpu_features& cpu,
                                      KernelPath* path) {
  if ((p.x_int8 & kX8Gemv) && p.M == 1 && p.weight_layout == WeightLayout::kPacked && p.layout &&
      p.layout->group_size > 0 && p.layout->group_size % 16 == 0)
    if (const detail::KernelEntry* k = find_kernel(format, KernelKind::kGemvX8, cpu, path)) return k;
  if (x8_gemm_requested(p)) return find_kernel(format, KernelKind::kGemmX8, cpu, path);
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
Status run_one(const LinearOperands& a, const detail::KernelEntry* k, DType format) {
  if (k) return k->fn(a);
  if (a.weight_layout == WeightLayout::kRowMajor) return ref::linear_bf16_rowmajor_ref(a);
  if (format == DType::kBF16) return ref::linear_bf16_packed_ref(a);
  if (x8_gemm_requested(a)) {
    // As the vector kernel: a row with Inf/NaN sends the whole call to the fp path.
    bool finite = true;
    for (int64_t m = 0; m < a.M && finite; ++m) finite = bf16_row_finite(a.x + m * a.ldx, a.K);
    if (finite) return is_block_format(format) ? ref::linear_block_quant_x8_ref(a) : ref::linear_quant_x8_ref(a);
  }
  if (is_block_format(format)) return ref::linear_block_quant_ref(a);
  return ref::linear_quant_packed_ref(a);
}

// ---------------------------------------------------------------- threads
// libgomp, found at run time (the cross clang has no OpenMP runtime; GCC-built callers
// such as PyTorch and Inductor's kernels use libgomp, so this shares their pool and
// their thread-count setting). The entry points are libgomp's stable ABI, what GCC emits
// for `#pragma omp parallel`. Without libgomp every call runs on the calling thread.
struct Gomp {
  void (*parallel)(void (*)(void*), void*, unsigned, unsigned);
  int (*max_threads)();
  int (*thread_num)();
  int (*num_threads)();
  int (*in_parallel)();
};

const Gomp* gomp() {
  static const Gomp g = [] {
    Gomp r{};
    void* h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return r;
    r.parallel = reinterpret_cast<decltype(r.parallel)>(dlsym(h, "GOMP_parallel"));
    r.max_threads = reinterpret_cast<int (*)()>(dlsym(h, "omp_get_max_threads"));
    r.thread_num = reinterpret_cast<int (*)()>(dlsym(h, "omp_get_thread_num"));
    r.num_threads = reinterpret_cast<int (*)()>(dlsym(h, "omp_get_num_threads"));
    r.in_parallel = reinterpret_cast<int (*)()>(dlsym(h, "omp_in_parallel"));
    if (!r.parallel || !r.max_threads || !r.thread_num || !r.num_threads || !r.in_parallel) r = Gomp{};
    return r;
  }();
  return g.parallel ? &g : nullptr;
}

size_t dtype_size(DType d) { return d == DType::kF32 ? sizeof(float) : sizeof(uint16_t); }

// Columns [c0, c1) of a resolved call (a.nb: the kernel's block width; 1 for row-major,
// whose range is in columns). Whole blocks go to the kernel as a block range; a partial
// block at either end (slices, bf16 packed only) as a one-block call on a shifted view:
// weight, bias and y pointers moved to the first column, N the slice width, the row
// stride still nb. The kernels compute each column from its own weights in the same
// order whatever the block's width, so a column's result does not depend on the split.
Status run_columns(const LinearOperands& a, const detail::KernelEntry* k, DType format, int64_t c0, int64_t c1,
                   float* scratch, int64_t scratch_floats) {
  LinearOperands b = a;
  b.scratch = scratch;
  b.scratch_floats = scratch ? scratch_floats : 0;
  const int64_t nb = a.nb;
  if (nb == 1) {
    b.block_begin = c0, b.block_end = c1;
    return run_one(b, k, format);
  }
  auto slice = [&](int64_t lo, int64_t hi) {
    const int64_t blk = lo / nb;
    LinearOperands s = b;
    s.w = static_cast<const uint16_t*>(a.w) + blk * a.K * nb + (lo - blk * nb);
    s.N = hi - lo;
    s.block_begin = 0, s.block_end = 1;
    if (a.bias) s.bias = static_cast<const char*>(a.bias) + size_t(lo) * dtype_size(a.bias_dtype);
    s.y = static_cast<char*>(a.y) + size_t(lo) * dtype_size(a.y_dtype);
    return run_one(s, k, format);
  };
  Status st = Status::kOk;
  int64_t lo = c0;
  if (lo % nb) {  // head: the rest of a block, or less
    const int64_t hi = (lo / nb + 1) * nb < c1 ? (lo / nb + 1) * nb : c1;
    st = slice(lo, hi);
    lo = hi;
  }
  if (st == Status::kOk && lo < c1) {  // lo is block-aligned: whole blocks, then a tail
    // The weight's last block is whole when the range reaches N, however wide it is.
    const int64_t whole_end = c1 == a.N ? (c1 + nb - 1) / nb : c1 / nb;
    if (whole_end > lo / nb) {
      b.block_begin = lo / nb, b.block_end = whole_end;
      st = run_one(b, k, format);
      lo = whole_end * nb < c1 ? whole_end * nb : c1;
    }
    if (st == Status::kOk && lo < c1) st = slice(lo, c1);
  }
  return st;
}

struct SplitJob {
  const LinearOperands* a;
  const detail::KernelEntry* k;
  DType format;
  bool slices;
  int64_t granule, c0, c1;
  std::atomic<int> status;
};

void split_worker(void* p) {
  SplitJob& j = *static_cast<SplitJob*>(p);
  const Gomp* g = gomp();
  const int t = g->thread_num(), n = g->num_threads();
  const ColumnSplit cs = partition_columns(j.c0, j.c1, j.granule, j.slices, n, t);
  if (cs.begin >= cs.end) return;
  // The caller's scratch is for one thread: thread 0 keeps it, the others allocate.
  const Status s = run_columns(*j.a, j.k, j.format, cs.begin, cs.end, t == 0 ? j.a->scratch : nullptr,
                               j.a->scratch_floats);
  if (s != Status::kOk) {
    int ok = int(Status::kOk);
    j.status.compare_exchange_strong(ok, int(s));
  }
}

// Runs the resolved call a (block range resolved, a.nb the kernel's block width) on up to
// a.nthreads threads, each on its partition_columns share.
Status run_kernel(const LinearOperands& a, const detail::KernelEntry* k, DType format, char* err, size_t len) {
  const bool slices = a.nb > 1 && format == DType::kBF16;
  // Row-major calls come in columns (a.nb == 1): deal them 16 at a time.
  const int64_t granule = a.nb > 1 ? a.nb : 16;
  const int64_t c0 = a.block_begin * a.nb;
  const int64_t c1 = a.block_end * a.nb < a.N ? a.block_end * a.nb : a.N;
  int nt = linear_threads(a.nthreads);
  if (nt > 1) {
    const int64_t unit = partition_columns(c0, c1, granule, slices, nt, 0).unit;
    const int64_t units = (c1 - c0 + unit - 1) / unit;
    if (units < nt) nt = int(units);
  }
  Status s;
  if (nt <= 1) {
    s = run_one(a, k, format);
  } else {
    SplitJob job{&a, k, format, slices, granule, c0, c1, {int(Status::kOk)}};
    gomp()->parallel(split_worker, &job, unsigned(nt), 0);
    s = Status(job.status.load());
  }
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

ColumnSplit partition_columns(int64_t col_begin, int64_t col_end, int64_t nb, bool slices, int nthreads, int t) {
  ColumnSplit r{nb > 0 ? nb : 1, 0, 0};
  if (col_end <= col_begin || nthreads <= 0 || t < 0 || t >= nthreads) return r;
  const int64_t cols = col_end - col_begin;
  const int64_t min_unit = nb < 16 ? nb : 16;
  if (slices)
    while (r.unit / 2 >= min_unit && r.unit % 2 == 0 && (cols + r.unit - 1) / r.unit < 4 * int64_t(nthreads)) r.unit /= 2;
  const BlockRange u = partition_blocks((cols + r.unit - 1) / r.unit, nthreads, t);
  r.begin = col_begin + u.begin * r.unit;
  r.end = col_begin + u.end * r.unit < col_end ? col_begin + u.end * r.unit : col_end;
  if (r.begin > r.end) r.begin = r.end;
  return r;
}

int linear_threads(int nthreads) {
  if (nthreads == 1) return 1;
  const Gomp* g = gomp();
  if (!g || g->in_parallel()) return 1;
  const int n = nthreads > 0 ? nthreads : g->max_threads();
  return n > 1 ? n : 1;
}

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
  f.version = RVV_CPU_FEATURES_VERSION;
  f.is_riscv64 = 1;
  if (path == KernelPath::kScalar) return f;
  f.has_v = 1;
  f.vlenb = vlenb;
  // Each variant's own requirements: set every extension, keep those its predicate needs.
  for (size_t i = 0; i < kNumVariants; ++i) {
    if (kVariants[i].path != path) continue;
    rvv_cpu_features t = f;
#define RVV_CPU_EXT(field, name) &t.field,
    for (int* ext : {
#include "rvv_inductor/cpu_extensions.inl"
         }) {
#undef RVV_CPU_EXT
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
  const bool x8 = x8_gemm_requested(p);
  // "scalar/<format>/gemv|gemm|gemm_x8", the format's name from weight_formats.inl.
#define RVV_WEIGHT_FORMAT(name, code, ...) \
  if (format == DType(code))               \
    return x8 ? "scalar/" #name "/gemm_x8" : p.M == 1 ? "scalar/" #name "/gemv" : "scalar/" #name "/gemm";
#include "rvv_inductor/weight_formats.inl"
#undef RVV_WEIGHT_FORMAT
  return nullptr;
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

// ---------------------------------------------------------------- attention
namespace {

using VarlenRowsFn = bool (*)(const VarlenAttentionArgs&, int64_t, int64_t);

struct VarlenJob {
  const VarlenAttentionArgs* a;
  VarlenRowsFn rows;
  std::atomic<int> ok;
};

// Thread t of n takes an even contiguous share of the query rows.
void varlen_worker(void* p) {
  VarlenJob& j = *static_cast<VarlenJob*>(p);
  const Gomp* g = gomp();
  const int64_t t = g->thread_num(), n = g->num_threads(), rows = j.a->Tq;
  if (!j.rows(*j.a, rows * t / n, rows * (t + 1) / n)) j.ok.store(0);
}

}  // namespace

Status attention_varlen(const VarlenAttentionArgs& a, const rvv_cpu_features& cpu, int nthreads, KernelPath* used,
                        char* err, size_t err_len) {
  if (err && err_len) err[0] = '\0';
  // The scalar rows of this base-ISA TU, unless a vector variant the CPU supports has them.
  const detail::KernelSet* vk = strongest_set_with(&detail::KernelSet::attention_varlen_rows, cpu, used);
  const VarlenRowsFn rows = vk ? vk->attention_varlen_rows : &attention_varlen_rows;
  const std::string why = attention_varlen_check(a);
  if (!why.empty())
    return fail(why == "null pointer" ? Status::kNullPointer : Status::kBadShape, err, err_len, "attention_varlen: %s",
                why.c_str());
  int nt = linear_threads(nthreads);
  if (nt > a.Tq) nt = int(a.Tq);
  bool ok;
  if (nt <= 1) {
    ok = rows(a, 0, a.Tq);
  } else {
    VarlenJob job{&a, rows, {1}};
    gomp()->parallel(varlen_worker, &job, unsigned(nt), 0);
    ok = job.ok.load() != 0;
  }
  return ok ? Status::kOk : fail(Status::kNoMemory, err, err_len, "attention_varlen: out of scratch memory");
}

}  // namespace rvv_inductor
