// One BF16 Linear call, Y[M,N] = X[M,K] . W^T, through the project's dispatcher
// (rvv_inductor::linear_bf16, the entry every user path reaches), charged to a marker
// region for the rvvcount plugin. Run under QEMU with the plugin; see bench/run.sh.
//
//   linear_bench --path scalar|rvv|rvv_zvfbf --format packed|rowmajor --m M --k K --n N
//                [--region ID] [--no-check]
//
// Prints one JSON line describing the run (shape, path that ran, buffer sizes, check).
//
// Setup is built to be cheap under emulation, because the plugin still sees it: the
// weight's rows repeat with period P = the packing block width, so the packed form is
// one packed block copied with memcpy instead of N*K scalar element moves (for the
// 467 MB lm_head weight that is seconds instead of many minutes). Instruction counts do
// not depend on the values: the kernels have no data-dependent control flow.
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
  std::string path = "rvv", format = "packed";
  int64_t M = 1, K = 0, N = 0;
  int region = 1;
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
    else if (a == "--region") region = std::atoi(next());
    else if (a == "--no-check") check = false;
    else die("unknown argument %s", a.c_str());
  }
  if (M < 1 || K < 1 || N < 1) die("--m, --k and --n must be >= 1");
  if (region < 1 || region > 2047) die("--region must be in 1..2047");

  rvv_cpu_features hw{};
  rvv_detect_cpu(&hw);
  rvv_cpu_features cpu = hw;
  if (path == "scalar") {
    cpu.has_v = 0;
    cpu.vlenb = 0;
    cpu.has_zvfh = cpu.has_zvfbfmin = cpu.has_zvfbfwma = 0;
  } else if (path == "rvv") {
    if (!hw.has_v) die("--path rvv: this CPU has no V (set QEMU_CPU with v=true)");
    cpu.has_zvfbfmin = cpu.has_zvfbfwma = 0;
  } else if (path == "rvv_zvfbf") {
    if (!hw.has_v || !hw.has_zvfbfmin || !hw.has_zvfbfwma)
      die("--path rvv_zvfbf: CPU lacks Zvfbfmin/Zvfbfwma (QEMU >= 8 with zvfbfmin=true,zvfbfwma=true)");
  } else {
    die("--path must be scalar, rvv or rvv_zvfbf (got %s)", path.c_str());
  }
  const bool packed = format == "packed";
  if (!packed && format != "rowmajor") die("--format must be packed or rowmajor (got %s)", format.c_str());

  // Weight rows repeat with period P; P = nb makes every packed block identical.
  const int64_t nb = packed ? ri::preferred_nb(cpu) : 64;
  const int64_t P = nb < N ? nb : N;
  uint64_t seed = 0x5eed;
  std::vector<uint16_t> wrows(size_t(P * K));
  for (auto& v : wrows) v = rand_bf16(seed);
  auto x = alloc<uint16_t>(size_t(M * K));
  for (int64_t i = 0; i < M * K; i++) x[i] = rand_bf16(seed);

  std::unique_ptr<uint16_t[], AlignedFree> w;
  ri::PackedLayout layout{};
  int64_t w_elems;
  if (packed) {
    layout = ri::make_packed_layout(N, K, nb, cpu.vlenb);
    w_elems = layout.elements;
    w = alloc<uint16_t>(size_t(w_elems));
    const int64_t blk = K * nb, nblk = layout.num_blocks;
    if (ri::pack_bf16(wrows.data(), K, P, K, nb, w.get()) != ri::Status::kOk) die("pack_bf16 failed");
    for (int64_t b = 1; b < nblk; b++) {
      const int64_t cols = N - b * nb < nb ? N - b * nb : nb;
      if (cols == nb)
        std::memcpy(w.get() + b * blk, w.get(), size_t(blk) * 2);
      else if (ri::pack_bf16(wrows.data(), K, cols, K, nb, w.get() + b * blk) != ri::Status::kOk)
        die("pack_bf16 failed");
    }
  } else {
    w_elems = N * K;
    w = alloc<uint16_t>(size_t(w_elems));
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

  // Warm-up: the same call on the first few column blocks, outside any region. It runs
  // the same code (and the one-time CPU detection); a full-width warm-up would only
  // double the emulation time of the big shapes. Caches are modelled cold anyway.
  char err[256];
  ri::KernelPath used;
  ri::LinearProblem warm = p;
  ri::PackedLayout warm_layout{};
  warm.N = N < 4 * nb ? N : 4 * nb;
  if (packed) {
    warm_layout = ri::make_packed_layout(warm.N, K, nb, cpu.vlenb);
    warm.layout = &warm_layout;
  }
  if (ri::linear_bf16(warm, cpu, &used, err, sizeof err) != ri::Status::kOk) die("warm-up call failed: %s", err);
  std::memset(y.get(), 0, size_t(M * N) * 2);

  rvv_bench_tag(RVV_BENCH_TAG_CLEAR, nullptr, 0);
  rvv_bench_tag(RVV_BENCH_TAG_WEIGHTS, w.get(), size_t(w_elems) * 2);
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
        const double prod = double(ri::bf16_to_f32(x[m * K + k])) * ri::bf16_to_f32(wrows[(n % P) * K + k]);
        ref += prod;
        mag += std::fabs(prod);
      }
      const double got = ri::bf16_to_f32(y[m * N + n]);
      // bf16 output rounding (2^-8 relative) plus fp32 accumulation error.
      if (std::fabs(got - ref) > std::fabs(ref) * 1.0 / 128 + mag * 1e-5 + 1e-6) bad++;
      checked++;
    }
  }
  std::printf(
      "{\"program\": \"linear_bench\", \"path\": \"%s\", \"path_used\": \"%s\", \"format\": \"%s\", "
      "\"M\": %" PRId64 ", \"K\": %" PRId64 ", \"N\": %" PRId64 ", \"nb\": %" PRId64 ", \"vlenb\": %d, "
      "\"weight_bytes\": %" PRId64 ", \"weight_buffer_bytes\": %" PRId64 ", \"x_bytes\": %" PRId64
      ", \"y_bytes\": %" PRId64 ", \"region\": %d, \"checked\": %d, \"check_failures\": %d}\n",
      path.c_str(), ri::kernel_path_name(used), format.c_str(), M, K, N, packed ? nb : int64_t(0), hw.vlenb,
      N * K * 2, w_elems * 2, M * K * 2, M * N * 2, region, checked, bad);
  return bad ? 1 : 0;
}
