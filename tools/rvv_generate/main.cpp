// rvv-generate: runs an AOTInductor package made by `python3 -m rvv_inductor export` from
// C++, with no Python in the process: the prompt (prefill: chunks through the package's
// prefill model, bound to the decode model's weights and KV cache, see prefill_model.h;
// what is shorter than a chunk goes through the decode step), then a greedy decode loop.
// Prints the new token ids and the time of each phase. Every check that can refuse (arguments, the file, the package's
// metadata, the CPU's ISA, the prompt length) runs before the package's code is loaded, so
// a CPU without V gets a one-line refusal (exit 2), never a SIGILL.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "args.h"
#include "prefill_model.h"
#include "rvv_inductor/cpu_features.h"
#include "rvv_inductor/markers.h"

namespace {

constexpr const char* kModel = "decode";
constexpr const char* kPrefillModel = "prefill";

int fail(const std::string& msg) {
  std::fprintf(stderr, "rvv-generate: %s\n", msg.c_str());
  return 2;
}

std::string first_line(const std::string& s) {
  const auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One call of the step: logits of the last position, float32 [vocab].
at::Tensor step(torch::inductor::AOTIModelPackageLoader& loader, int64_t token, int64_t pos) {
  std::vector<at::Tensor> in{at::full({1, 1}, token, at::kLong), at::full({1}, pos, at::kLong)};
  std::vector<at::Tensor> out = loader.run(in);
  return out.at(0).reshape({-1}).to(at::kFloat).contiguous();
}

// Opens (begin = true) or closes rvvcount marker region `id` (1..4; 0: none). The marker's
// immediate must be a constant, hence the switch; parse_args checks the range.
void region_marker(int id, bool begin) {
  switch (id) {
    case 1: if (begin) RVV_BENCH_BEGIN(1); else RVV_BENCH_END(1); break;
    case 2: if (begin) RVV_BENCH_BEGIN(2); else RVV_BENCH_END(2); break;
    case 3: if (begin) RVV_BENCH_BEGIN(3); else RVV_BENCH_END(3); break;
    case 4: if (begin) RVV_BENCH_BEGIN(4); else RVV_BENCH_END(4); break;
    default: break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using rvv_generate::Options;
  Options o;
  std::string err = rvv_generate::parse_args(argc, argv, &o);
  if (!err.empty()) return fail(err + " (--help for usage)");
  if (o.help) {
    std::fputs(rvv_generate::usage().c_str(), stdout);
    return 0;
  }
  if (!(err = rvv_generate::check_package_file(o.package)).empty()) return fail(err);

  // The metadata is read from the archive without loading the model's shared library.
  std::map<std::string, std::string> meta;
  try {
    auto m = torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(o.package, kModel);
    meta.insert(m.begin(), m.end());
  } catch (const std::exception& e) {
    return fail(o.package + ": not an rvv_inductor package (no AOTI model '" + kModel + "'): " + first_line(e.what()));
  }
  rvv_generate::PackageNeeds needs;
  if (!(err = rvv_generate::read_needs(meta, &needs)).empty()) return fail(o.package + ": " + err);
  rvv_cpu_features cpu{};
  char cpu_err[256] = {0};
  if (rvv_effective_cpu(&cpu, cpu_err, sizeof cpu_err) != 0) return fail(std::string("RVV_INDUCTOR_CPU: ") + cpu_err);
  if (!(err = rvv_generate::check_isa(needs, cpu)).empty()) return fail(o.package + ": " + err);
  int new_tokens = o.max_new_tokens;
  std::string note;
  if (!(err = rvv_generate::check_lengths(o.prompt_ids.size(), needs.max_cache_len, &new_tokens, &note)).empty())
    return fail(err);
  if (!o.feed_ids.empty() && new_tokens < o.max_new_tokens)
    return fail("--feed-ids: the prompt and the fed tokens need " +
                std::to_string(o.prompt_ids.size() + o.feed_ids.size()) + " positions; the package's KV cache has " +
                std::to_string(needs.max_cache_len));
  if (!note.empty()) std::fprintf(stderr, "rvv-generate: note: %s\n", note.c_str());
  for (const auto* ids : {&o.prompt_ids, &o.feed_ids})
    for (int64_t id : *ids)
      if (id >= needs.vocab_size)
        return fail(std::string(ids == &o.prompt_ids ? "--prompt-ids" : "--feed-ids") + ": token " +
                    std::to_string(id) + " is outside the vocabulary (" + std::to_string(needs.vocab_size) + ")");

  FILE* dump = nullptr;
  if (!o.dump_logits.empty() && !(dump = std::fopen(o.dump_logits.c_str(), "wb")))
    return fail(o.dump_logits + ": cannot write");

  try {
    if (o.threads > 0) at::set_num_threads(o.threads);
    auto t0 = std::chrono::steady_clock::now();
    torch::inductor::AOTIModelPackageLoader loader(o.package, kModel);
    const std::vector<rvv_generate::PrefillCall> starts =
        o.tokenwise_prefill ? std::vector<rvv_generate::PrefillCall>{}
                            : rvv_generate::prefill_calls(o.prompt_ids.size(), needs.prefill_chunk, needs.prefill_pads,
                                                          needs.max_cache_len);
    std::unique_ptr<rvv_generate::PrefillModel> prefill;
    if (!starts.empty()) {
      try {
        prefill = std::make_unique<rvv_generate::PrefillModel>(o.package, kPrefillModel, *loader.get_runner(),
                                                               needs.prefill_chunk, needs.prefill_pads);
      } catch (const rvv_generate::PackageError& e) {
        if (dump) std::fclose(dump);
        return fail(o.package + ": " + e.what());
      }
    }
    const double load_s = seconds_since(t0);

    at::Tensor logits;
    t0 = std::chrono::steady_clock::now();
    int64_t pos = 0;
    region_marker(o.prefill_region, true);
    for (const auto& c : starts) logits = prefill->run(o.prompt_ids, c.start, c.rows);
    if (!starts.empty()) pos = static_cast<int64_t>(o.prompt_ids.size());
    for (; pos < static_cast<int64_t>(o.prompt_ids.size()); ++pos) logits = step(loader, o.prompt_ids[pos], pos);
    region_marker(o.prefill_region, false);
    const double prefill_s = seconds_since(t0);

    std::vector<int64_t> generated;
    double decode_s = 0;
    int decode_steps = 0;
    t0 = std::chrono::steady_clock::now();
    for (;;) {
      if (dump && std::fwrite(logits.data_ptr<float>(), sizeof(float), logits.numel(), dump) != (size_t)logits.numel())
        throw std::runtime_error(o.dump_logits + ": write failed");
      const int64_t chosen = logits.argmax().item<int64_t>();
      generated.push_back(chosen);
      const bool forced = !o.feed_ids.empty();
      bool eos = false;
      for (int64_t e : needs.eos_ids) eos = eos || (e == chosen);
      if ((int)generated.size() >= new_tokens || (eos && !o.ignore_eos && !forced)) break;
      const int64_t next = forced ? o.feed_ids[generated.size() - 1] : chosen;
      region_marker(o.region, true);
      logits = step(loader, next, pos);
      region_marker(o.region, false);
      ++pos;
      ++decode_steps;
    }
    decode_s = seconds_since(t0);
    if (dump && std::fclose(dump) != 0) throw std::runtime_error(o.dump_logits + ": write failed");
    dump = nullptr;

    std::string ids;
    for (size_t i = 0; i < generated.size(); ++i) ids += (i ? "," : "") + std::to_string(generated[i]);
    std::printf("tokens: %s\n", ids.c_str());
    std::printf("load_s: %.3f\nprefill_s: %.3f (%zu tokens, %s)\ndecode_s: %.3f (%d steps, %.3f s/token)\nthreads: %d\n",
                load_s, prefill_s, o.prompt_ids.size(),
                starts.empty() ? "decode step per token"
                               : (std::to_string(starts.size()) + " prefill call(s) of " +
                                  std::to_string(needs.prefill_chunk) + " tokens" +
                                  (starts.size() == 1 && starts[0].rows < needs.prefill_chunk
                                       ? " (" + std::to_string(starts[0].rows) + " of them the prompt's)"
                                       : std::string())).c_str(),
                decode_s, decode_steps, decode_steps ? decode_s / decode_steps : 0.0, at::get_num_threads());
    // Time to first token as this run saw it: the prompt's prefill up to the first token's
    // logits (the argmax after it is negligible). Wall clock, so it is the board's time only
    // when run on the board; for the K1 estimate from counted work see bench/README.md.
    std::printf("ttft_s: %.3f (%zu-token prompt, %.2f prompt tok/s; wall clock of this run: the board's time on "
                "riscv64 hardware, emulated time under QEMU, not a K1 estimate)\n",
                prefill_s, o.prompt_ids.size(), prefill_s > 0 ? o.prompt_ids.size() / prefill_s : 0.0);
  } catch (const std::exception& e) {
    if (dump) std::fclose(dump);
    std::fprintf(stderr, "rvv-generate: %s\n", first_line(e.what()).c_str());
    return 1;
  }
  return 0;
}
