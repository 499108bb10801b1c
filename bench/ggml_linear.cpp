// The llama.cpp peer: one ggml_mul_mat, Y[M,N] = X[M,K] . W^T, with Debian's libggml
// (0.27.0) and whichever CPU backend variant ggml's registry picks at run time
// (libggml-cpu-riscv64_v.so with RVV, libggml-cpu-riscv64_0.so without), charged to a
// marker region for the rvvcount plugin. Run under QEMU with the plugin; see bench/run.sh.
//
//   ggml_linear --weights q8_0|q4_0|q4_1|q5_0|q5_1|iq4_nl|iq4_xs|q2_k|q3_k|q4_k|q5_k|q6_k|f16|bf16
//               --m M --k K --n N [--region ID] [--no-check]
//
// As in llama.cpp's decode: W is a [N, K] tensor of the weight type (ggml ne = {K, N}),
// X an F32 [M, K] activation, one CPU backend with n_threads = 1, one graph with one
// MUL_MAT node computed by ggml_backend_graph_compute. The region covers that whole call:
// the CPU backend's graph plan and launch, the conversion of X to the weight type's
// vec_dot type (Q8_0 for Q8_0/Q4_0/Q5_0/IQ4_NL weights, Q8_1 for Q4_1/Q5_1, Q8_K for the
// K-quants Q2_K..Q6_K and IQ4_XS, F16/BF16 for F16/BF16) that ggml does inside the MUL_MAT, and the dot products. A second region (ID + 1) runs the same graph on a
// 1-row view of W: the per-call part (launch + activation conversion + one row).
// A warm-up call on a 64-row view of W runs first, outside any region (work buffer,
// OpenMP team, first-touch of the code).
//
// With n_threads = 1 ggml computes in the calling thread (no worker threads are
// started), which is the thread that opened the region: the plugin charges only that one.
//
// Prints one JSON line: shape, weight type and bytes, the CPU backend variant that was
// loaded (the shared object mapped into the process, the registry's device description,
// the backend's feature list) and an output spot check against a double-precision dot
// product of the dequantized weights and X. Weight rows repeat with period 64, copied with
// memcpy (cheap setup under emulation); the kernels have no data-dependent control flow.
// Q8_0/Q4_0 rows are random blocks; the other block types (the K-quants and IQ4_XS need K
// a multiple of 256) are a random FP32 W quantized by ggml's own quantizer
// (ggml_quantize_chunk, no importance matrix: none of these types requires one), as
// llama-quantize would, so their sub-block scales and mins are valid.
#include <link.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "rvv_inductor/markers.h"

namespace {

[[noreturn]] void die(const char* fmt, const char* a = "") {
  std::fprintf(stderr, "ggml_linear: ");
  std::fprintf(stderr, fmt, a);
  std::fprintf(stderr, "\n");
  std::exit(2);
}

uint64_t rng = 0x9e3779b97f4a7c15ull;
uint32_t next_u32() {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return uint32_t(rng >> 32);
}
float next_unit() { return float(int32_t(next_u32() >> 8) - (1 << 23)) / float(1 << 23); }  // [-1, 1)

// Fills one weight row of `bytes` bytes with valid blocks of `type`.
void fill_row(ggml_type type, int64_t K, uint8_t* row) {
  switch (type) {
    case GGML_TYPE_F16: {
      auto* p = reinterpret_cast<ggml_fp16_t*>(row);
      for (int64_t k = 0; k < K; k++) p[k] = ggml_fp32_to_fp16(next_unit());
      break;
    }
    case GGML_TYPE_BF16: {
      auto* p = reinterpret_cast<ggml_bf16_t*>(row);
      for (int64_t k = 0; k < K; k++) p[k] = ggml_fp32_to_bf16(next_unit());
      break;
    }
    case GGML_TYPE_Q8_0:  // {fp16 d; int8 qs[32]}
    case GGML_TYPE_Q4_0: {  // {fp16 d; uint8 qs[16]} (two 4-bit values per byte, offset 8)
      const int64_t nblk = K / 32;
      const size_t bsz = ggml_type_size(type), nq = bsz - sizeof(ggml_fp16_t);
      for (int64_t b = 0; b < nblk; b++) {
        uint8_t* blk = row + b * bsz;
        const ggml_fp16_t d = ggml_fp32_to_fp16((type == GGML_TYPE_Q8_0 ? 1.0f / 127 : 1.0f / 8) *
                                                (0.5f + 0.5f * std::fabs(next_unit())));
        std::memcpy(blk, &d, sizeof d);
        for (size_t i = 0; i < nq; i++) {
          uint8_t q = uint8_t(next_u32() >> 24);
          if (type == GGML_TYPE_Q8_0 && q == 0x80) q = 0x81;  // keep int8 in [-127, 127]
          blk[sizeof d + i] = q;
        }
      }
      break;
    }
    case GGML_TYPE_Q4_1:
    case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q5_1:
    case GGML_TYPE_IQ4_NL:
    case GGML_TYPE_IQ4_XS:
    case GGML_TYPE_Q2_K:
    case GGML_TYPE_Q3_K:
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K:
    case GGML_TYPE_Q6_K: {  // ggml's quantizer on a random FP32 row
      std::vector<float> w(K);
      for (int64_t k = 0; k < K; k++) w[k] = next_unit();
      if (ggml_quantize_chunk(type, w.data(), row, 0, 1, K, nullptr) != ggml_row_size(type, K))
        die("ggml_quantize_chunk wrote an unexpected size");
      break;
    }
    default:
      die("unsupported weight type");
  }
}

struct Loaded {
  std::string path;
};
int find_cpu_so(dl_phdr_info* info, size_t, void* data) {
  const char* name = info->dlpi_name;
  if (name && std::strstr(name, "libggml-cpu")) static_cast<Loaded*>(data)->path = name;
  return 0;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (uint8_t(c) < 0x20) continue;
    o += c;
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::string wname = "q4_0";
  int64_t M = 1, K = 0, N = 0;
  int region = 1;
  bool check = true;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) die("%s needs a value", a.c_str());
      return argv[++i];
    };
    if (a == "--weights") wname = next();
    else if (a == "--m") M = std::atoll(next());
    else if (a == "--k") K = std::atoll(next());
    else if (a == "--n") N = std::atoll(next());
    else if (a == "--region") region = std::atoi(next());
    else if (a == "--no-check") check = false;
    else if (a == "-h" || a == "--help") {
      std::printf("ggml_linear --weights q8_0|q4_0|q4_1|q5_0|q5_1|iq4_nl|iq4_xs|q2_k|q3_k|q4_k|q5_k|q6_k|f16|bf16 "
                  "--m M --k K --n N [--region ID] [--no-check]\n");
      return 0;
    } else die("unknown argument %s", a.c_str());
  }
  ggml_type type;
  if (wname == "q8_0") type = GGML_TYPE_Q8_0;
  else if (wname == "q4_0") type = GGML_TYPE_Q4_0;
  else if (wname == "q4_1") type = GGML_TYPE_Q4_1;
  else if (wname == "q5_0") type = GGML_TYPE_Q5_0;
  else if (wname == "q5_1") type = GGML_TYPE_Q5_1;
  else if (wname == "iq4_nl") type = GGML_TYPE_IQ4_NL;
  else if (wname == "iq4_xs") type = GGML_TYPE_IQ4_XS;
  else if (wname == "q2_k") type = GGML_TYPE_Q2_K;
  else if (wname == "q3_k") type = GGML_TYPE_Q3_K;
  else if (wname == "q4_k") type = GGML_TYPE_Q4_K;
  else if (wname == "q5_k") type = GGML_TYPE_Q5_K;
  else if (wname == "q6_k") type = GGML_TYPE_Q6_K;
  else if (wname == "f16") type = GGML_TYPE_F16;
  else if (wname == "bf16") type = GGML_TYPE_BF16;
  else die("unknown --weights %s (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs, q2_k, q3_k, q4_k, q5_k, q6_k, f16, bf16)",
           wname.c_str());
  if (M < 1 || K < 32 || N < 1 || K % 32) die("need M >= 1, N >= 1 and K a positive multiple of 32");
  if (K % ggml_blck_size(type))
    die("--weights %s needs K a multiple of its block (256 for the K-quants and IQ4_XS)", wname.c_str());
  if (ggml_quantize_requires_imatrix(type)) die("--weights %s needs an importance matrix", wname.c_str());
  if (region < 1 || region > 2046) die("--region must be 1..2046");

  // ---------------------------------------------------------------- backend
  ggml_backend_load_all();  // picks the best-scoring libggml-cpu-*.so (riscv_hwprobe)
  ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (!dev) die("no CPU backend device (libggml-cpu-*.so not found?)");
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
  ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
  if (!backend) die("ggml_backend_dev_init failed");
  auto set_threads = reinterpret_cast<ggml_backend_set_n_threads_t>(
      ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads"));
  if (!set_threads) die("the CPU backend has no ggml_backend_set_n_threads");
  set_threads(backend, 1);

  std::string features;
  if (auto get_features = reinterpret_cast<ggml_backend_get_features_t>(
          ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"))) {
    for (ggml_backend_feature* f = get_features(reg); f && f->name; f++) {
      features += std::string(features.empty() ? "" : ", ") + "\"" + json_escape(f->name) + "\": \"" +
                  json_escape(f->value ? f->value : "") + "\"";
    }
  }
  std::string extra_bufts;
  if (auto get_extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
          ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"))) {
    for (ggml_backend_buffer_type_t* b = get_extra(dev); b && *b; b++)
      extra_bufts += std::string(extra_bufts.empty() ? "" : ", ") + "\"" + json_escape(ggml_backend_buft_name(*b)) + "\"";
  }
  Loaded loaded;
  dl_iterate_phdr(find_cpu_so, &loaded);
  std::string so = loaded.path.substr(loaded.path.find_last_of('/') + 1);
  if (so.empty()) so = "(built in)";

  // ---------------------------------------------------------------- tensors
  const int64_t warm_rows = N < 64 ? N : 64;
  ggml_init_params ip = {ggml_tensor_overhead() * 16 + ggml_graph_overhead() * 3, nullptr, true};
  ggml_context* ctx = ggml_init(ip);
  ggml_tensor* W = ggml_new_tensor_2d(ctx, type, K, N);
  ggml_tensor* X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
  ggml_tensor* Y = ggml_mul_mat(ctx, W, X);
  ggml_tensor* Wwarm = ggml_view_2d(ctx, W, K, warm_rows, W->nb[1], 0);
  ggml_tensor* Ywarm = ggml_mul_mat(ctx, Wwarm, X);
  ggml_tensor* W1 = ggml_view_2d(ctx, W, K, 1, W->nb[1], 0);
  ggml_tensor* Y1 = ggml_mul_mat(ctx, W1, X);
  ggml_cgraph* g = ggml_new_graph(ctx);
  ggml_build_forward_expand(g, Y);
  ggml_cgraph* gwarm = ggml_new_graph(ctx);
  ggml_build_forward_expand(gwarm, Ywarm);
  ggml_cgraph* g1 = ggml_new_graph(ctx);
  ggml_build_forward_expand(g1, Y1);
  ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
  if (!buf) die("allocating the tensors failed (out of memory?)");
  if (!ggml_backend_buffer_is_host(buf)) die("the CPU backend buffer is not host memory");
  if (!ggml_backend_supports_op(backend, Y)) die("the CPU backend does not support this MUL_MAT");

  const size_t row_bytes = ggml_row_size(type, K);
  auto* wd = static_cast<uint8_t*>(W->data);
  const int64_t period = warm_rows;
  for (int64_t r = 0; r < period; r++) fill_row(type, K, wd + r * row_bytes);
  for (int64_t r = period; r < N; r += period) {
    const int64_t n = (N - r) < period ? (N - r) : period;
    std::memcpy(wd + r * row_bytes, wd, n * row_bytes);
  }
  auto* xd = static_cast<float*>(X->data);
  for (int64_t i = 0; i < M * K; i++) xd[i] = next_unit();

  // ---------------------------------------------------------------- measure
  if (ggml_backend_graph_compute(backend, gwarm) != GGML_STATUS_SUCCESS) die("warm-up compute failed");
  rvv_bench_tag(RVV_BENCH_TAG_WEIGHTS, W->data, ggml_nbytes(W));
  rvv_bench_tag(RVV_BENCH_TAG_INPUT, X->data, ggml_nbytes(X));
  rvv_bench_tag(RVV_BENCH_TAG_OUTPUT, Y->data, ggml_nbytes(Y));
  ggml_status st, st1;
  switch (region) {  // the marker's immediate must be a constant
#define RVV_GGML_REGION(id)                   \
  case id:                                    \
    RVV_BENCH_BEGIN(id);                      \
    st = ggml_backend_graph_compute(backend, g); \
    RVV_BENCH_END(id);                        \
    RVV_BENCH_BEGIN(id + 1);                  \
    st1 = ggml_backend_graph_compute(backend, g1); \
    RVV_BENCH_END(id + 1);                    \
    break;
    RVV_GGML_REGION(1)
    RVV_GGML_REGION(3)
    RVV_GGML_REGION(5)
    RVV_GGML_REGION(7)
#undef RVV_GGML_REGION
    default:
      die("--region must be 1, 3, 5 or 7 (region+1 is the per-call region)");
  }
  rvv_bench_tag(RVV_BENCH_TAG_CLEAR, nullptr, 0);
  if (st != GGML_STATUS_SUCCESS || st1 != GGML_STATUS_SUCCESS) die("compute failed");

  // ---------------------------------------------------------------- check
  int checked = 0, failures = 0;
  double max_rel = 0;
  if (check) {
    const auto* tt = ggml_get_type_traits(type);
    std::vector<float> wrow(K);
    const auto* yd = static_cast<const float*>(Y->data);
    const float* y1 = static_cast<const float*>(Y1->data);
    for (int t = 0; t < 32; t++) {
      const int64_t n = (t * 7919 + 13) % N, m = t % M;
      tt->to_float(wd + n * row_bytes, wrow.data(), K);
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; k++) {
        ref += double(wrow[k]) * xd[m * K + k];
        mag += std::fabs(double(wrow[k]) * xd[m * K + k]);
      }
      // X is rounded to the vec_dot type inside the MUL_MAT: Q8_0 / Q8_1 (8 bits per
      // 32-block scale: |err| <= max|x|/254 per element), Q8_K (per 256-block, the same
      // bound), F16 (2^-11), BF16 (2^-8), relative.
      const bool xq8 = type != GGML_TYPE_F16 && type != GGML_TYPE_BF16;
      const double tol = (xq8 ? 1.0 / 127 : 1.0 / 128) * mag + 1e-4;
      const double err = std::fabs(double(yd[m * N + n]) - ref);
      if (mag > 0 && err / mag > max_rel) max_rel = err / mag;
      checked++;
      if (!(err <= tol)) failures++;
    }
    for (int64_t m = 0; m < M; m++) {  // the 1-row graph computed row 0 again
      checked++;
      if (!(std::fabs(y1[m] - yd[m * N]) <= 1e-5f * std::fabs(yd[m * N]) + 1e-6f)) failures++;
    }
  }

  std::printf(
      "{\"program\": \"ggml_linear\", \"region\": %d, \"per_call_region\": %d, \"weights\": \"%s\", "
      "\"M\": %" PRId64 ", \"K\": %" PRId64 ", \"N\": %" PRId64 ", \"threads\": 1, "
      "\"weight_bytes\": %zu, \"packed_bytes\": %zu, \"path_used\": \"%s\", \"ggml_cpu_so\": \"%s\", "
      "\"ggml_backend\": \"%s\", \"ggml_device\": \"%s\", \"ggml_features\": {%s}, \"ggml_extra_bufts\": [%s], "
      "\"checked\": %d, \"check_failures\": %d, \"max_rel_err\": %.3g}\n",
      region, region + 1, wname.c_str(), M, K, N, ggml_nbytes(W), ggml_nbytes(W), json_escape(so).c_str(),
      json_escape(loaded.path).c_str(), json_escape(ggml_backend_reg_name(reg)).c_str(),
      json_escape(ggml_backend_dev_description(dev)).c_str(), features.c_str(), extra_bufts.c_str(), checked,
      failures, max_rel);
  ggml_backend_buffer_free(buf);
  ggml_free(ctx);
  ggml_backend_free(backend);
  return failures ? 1 : 0;
}
