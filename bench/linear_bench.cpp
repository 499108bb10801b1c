// One Linear call, Y[M,N] = X[M,K] . W^T with bf16 activations and a bf16, int8 or int4
// weight, through the project's dispatcher (rvv_inductor::linear_bf16, the entry every user
// path reaches), charged to a marker region for the rvvcount plugin. Run under QEMU with
// the plugin; see bench/run.sh.
//
//   linear_bench --path scalar|rvv|rvv_zvfh|rvv_zvfbf --format packed|rowmajor --m M --k K --n N
//                [--weights bf16|int8|int4|q4_1|q5_0|q5_1|iq4_nl|iq4_xs|q2_k|q3_k|q4_k|q5_k|q6_k] [--group G] [--zero-points] [--scales f16|bf16] [--x-int8]
//                [--x-int8-gemm]
//                [--region ID] [--no-check] [--threads T]
//
// --path names an ISA variant of the kernel table (csrc/rvv_inductor/kernel_isas.inl); the
// run uses exactly that variant's features. Quantized weights (--weights int8|int4) are
// packed; --group G is the group size along K (int8: 0 = one scale per output channel,
// the default; int4: 32, 64 or 128, default 32), --zero-points stores a zero point per
// group (int4), --scales the scale dtype (default f16, as GGUF files have). --x-int8 lets
// the dispatcher quantize the activations to int8 for int4 decode (M == 1, kX8Gemv);
// --x-int8-gemm for int8/int4 calls with M >= 2 (kX8Gemm, rvv/gemm_quant_x8_packed.h).
//
// --threads T: LinearOperands::nthreads (default 1; 0 = the OpenMP default). With T > 1
// libgomp's pool is started before the region, so the region holds the work, not thread
// creation; count with OMP_WAIT_POLICY=passive (idle workers sleep instead of spinning).
//
// Prints one JSON line describing the run (shape, format, kernel that ran, buffer sizes,
// check).
//
// Setup is built to be cheap under emulation, because the plugin still sees it: the
// weight's rows repeat with period P = the packing block width, so the packed form is
// one packed block copied with memcpy instead of N*K scalar element moves (for the
// 467 MB lm_head weight that is seconds instead of many minutes). Instruction counts do
// not depend on the values: the kernels have no data-dependent control flow.
#include <dlfcn.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "rvv_inductor/markers.h"
#include "rvv_inductor/bf16.h"
#include "rvv_inductor/cpu_features.h"
#include "rvv_inductor/linear.h"
#include "rvv_inductor/packing.h"
#include "rvv_inductor/quant_packing.h"
#include "rvv_inductor/quant_x8.h"

namespace ri = rvv_inductor;

namespace {

[[noreturn]] void die(const char* fmt, const char* a = "", const char* b = "") {
  std::fprintf(stderr, "linear_bench: ");
  std::fprintf(stderr, fmt, a, b);
  std::fprintf(stderr, "\n");
  std::exit(2);
}

struct AlignedFree {
  void operator()(void* p) const { ::operator delete(p, std::align_val_t(64)); }
};
template <class T>
std::unique_ptr<T[], AlignedFree> alloc(size_t n) {
  void* p = ::operator new(n * sizeof(T) + 64, std::align_val_t(64), std::nothrow);
  if (!p) die("out of memory");
  return std::unique_ptr<T[], AlignedFree>(static_cast<T*>(p));
}

// Deterministic values in [-1, 1), exactly representable in bf16.
uint16_t rand_bf16(uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  const float f = float(int32_t(s >> 40) - (1 << 23)) / float(1 << 23);
  return ri::f32_to_bf16(f);
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "rvv", format = "packed", weights = "bf16", scales = "f16";
  int64_t M = 1, K = 0, N = 0;
  int group = -1;
  bool zero_points = false, x_int8 = false, x_int8_gemm = false;
  int region = 1, threads = 1;
  bool check = true;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) die("%s needs a value", a.c_str());
      return argv[++i];
    };
    if (a == "--path") path = next();
    else if (a == "--format") format = next();
    else if (a == "--m") M = std::atoll(next());
    else if (a == "--k") K = std::atoll(next());
    else if (a == "--n") N = std::atoll(next());
    else if (a == "--weights") weights = next();
    else if (a == "--group") group = std::atoi(next());
    else if (a == "--zero-points") zero_points = true;
    else if (a == "--x-int8") x_int8 = true;
    else if (a == "--x-int8-gemm") x_int8_gemm = true;
    else if (a == "--scales") scales = next();
    else if (a == "--region") region = std::atoi(next());
    else if (a == "--no-check") check = false;
    else if (a == "--threads") threads = std::atoi(next());
    else die("unknown argument %s", a.c_str());
  }
  if (M < 1 || K < 1 || N < 1) die("--m, --k and --n must be >= 1");
  if (region < 1 || region > 2047) die("--region must be in 1..2047");
  if (threads < 0 || threads > 256) die("--threads must be in 0..256");

  rvv_cpu_features hw{};
  rvv_detect_cpu(&hw);
  ri::KernelPath want_path = ri::KernelPath::kScalar;
  bool known = path == "scalar";
  for (ri::KernelPath kp : {ri::KernelPath::kRvv, ri::KernelPath::kRvvZvfh, ri::KernelPath::kRvvZvfbf})
    if (path == ri::kernel_path_name(kp)) want_path = kp, known = true;
  if (!known) die("--path must be scalar, rvv, rvv_zvfh or rvv_zvfbf (got %s)", path.c_str());
  const rvv_cpu_features cpu = ri::features_for_path(want_path, hw.vlenb);
  if (want_path != ri::KernelPath::kScalar) {
    // The variant's features must all be present, or the dispatcher would quietly fall back.
    rvv_cpu_features both = cpu;
    both.has_v &= hw.has_v, both.has_zvfh &= hw.has_zvfh;
    both.has_zvfbfmin &= hw.has_zvfbfmin, both.has_zvfbfwma &= hw.has_zvfbfwma;
    if (std::memcmp(&both, &cpu, sizeof cpu) != 0)
      die("--path %s: this CPU lacks the variant's extensions (QEMU_CPU: v=true; Zfh=true on QEMU 7.2 or zvfh=true "
          "for rvv_zvfh; zvfbfmin=true,zvfbfwma=true on QEMU >= 8 for rvv_zvfbf)", path.c_str());
  }
  const bool packed = format == "packed";
  if (!packed && format != "rowmajor") die("--format must be packed or rowmajor (got %s)", format.c_str());
  ri::DType wfmt = ri::DType::kBF16;
  if (weights == "int8") wfmt = ri::DType::kInt8;
  else if (weights == "int4") wfmt = ri::DType::kInt4;
  else if (weights != "bf16") {
    // The GGUF block formats by their names in weight_formats.inl (q4_1, q5_0, ..., q6_k).
    for (const ri::WeightFormatTraits& t : ri::kWeightFormats)
      if (t.record_bytes > 0 && weights == t.name) wfmt = t.code;
    if (wfmt == ri::DType::kBF16) die("--weights must be bf16, int8, int4 or a GGUF block format (q4_1, q5_0, q5_1, iq4_nl, iq4_xs, q2_k, "
                                                  "q3_k, q4_k, q5_k, q6_k; got %s)", weights.c_str());
  }
  const bool blockq = ri::is_block_format(wfmt);
  const bool quant = wfmt != ri::DType::kBF16 && !blockq;
  if ((quant || blockq) && !packed) die("--weights %s needs --format packed", weights.c_str());
  if (blockq && K % ri::weight_format(wfmt)->super_rows)
    die("--weights %s needs K a multiple of its super-block (%s rows)", weights.c_str(),
        std::to_string(ri::weight_format(wfmt)->super_rows).c_str());
  if (!quant && (group >= 0 || zero_points)) die("--group and --zero-points are for int8/int4 weights");
  if (scales != "f16" && scales != "bf16") die("--scales must be f16 or bf16 (got %s)", scales.c_str());
  const ri::QuantSpec spec{wfmt, group >= 0 ? group : (wfmt == ri::DType::kInt4 ? 32 : 0),
                           scales == "f16" ? ri::DType::kF16 : ri::DType::kBF16, zero_points};
  char err[256];
  if (quant && ri::validate_quant_spec(spec, err, sizeof err) != ri::Status::kOk) die("%s", err);

  // Weight rows repeat with period P; P = nb makes every packed block identical.
  const int64_t nb = packed ? ri::preferred_nb(cpu) : 64;
  const int64_t P = nb < N ? nb : N;
  uint64_t seed = 0x5eed;
  std::vector<uint16_t> wrows(size_t(P * K));
  for (auto& v : wrows) v = rand_bf16(seed);
  auto x = alloc<uint16_t>(size_t(M * K));
  for (int64_t i = 0; i < M * K; i++) x[i] = rand_bf16(seed);

  // Quantized: the P distinct rows quantized by the reference quantizer, and their
  // dequantized values for the check.
  const int64_t G = quant ? ri::quant_num_groups(spec, K) : 0;
  std::vector<int8_t> qv(quant ? size_t(P * K) : 0);
  std::vector<uint16_t> qs(size_t(P * G));
  std::vector<uint8_t> qz(size_t(P * G));
  std::vector<double> wref(size_t(P * K));
  if (quant) {
    if (ri::quantize_reference(spec, wrows.data(), K, P, K, qv.data(), qs.data(), qz.data(), err, sizeof err) !=
        ri::Status::kOk)
      die("quantize: %s", err);
    const int64_t gr = ri::quant_group_rows(spec, K);
    for (int64_t n = 0; n < P; n++)
      for (int64_t k = 0; k < K; k++) {
        const int64_t g = k / gr;
        const int z = spec.zero_points ? qz[size_t(n * G + g)] : ri::implicit_zero(wfmt);
        wref[size_t(n * K + k)] = double(qv[size_t(n * K + k)] - z) * ri::scale_to_f32(qs[size_t(n * G + g)], spec.scale_dtype);
      }
  } else if (!blockq) {
    for (size_t i = 0; i < wref.size(); i++) wref[i] = ri::bf16_to_f32(wrows[i]);
  }
  // GGUF block formats: P rows of random file blocks (random integer bits, f16 scales and
  // mins around 2^-8 of both signs where the file keeps them: d and m / dmin first in Q4_1,
  // Q5_1 and Q4_K/Q5_K, d first in Q5_0, IQ4_NL and IQ4_XS, d + dmin at byte 80 in Q2_K,
  // d at 108 in Q3_K and at 208 in Q6_K), their values read back from the packed form.
  std::vector<uint8_t> fblocks;
  int64_t fb_row = 0;
  if (blockq) {
    const ri::WeightFormatTraits& t = *ri::weight_format(wfmt);
    fb_row = K / t.super_rows * t.file_block_bytes;
    fblocks.resize(size_t(P * fb_row));
    for (auto& b : fblocks) b = uint8_t(rand_bf16(seed));
    for (int64_t off = 0; off < P * fb_row; off += t.file_block_bytes) {
      const int d_at = wfmt == ri::DType::kQ6_K ? 208 : wfmt == ri::DType::kQ3_K ? 108 : wfmt == ri::DType::kQ2_K ? 80 : 0;
      const bool one = wfmt == ri::DType::kQ6_K || wfmt == ri::DType::kQ3_K || wfmt == ri::DType::kQ5_0 ||
                       wfmt == ri::DType::kIQ4_NL || wfmt == ri::DType::kIQ4_XS;
      for (int h = 0; h < (one ? 1 : 2); ++h) {
        const uint16_t v = ri::f32_to_f16(std::ldexp(1.0f + float(rand_bf16(seed) % 16) / 16, -8) *
                                          (rand_bf16(seed) % 2 ? 1.0f : -1.0f));
        std::memcpy(&fblocks[size_t(off + d_at + 2 * h)], &v, 2);
      }
    }
  }

  std::unique_ptr<uint16_t[], AlignedFree> w;
  ri::PackedLayout layout{};
  int64_t w_bytes;
  if (packed) {
    layout = blockq  ? ri::make_block_layout(wfmt, N, K, nb, cpu.vlenb)
             : quant ? ri::make_quant_layout(spec, N, K, nb, cpu.vlenb)
                     : ri::make_packed_layout(N, K, nb, cpu.vlenb);
    w_bytes = layout.bytes;
    w = alloc<uint16_t>(size_t(w_bytes + 1) / 2);
    const int64_t nblk = layout.num_blocks;
    const int64_t blk = nblk > 0 ? w_bytes / nblk : 0;
    char* base = reinterpret_cast<char*>(w.get());
    auto pack_rows = [&](int64_t rows, char* out) {
      const ri::Status st = blockq ? ri::pack_gguf_blocks(wfmt, fblocks.data(), fb_row, rows, K, nb,
                                                          reinterpret_cast<uint8_t*>(out), err, sizeof err)
                            : quant ? ri::pack_quantized(spec, qv.data(), K, qs.data(), qz.data(), rows, K, nb,
                                                       reinterpret_cast<uint8_t*>(out), err, sizeof err)
                                  : ri::pack_bf16(wrows.data(), K, rows, K, nb, reinterpret_cast<uint16_t*>(out), err,
                                                  sizeof err);
      if (st != ri::Status::kOk) die("packing failed: %s", err);
    };
    pack_rows(P, base);
    if (blockq) {  // the reference values of the P distinct rows, from the packed form
      const ri::PackedLayout lp = ri::make_block_layout(wfmt, P, K, nb, cpu.vlenb);
      for (int64_t n = 0; n < P; n++)
        for (int64_t k = 0; k < K; k++)
          wref[size_t(n * K + k)] = ri::block_dequantized_weight(reinterpret_cast<const uint8_t*>(base), lp, n, k);
    }
    for (int64_t b = 1; b < nblk; b++) {
      const int64_t cols = N - b * nb < nb ? N - b * nb : nb;
      if (cols == nb)
        std::memcpy(base + b * blk, base, size_t(blk));
      else
        pack_rows(cols, base + b * blk);
    }
  } else {
    w_bytes = N * K * 2;
    w = alloc<uint16_t>(size_t(N * K));
    for (int64_t n = 0; n < N; n++) std::memcpy(w.get() + n * K, wrows.data() + (n % P) * K, size_t(K) * 2);
  }
  auto y = alloc<uint16_t>(size_t(M * N));
  const int64_t scratch_n = ri::linear_scratch_floats(M, K);
  auto scratch = alloc<float>(size_t(scratch_n));

  ri::LinearProblem p{};
  p.M = M;
  p.N = N;
  p.K = K;
  p.x = x.get();
  p.ldx = K;
  p.weight_layout = packed ? ri::WeightLayout::kPacked : ri::WeightLayout::kRowMajor;
  p.w = w.get();
  p.layout = packed ? &layout : nullptr;
  p.ldw = K;
  p.nb = packed ? nb : 0;
  p.bias = nullptr;
  p.y = y.get();
  p.ldy = N;
  p.y_dtype = ri::DType::kBF16;
  p.block_begin = 0;
  p.block_end = -1;
  // A caller-owned scratch, as Inductor keeps one per thread: the region then measures
  // the kernel, not malloc.
  p.scratch = scratch.get();
  p.scratch_floats = scratch_n;
  p.x_int8 = (x_int8 ? ri::kX8Gemv : 0) | (x_int8_gemm ? ri::kX8Gemm : 0);
  p.nthreads = threads;
  const int threads_used = ri::linear_threads(threads);
  if (threads_used > 1) {
    // Start libgomp's pool at full size outside the region (the warm-up below may use fewer).
    if (void* h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_LOCAL))
      if (auto par = reinterpret_cast<void (*)(void (*)(void*), void*, unsigned, unsigned)>(dlsym(h, "GOMP_parallel")))
        par([](void*) {}, nullptr, unsigned(threads_used), 0);
  }

  // Warm-up: the same call on the first few column blocks, outside any region. It runs
  // the same code (and the one-time CPU detection); a full-width warm-up would only
  // double the emulation time of the big shapes. Caches are modelled cold anyway.
  ri::KernelPath used;
  ri::LinearProblem warm = p;
  ri::PackedLayout warm_layout{};
  warm.N = N < 4 * nb ? N : 4 * nb;
  if (packed) {
    warm_layout = blockq  ? ri::make_block_layout(wfmt, warm.N, K, nb, cpu.vlenb)
                  : quant ? ri::make_quant_layout(spec, warm.N, K, nb, cpu.vlenb)
                          : ri::make_packed_layout(warm.N, K, nb, cpu.vlenb);
    warm.layout = &warm_layout;
  }
  if (ri::linear_bf16(warm, cpu, &used, err, sizeof err) != ri::Status::kOk) die("warm-up call failed: %s", err);
  std::memset(y.get(), 0, size_t(M * N) * 2);

  rvv_bench_tag(RVV_BENCH_TAG_CLEAR, nullptr, 0);
  rvv_bench_tag(RVV_BENCH_TAG_WEIGHTS, w.get(), size_t(w_bytes));
  rvv_bench_tag(RVV_BENCH_TAG_INPUT, x.get(), size_t(M * K) * 2);
  rvv_bench_tag(RVV_BENCH_TAG_OUTPUT, y.get(), size_t(M * N) * 2);
  rvv_bench_tag(RVV_BENCH_TAG_SCRATCH, scratch.get(), size_t(scratch_n) * 4);
  ri::Status st;
  // The region id must be a compile-time immediate, so the common ids are spelled out.
  switch (region) {
#define RVV_BENCH_CASE(ID)                       \
  case ID:                                       \
    RVV_BENCH_BEGIN(ID);                         \
    st = ri::linear_bf16(p, cpu, &used, err, sizeof err); \
    RVV_BENCH_END(ID);                           \
    break;
    RVV_BENCH_CASE(1)
    RVV_BENCH_CASE(2)
    RVV_BENCH_CASE(3)
    RVV_BENCH_CASE(4)
#undef RVV_BENCH_CASE
    default:
      die("--region must be 1..4 in this program");
  }
  rvv_bench_tag(RVV_BENCH_TAG_CLEAR, nullptr, 0);
  if (st != ri::Status::kOk) die("measured call failed: %s", err);

  // Spot-check outputs against a double-precision dot product.
  int bad = 0, checked = 0;
  if (check) {
    uint64_t s = 0xc4ec;
    for (int t = 0; t < 32; t++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      const int64_t m = int64_t((s >> 33) % uint64_t(M)), n = int64_t((s >> 7) % uint64_t(N));
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; k++) {
        const double prod = double(ri::bf16_to_f32(x[m * K + k])) * wref[size_t((n % P) * K + k)];
        ref += prod;
        mag += std::fabs(prod);
      }
      const double got = ri::bf16_to_f32(y[m * N + n]);
      // bf16 output rounding (2^-8 relative) plus fp32 accumulation error; with int8
      // activations also their quantization (at most 1/254 of |x| max per term).
      const double xq = x_int8 || x_int8_gemm ? mag / 127.0 : 0.0;
      if (std::fabs(got - ref) > std::fabs(ref) * 1.0 / 128 + mag * 1e-5 + xq + 1e-6) bad++;
      checked++;
    }
  }
  const char* kernel = ri::selected_kernel_name(p, cpu);
  std::printf(
      "{\"program\": \"linear_bench\", \"path\": \"%s\", \"path_used\": \"%s\", \"kernel\": \"%s\", "
      "\"format\": \"%s\", \"weights\": \"%s\", \"group\": %d, \"zero_points\": %d, \"scales\": \"%s\", "
      "\"x_int8\": %d, \"x_int8_gemm\": %d, \"threads\": %d, \"threads_used\": %d, "
      "\"M\": %" PRId64 ", \"K\": %" PRId64 ", \"N\": %" PRId64 ", \"nb\": %" PRId64 ", \"vlenb\": %d, "
      "\"weight_bytes\": %" PRId64 ", \"weight_buffer_bytes\": %" PRId64 ", \"packed_bytes\": %" PRId64
      ", \"x_bytes\": %" PRId64 ", \"y_bytes\": %" PRId64 ", \"region\": %d, \"checked\": %d, \"check_failures\": %d}\n",
      path.c_str(), ri::kernel_path_name(used), kernel ? kernel : "?", format.c_str(), weights.c_str(),
      quant ? int(spec.group_size) : 0, zero_points ? 1 : 0, quant ? scales.c_str() : "", x_int8 ? 1 : 0, x_int8_gemm ? 1 : 0, threads, threads_used, M, K, N,
      packed ? nb : int64_t(0), hw.vlenb, N * K * 2, w_bytes, w_bytes, M * K * 2, M * N * 2, region, checked, bad);
  return bad ? 1 : 0;
}
