// Baseline: ATen's BF16 F.linear (at::linear) in the riscv64 PyTorch users have today
// (Debian's python3-torch / libtorch), one thread, each call charged to a marker region
// for the rvvcount plugin. Built by bench/run.sh against the root filesystem's libtorch.
//
//   aten_linear [--bias] [--3d] M:K:N [M:K:N ...]
//
// Shape i (from 0) is measured as region i + 1, after a warm-up call outside regions;
// one JSON line per shape. Several shapes share one process because loading libtorch
// costs ~15 s of emulation, far more than one call. --bias adds a BF16 bias (Qwen2.5's
// q/k/v projections have one; the benchmarked layers do not); --3d passes X as
// [1, M, K], the way a transformer's hidden states arrive. Neither changes the counts
// by more than 0.1% (checked at 1536->2048, M=1).
//
// The weight's rows repeat with a period of 64 (filled with memcpy) so that setting up a
// 467 MB lm_head weight takes seconds under emulation; ATen's kernels have no
// data-dependent control flow, so the counts do not depend on the values.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <c10/util/BFloat16.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "rvv_inductor/markers.h"

namespace {

constexpr int kMaxRegions = 64;

// Region ids are instruction immediates, so each id needs its own instantiation.
template <int ID>
void measured(const std::function<void()>& f) {
  RVV_BENCH_BEGIN(ID);
  f();
  RVV_BENCH_END(ID);
}
template <size_t... I>
void run_region_impl(int id, const std::function<void()>& f, std::index_sequence<I...>) {
  using Fn = void (*)(const std::function<void()>&);
  static constexpr Fn table[] = {&measured<int(I) + 1>...};
  table[id - 1](f);
}
void run_region(int id, const std::function<void()>& f) {
  run_region_impl(id, f, std::make_index_sequence<kMaxRegions>());
}

struct Shape {
  int64_t M, K, N;
};

}  // namespace

int main(int argc, char** argv) {
  bool with_bias = false, three_d = false;
  std::vector<Shape> shapes;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    long long m, k, n;
    if (a == "--bias") with_bias = true;
    else if (a == "--3d") three_d = true;
    else if (std::sscanf(a.c_str(), "%lld:%lld:%lld", &m, &k, &n) == 3 && m > 0 && k > 0 && n > 0)
      shapes.push_back(Shape{m, k, n});
    else {
      std::fprintf(stderr, "usage: aten_linear [--bias] [--3d] M:K:N [M:K:N ...] (bad argument '%s')\n", a.c_str());
      return 2;
    }
  }
  if (shapes.empty() || shapes.size() > size_t(kMaxRegions)) {
    std::fprintf(stderr, "aten_linear: give 1..%d shapes M:K:N\n", kMaxRegions);
    return 2;
  }
  // What a single-threaded user gets (torch.set_num_threads(1)); it also keeps helper
  // threads from being spawned while a region is open.
  at::set_num_threads(1);
  const auto opt = at::TensorOptions().dtype(at::kBFloat16);
  uint64_t s = 0x5eed;
  auto rnd = [&s]() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return c10::BFloat16(float(int32_t(s >> 40) - (1 << 23)) / float(1 << 23));
  };
  int failures = 0;
  for (size_t i = 0; i < shapes.size(); i++) {
    const int64_t M = shapes[i].M, K = shapes[i].K, N = shapes[i].N;
    at::Tensor x = at::empty({M, K}, opt), w = at::empty({N, K}, opt);
    auto* xp = x.data_ptr<c10::BFloat16>();
    for (int64_t j = 0; j < M * K; j++) xp[j] = rnd();
    auto* wp = w.data_ptr<c10::BFloat16>();
    const int64_t P = N < 64 ? N : 64;
    for (int64_t j = 0; j < P * K; j++) wp[j] = rnd();
    for (int64_t n = P; n < N; n++) std::memcpy(wp + n * K, wp + (n % P) * K, size_t(K) * 2);
    c10::optional<at::Tensor> bias;
    if (with_bias) {
      bias = at::empty({N}, opt);
      auto* bp = bias->data_ptr<c10::BFloat16>();
      for (int64_t j = 0; j < N; j++) bp[j] = rnd();
    }
    const at::Tensor xin = three_d ? x.view({1, M, K}) : x;

    // Warm-up outside the region: the same call on the first 64 output features (same
    // code path and lazy initialisation; the full width would double the emulation time).
    const int64_t nw = N < 64 ? N : 64;
    at::Tensor y = at::linear(xin, w.narrow(0, 0, nw), bias ? c10::optional<at::Tensor>(bias->narrow(0, 0, nw)) : bias);
    y.reset();
    rvv_bench_tag(RVV_BENCH_TAG_CLEAR, nullptr, 0);
    rvv_bench_tag(RVV_BENCH_TAG_WEIGHTS, wp, size_t(N * K) * 2);
    rvv_bench_tag(RVV_BENCH_TAG_INPUT, xp, size_t(M * K) * 2);
    const int region = int(i) + 1;
    run_region(region, [&] { y = at::linear(xin, w, bias); });
    rvv_bench_tag(RVV_BENCH_TAG_CLEAR, nullptr, 0);

    // Spot check of output [0, 0] so that a broken baseline cannot go unnoticed.
    double ref = with_bias ? double(float(bias->data_ptr<c10::BFloat16>()[0])) : 0.0, mag = 0;
    for (int64_t k = 0; k < K; k++) {
      const double p = double(float(xp[k])) * double(float(wp[k]));
      ref += p;
      mag += p < 0 ? -p : p;
    }
    const double got = float(y.data_ptr<c10::BFloat16>()[0]);
    const double err = got > ref ? got - ref : ref - got;
    const bool ok = err <= (ref < 0 ? -ref : ref) / 128 + mag * 1e-5 + 1e-6;
    failures += !ok;
    std::printf(
        "{\"program\": \"aten_linear\", \"path\": \"aten\", \"path_used\": \"aten\", \"format\": \"rowmajor\", "
        "\"M\": %" PRId64 ", \"K\": %" PRId64 ", \"N\": %" PRId64 ", \"nb\": 0, \"weight_bytes\": %" PRId64
        ", \"weight_buffer_bytes\": %" PRId64 ", \"x_bytes\": %" PRId64 ", \"y_bytes\": %" PRId64
        ", \"threads\": %d, \"bias\": %d, \"input_3d\": %d, \"region\": %d, \"checked\": 1, \"check_failures\": %d}\n",
        M, K, N, N * K * 2, N * K * 2, M * K * 2, M * N * 2, at::get_num_threads(), int(with_bias), int(three_d),
        region, ok ? 0 : 1);
    std::fflush(stdout);
  }
  return failures ? 1 : 0;
}
