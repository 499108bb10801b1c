// llama.cpp on a GGUF file: prefill a prompt, then greedy (or teacher-forced) decode steps
// one token at a time, through Debian's libllama (llama.cpp 0.7.0, build 11669) and
// whichever ggml CPU backend variant ggml's registry loads at run time
// (libggml-cpu-riscv64_v.so with RVV, libggml-cpu-riscv64_0.so without). Each decode
// step's llama_decode + llama_synchronize is charged to marker region --region for the
// rvvcount plugin (bench/plugin); the region is opened and closed once per step, so the
// plugin reports `calls` = steps and the totals of all steps.
//
//   llama_decode GGUF --prompt 1,2,3 [--steps N] [--threads T] [--region ID]
//                [--prefill-region ID] [--feed 4,5,6] [--logits FILE] [--n-ctx C] [--verbose]
//
//   --steps N     decode steps after the prefill (default 8). N + 1 tokens are produced:
//                 the prefill's greedy token, then one per step.
//   --feed IDS    teacher forcing: step i feeds IDS[i] instead of the previous greedy token
//                 (exactly N ids). The reported tokens are still each position's argmax.
//   --threads T   llama_set_n_threads(T, T) (default 1). With T = 1 ggml computes in the
//                 calling thread, the one that opens the region; with T > 1 its OpenMP
//                 workers run inside the region too (the plugin charges every thread that
//                 runs while it is open: count with OMP_WAIT_POLICY=passive).
//   --region ID   1..2047 (default 1); 0: no markers.
//   --prefill-region ID  charge the prefill (one llama_decode of the whole prompt, one
//                 ubatch) to region ID, 1..2047, not --region's (default 0: not counted).
//   --logits FILE float32 little-endian rows of n_vocab: one per prompt position (the
//                 prefill then outputs every position's logits, not only the last), then
//                 one per decode step: (P + N) rows.
//
// Prints one JSON line on stdout: prompt, tokens (the argmax of the prefill's last
// position and of every step), n_vocab, n_ctx, threads, the ggml CPU backend variant
// loaded (the shared object mapped into the process, the registry's device description
// and feature list, llama_print_system_info) and wall times (load, prefill, each step).
// llama.cpp's own log goes to stderr (warnings and errors only unless --verbose).
//
// Debian ships libllama0 without a header (no libllama-dev): the few functions used are
// declared below, as in llama.h of llama.cpp 0.7.0 / build 11669 (Debian 1:0.7.0+dfsg-2),
// and the program links libllama.so.0 by file name. ggml's own headers (libggml-dev 0.27.0)
// are used for the backend registry.
//
// The two parameter structs (llama_model_params, llama_context_params) are taken by value
// and have changed layout across llama.cpp versions. They are handled as opaque byte
// blobs, larger than the real structs: under the RISC-V LP64D psABI an aggregate larger
// than 2 x XLEN is returned through a caller-provided buffer and passed by reference to a
// caller-made copy, so a larger blob is ABI-compatible with the real struct. The blob from
// llama_model_default_params() is passed back unchanged; in llama_context_params only the
// first three fields (uint32 n_ctx, n_batch, n_ubatch; unchanged since 2023) are written,
// after checking that the defaults there look like llama.cpp's (512/2048/512, n_seq_max 1)
// so that a different layout is an error, not a wrong run. Threads are set with
// llama_set_n_threads. llama_batch (7 fields, unchanged since 2023) is declared exactly.
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "rvv_inductor/markers.h"

#if !defined(__riscv) || __riscv_xlen != 64
#error "llama_decode relies on the RISC-V LP64 psABI for its opaque parameter blobs"
#endif

extern "C" {
struct llama_model;
struct llama_context;
struct llama_vocab;
typedef int32_t llama_token;
typedef int32_t llama_pos;
typedef int32_t llama_seq_id;
struct llama_batch {
  int32_t n_tokens;
  llama_token* token;
  float* embd;
  llama_pos* pos;
  int32_t* n_seq_id;
  llama_seq_id** seq_id;
  int8_t* logits;
};
struct llama_model_params_blob {
  alignas(16) unsigned char bytes[1024];
};
struct llama_context_params_blob {
  alignas(16) unsigned char bytes[1024];
};
void llama_backend_init(void);
void llama_backend_free(void);
llama_model_params_blob llama_model_default_params(void);
llama_context_params_blob llama_context_default_params(void);
llama_model* llama_model_load_from_file(const char* path, llama_model_params_blob params);
llama_context* llama_init_from_model(llama_model* model, llama_context_params_blob params);
void llama_free(llama_context* ctx);
void llama_model_free(llama_model* model);
const llama_vocab* llama_model_get_vocab(const llama_model* model);
int32_t llama_vocab_n_tokens(const llama_vocab* vocab);
uint32_t llama_n_ctx(const llama_context* ctx);
void llama_set_n_threads(llama_context* ctx, int32_t n_threads, int32_t n_threads_batch);
int32_t llama_n_threads(llama_context* ctx);
int32_t llama_decode(llama_context* ctx, llama_batch batch);
void llama_synchronize(llama_context* ctx);
float* llama_get_logits_ith(llama_context* ctx, int32_t i);
const char* llama_print_system_info(void);
uint64_t llama_model_size(const llama_model* model);
void llama_log_set(ggml_log_callback log_callback, void* user_data);
}
static_assert(sizeof(llama_batch) == 56, "llama_batch is 7 eight-byte fields on LP64");

namespace {

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "llama_decode: %s\n", msg.c_str());
  std::exit(2);
}

bool g_verbose = false;
void log_cb(ggml_log_level level, const char* text, void*) {
  if (g_verbose || level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

std::vector<llama_token> parse_ids(const std::string& s, const char* what) {
  std::vector<llama_token> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    const std::string tok = s.substr(i, j - i);
    char* end = nullptr;
    const long v = std::strtol(tok.c_str(), &end, 10);
    if (tok.empty() || *end || v < 0 || v > INT32_MAX) die(std::string(what) + ": not a list of token ids: " + s);
    out.push_back(llama_token(v));
    i = j + 1;
  }
  return out;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (uint8_t(c) < 0x20) {
      o += ' ';
      continue;
    }
    o += c;
  }
  return o;
}

int find_cpu_so(dl_phdr_info* info, size_t, void* data) {
  const char* name = info->dlpi_name;
  if (name && std::strstr(name, "libggml-cpu")) *static_cast<std::string*>(data) = name;
  return 0;
}

// One decode call charged to region ID (the marker's immediate must be a constant).
using StepFn = int32_t (*)(llama_context*, const llama_batch&);
template <int ID>
int32_t step_in_region(llama_context* ctx, const llama_batch& b) {
  RVV_BENCH_BEGIN(ID);
  const int32_t rc = llama_decode(ctx, b);
  llama_synchronize(ctx);
  RVV_BENCH_END(ID);
  return rc;
}
int32_t step_plain(llama_context* ctx, const llama_batch& b) {
  const int32_t rc = llama_decode(ctx, b);
  llama_synchronize(ctx);
  return rc;
}
template <size_t... I>
constexpr std::array<StepFn, sizeof...(I)> make_steps(std::index_sequence<I...>) {
  return {{&step_in_region<int(I) + 1>...}};
}
constexpr auto kSteps = make_steps(std::make_index_sequence<2047>{});

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

llama_token argmax(const float* v, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (v[i] > v[best]) best = i;  // first maximum, like torch.argmax
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, logits_path;
  std::vector<llama_token> prompt, feed;
  bool have_feed = false;
  long steps = 8, threads = 1, region = 1, prefill_region = 0, n_ctx_arg = 0;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    auto num = [&](long lo, long hi) {
      const std::string v = next();
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || x < lo || x > hi)
        die(a + " must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi) + ", not " + v);
      return x;
    };
    if (a == "--prompt") prompt = parse_ids(next(), "--prompt");
    else if (a == "--feed") feed = parse_ids(next(), "--feed"), have_feed = true;
    else if (a == "--steps") steps = num(0, 1 << 20);
    else if (a == "--threads") threads = num(1, 1024);
    else if (a == "--region") region = num(0, 2047);
    else if (a == "--prefill-region") prefill_region = num(0, 2047);
    else if (a == "--n-ctx") n_ctx_arg = num(0, 1 << 24);
    else if (a == "--logits") logits_path = next();
    else if (a == "--verbose") g_verbose = true;
    else if (a == "-h" || a == "--help") {
      std::printf("llama_decode GGUF --prompt IDS [--steps N] [--threads T] [--region ID] [--prefill-region ID] [--feed IDS] "
                  "[--logits FILE] [--n-ctx C] [--verbose]\n");
      return 0;
    } else if (!a.empty() && a[0] != '-' && path.empty()) path = a;
    else die("unknown argument " + a);
  }
  if (path.empty()) die("no GGUF file given");
  if (prompt.empty()) die("--prompt needs at least one token id");
  if (prefill_region && prefill_region == region) die("--prefill-region must differ from --region");
  if (have_feed && long(feed.size()) != steps)
    die("--feed has " + std::to_string(feed.size()) + " ids, --steps is " + std::to_string(steps));
  const long P = long(prompt.size());

  // ---------------------------------------------------------------- backend, model
  llama_log_set(log_cb, nullptr);
  ggml_log_set(log_cb, nullptr);
  llama_backend_init();
  ggml_backend_load_all();  // picks the best-scoring libggml-cpu-*.so (riscv_hwprobe)
  ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (!dev) die("no ggml CPU backend device (libggml-cpu-*.so not found?)");
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
  std::string features;
  if (auto get_features = reinterpret_cast<ggml_backend_get_features_t>(
          ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"))) {
    for (ggml_backend_feature* f = get_features(reg); f && f->name; f++)
      features += std::string(features.empty() ? "" : ", ") + "\"" + json_escape(f->name) + "\": \"" +
                  json_escape(f->value ? f->value : "") + "\"";
  }

  const double t0 = now_s();
  llama_model* model = llama_model_load_from_file(path.c_str(), llama_model_default_params());
  if (!model) die("llama.cpp could not load " + path + " (see its log above)");
  const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  if (n_vocab <= 0) die("the model has no vocabulary size (tokenizer.ggml.model none needs <arch>.vocab_size)");
  for (llama_token t : prompt)
    if (t >= n_vocab) die("prompt token " + std::to_string(t) + " >= n_vocab " + std::to_string(n_vocab));
  for (llama_token t : feed)
    if (t >= n_vocab) die("--feed token " + std::to_string(t) + " >= n_vocab " + std::to_string(n_vocab));

  llama_context_params_blob cp = llama_context_default_params();
  uint32_t w[4];
  std::memcpy(w, cp.bytes, sizeof w);
  if (!(w[0] == 512 && w[1] == 2048 && w[2] == 512 && w[3] == 1))
    die("llama_context_default_params() does not start with n_ctx 512, n_batch 2048, n_ubatch 512, "
        "n_seq_max 1: this libllama's llama_context_params differs from llama.cpp 0.7.0's; update the driver");
  const uint32_t need = uint32_t(P + steps + 1);
  const uint32_t n_ctx = n_ctx_arg ? uint32_t(n_ctx_arg) : std::max<uint32_t>(256, (need + 255) / 256 * 256);
  if (n_ctx < need) die("--n-ctx " + std::to_string(n_ctx) + " is less than prompt + steps + 1");
  const uint32_t n_batch = std::max<uint32_t>(uint32_t(P), 32);
  w[0] = n_ctx;
  w[1] = n_batch;
  w[2] = n_batch;  // the prefill in one ubatch
  std::memcpy(cp.bytes, w, 3 * sizeof(uint32_t));
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) die("llama_init_from_model failed (see its log above)");
  llama_set_n_threads(ctx, int32_t(threads), int32_t(threads));
  if (llama_n_ctx(ctx) < need) die("the context has n_ctx " + std::to_string(llama_n_ctx(ctx)));
  if (llama_n_threads(ctx) != threads) die("llama_set_n_threads did not take");
  const double t_load = now_s() - t0;

  std::string so;
  dl_iterate_phdr(find_cpu_so, &so);

  FILE* lf = nullptr;
  if (!logits_path.empty() && !(lf = std::fopen(logits_path.c_str(), "wb"))) die("cannot write " + logits_path);
  auto write_row = [&](const float* row) {
    if (lf && std::fwrite(row, sizeof(float), size_t(n_vocab), lf) != size_t(n_vocab)) die("writing the logits failed");
  };

  // ---------------------------------------------------------------- prefill
  std::vector<llama_pos> pos(P);
  std::vector<int32_t> nseq(P, 1);
  llama_seq_id seq0 = 0;
  std::vector<llama_seq_id*> seqp(P, &seq0);
  std::vector<int8_t> out(P, lf ? 1 : 0);
  out[P - 1] = 1;
  for (long i = 0; i < P; i++) pos[i] = llama_pos(i);
  llama_batch b{int32_t(P), prompt.data(), nullptr, pos.data(), nseq.data(), seqp.data(), out.data()};
  const double t1 = now_s();
  const StepFn prefill = prefill_region ? kSteps[size_t(prefill_region - 1)] : &step_plain;
  if (int32_t rc = prefill(ctx, b)) die("prefill llama_decode returned " + std::to_string(rc));
  const double t_prefill = now_s() - t1;
  std::vector<llama_token> tokens;
  for (long i = 0; i < P; i++) {
    if (!out[i]) continue;
    const float* row = llama_get_logits_ith(ctx, int32_t(i));
    if (!row) die("no logits for prompt position " + std::to_string(i));
    write_row(row);
    if (i == P - 1) tokens.push_back(argmax(row, n_vocab));
  }

  // ---------------------------------------------------------------- decode steps
  const StepFn step = region ? kSteps[size_t(region - 1)] : &step_plain;
  std::vector<double> t_steps;
  llama_token tok = tokens.back();
  llama_pos p = llama_pos(P);
  llama_seq_id* seqone = &seq0;
  int32_t one = 1;
  int8_t want = 1;
  for (long s = 0; s < steps; s++) {
    llama_token in = have_feed ? feed[size_t(s)] : tok;
    llama_batch sb{1, &in, nullptr, &p, &one, &seqone, &want};
    const double ts = now_s();
    if (int32_t rc = step(ctx, sb)) die("decode step " + std::to_string(s) + ": llama_decode returned " + std::to_string(rc));
    t_steps.push_back(now_s() - ts);
    const float* row = llama_get_logits_ith(ctx, -1);
    if (!row) die("no logits after decode step " + std::to_string(s));
    write_row(row);
    tok = argmax(row, n_vocab);
    tokens.push_back(tok);
    p++;
  }
  if (lf && std::fclose(lf) != 0) die("writing the logits failed");

  // ---------------------------------------------------------------- report
  auto join = [](const auto& v) {
    std::string s;
    for (const auto& x : v) {
      char buf[32];
      if constexpr (std::is_floating_point_v<std::decay_t<decltype(x)>>) std::snprintf(buf, sizeof buf, "%.6g", x);
      else std::snprintf(buf, sizeof buf, "%d", int(x));
      s += std::string(s.empty() ? "" : ", ") + buf;
    }
    return s;
  };
  std::vector<double> sorted = t_steps;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
  std::printf(
      "{\"program\": \"llama_decode\", \"gguf\": \"%s\", \"model_bytes\": %llu, \"n_vocab\": %d, \"n_ctx\": %u, "
      "\"threads\": %ld, \"region\": %ld, \"prefill_region\": %ld, \"prompt\": [%s], \"steps\": %ld, \"teacher_forced\": %s, "
      "\"tokens\": [%s], \"logits_file\": \"%s\", \"logits_rows\": %ld, "
      "\"ggml_cpu_so\": \"%s\", \"ggml_backend\": \"%s\", \"ggml_device\": \"%s\", \"ggml_features\": {%s}, "
      "\"system_info\": \"%s\", \"load_s\": %.6g, \"prefill_s\": %.6g, \"decode_step_s\": [%s], "
      "\"decode_step_median_s\": %.6g}\n",
      json_escape(path).c_str(), (unsigned long long)llama_model_size(model), n_vocab, llama_n_ctx(ctx), threads,
      region, prefill_region, join(prompt).c_str(), steps, have_feed ? "true" : "false", join(tokens).c_str(),
      json_escape(logits_path).c_str(), lf ? P + steps : 0L, json_escape(so).c_str(),
      json_escape(ggml_backend_reg_name(reg)).c_str(), json_escape(ggml_backend_dev_description(dev)).c_str(),
      features.c_str(), json_escape(llama_print_system_info()).c_str(), t_load, t_prefill, join(t_steps).c_str(),
      median);
  std::fflush(stdout);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
