#include "args.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <sys/stat.h>

namespace rvv_generate {
namespace {

bool parse_int(const std::string& s, long long lo, long long hi, long long* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) parts.push_back(cur);
  if (!s.empty() && s.back() == sep) parts.push_back("");
  return parts;
}

}  // namespace

std::string usage() {
  return "usage: rvv-generate MODEL.pt2 --prompt-ids 1,2,3 [--max-new-tokens N] [--threads T]\n"
         "                    [--dump-logits FILE] [--ignore-eos] [--region ID] [--feed-ids 4,5]\n"
         "                    [--tokenwise-prefill] [--prefill-region ID]\n"
         "  Loads an AOTInductor package made by `python3 -m rvv_inductor export`, runs the\n"
         "  prompt through it (prefill: the package's prefill model, chunks of the size it was\n"
         "  exported with, bound to the decode model's weights and KV cache; with\n"
         "  --tokenwise-prefill, or a prompt shorter than a chunk, the decode step token by\n"
         "  token), then a greedy decode loop; prints the new token ids and the time of\n"
         "  each phase. --dump-logits writes the float32 logits that chose\n"
         "  each new token (one row of vocab_size values per token, little-endian).\n"
         "  --region ID (1..4) opens an rvvcount marker region ID around every decode step,\n"
         "  --prefill-region ID one around the prefill (another ID).\n"
         "  --feed-ids (teacher forcing): decode step i feeds the i-th id instead of the token\n"
         "  it chose; max-new-tokens - 1 ids, and no stop at EOS (the tokens printed are still\n"
         "  the argmax of each step's logits).\n"
         "  Exit status: 0 ok, 2 bad arguments, file, package or CPU, 1 a runtime failure.\n";
}

std::string parse_args(int argc, const char* const* argv, Options* out) {
  Options o;
  bool have_prompt = false, have_feed = false, have_max = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string val;
    bool has_val = false;
    const auto eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      val = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_val = true;
    }
    auto value = [&](std::string* v) -> std::string {
      if (has_val) { *v = val; return ""; }
      if (i + 1 >= argc) return a + " needs a value";
      *v = argv[++i];
      return "";
    };
    long long n = 0;
    std::string v, err;
    if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (a == "--prompt-ids" || a == "--feed-ids") {
      if (!(err = value(&v)).empty()) return err;
      std::vector<int64_t>& ids = a == "--prompt-ids" ? o.prompt_ids : o.feed_ids;
      ids.clear();
      for (const auto& p : split(v, ',')) {
        if (!parse_int(p, 0, (1LL << 31) - 1, &n)) return a + ": '" + p + "' is not a token id (comma-separated integers >= 0)";
        ids.push_back(n);
      }
      if (ids.empty()) return a + ": no token ids";
      if (a == "--prompt-ids") have_prompt = true;
      else have_feed = true;
    } else if (a == "--max-new-tokens") {
      if (!(err = value(&v)).empty()) return err;
      if (!parse_int(v, 1, 1 << 20, &n)) return "--max-new-tokens: '" + v + "' is not an integer >= 1";
      o.max_new_tokens = static_cast<int>(n);
      have_max = true;
    } else if (a == "--threads") {
      if (!(err = value(&v)).empty()) return err;
      if (!parse_int(v, 1, 1024, &n)) return "--threads: '" + v + "' is not an integer in 1..1024";
      o.threads = static_cast<int>(n);
    } else if (a == "--region" || a == "--prefill-region") {
      if (!(err = value(&v)).empty()) return err;
      if (!parse_int(v, 0, 4, &n)) return a + ": '" + v + "' is not an integer in 0..4";
      (a == "--region" ? o.region : o.prefill_region) = static_cast<int>(n);
    } else if (a == "--dump-logits") {
      if (!(err = value(&v)).empty()) return err;
      if (v.empty()) return "--dump-logits needs a file name";
      o.dump_logits = v;
    } else if (a == "--ignore-eos") {
      if (has_val) return "--ignore-eos takes no value";
      o.ignore_eos = true;
    } else if (a == "--tokenwise-prefill") {
      if (has_val) return "--tokenwise-prefill takes no value";
      o.tokenwise_prefill = true;
    } else if (a.size() > 1 && a[0] == '-') {
      return "unknown option " + a;
    } else if (o.package.empty()) {
      o.package = a;
    } else {
      return "more than one package given ('" + o.package + "', '" + a + "')";
    }
  }
  if (o.help) { *out = o; return ""; }
  if (o.region && o.region == o.prefill_region)
    return "--region and --prefill-region must differ (one region per phase)";
  if (o.package.empty()) return "no package given (MODEL.pt2)";
  if (!have_prompt) return "--prompt-ids is required";
  if (have_feed) {
    // The feed fixes the number of decode steps; a --max-new-tokens that disagrees is an error.
    const int wanted = static_cast<int>(o.feed_ids.size()) + 1;
    if (have_max && o.max_new_tokens != wanted)
      return "--feed-ids has " + std::to_string(o.feed_ids.size()) + " ids: it feeds " +
             std::to_string(o.feed_ids.size()) + " decode steps, so --max-new-tokens must be " +
             std::to_string(wanted) + ", not " + std::to_string(o.max_new_tokens);
    o.max_new_tokens = wanted;
  }
  *out = o;
  return "";
}

std::string check_package_file(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return path + ": " + std::strerror(errno);
  if (S_ISDIR(st.st_mode)) return path + ": is a directory, not a .pt2 package";
  if (!S_ISREG(st.st_mode)) return path + ": not a regular file";
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return path + ": " + std::strerror(errno);
  unsigned char magic[4] = {0, 0, 0, 0};
  const size_t got = std::fread(magic, 1, 4, f);
  std::fclose(f);
  if (got != 4 || magic[0] != 'P' || magic[1] != 'K' || magic[2] != 3 || magic[3] != 4)
    return path + ": not a .pt2 package (not a zip archive)";
  return "";
}

std::string read_needs(const std::map<std::string, std::string>& meta, PackageNeeds* out) {
  PackageNeeds n;
  auto get = [&](const char* key, std::string* v) {
    auto it = meta.find(key);
    if (it == meta.end()) return false;
    *v = it->second;
    return true;
  };
  std::string v;
  if (!get("rvv_format", &v)) return "not a package made by `python3 -m rvv_inductor export` (no rvv_format in its metadata)";
  if (v != "rvv-inductor-aoti/1") return "package format '" + v + "' is not rvv-inductor-aoti/1 (export it again)";
  if (!get("rvv_march", &n.march) || n.march.rfind("rv64", 0) != 0) return "package metadata has no valid rvv_march";
  long long x = 0;
  if (!get("rvv_vlen", &v) || !parse_int(v, 0, 1 << 16, &x)) return "package metadata has no valid rvv_vlen";
  n.vlen = static_cast<int>(x);
  if (!get("rvv_max_cache_len", &v) || !parse_int(v, 1, 1 << 30, &x)) return "package metadata has no valid rvv_max_cache_len";
  n.max_cache_len = static_cast<int>(x);
  if (!get("rvv_vocab_size", &v) || !parse_int(v, 1, 1 << 30, &x)) return "package metadata has no valid rvv_vocab_size";
  n.vocab_size = static_cast<int>(x);
  // Packages exported before the prefill model have no rvv_prefill_chunk: none.
  if (get("rvv_prefill_chunk", &v)) {
    if (!parse_int(v, 0, n.max_cache_len, &x) || x == 1) return "package metadata: bad rvv_prefill_chunk '" + v + "'";
    n.prefill_chunk = static_cast<int>(x);
  }
  if (get("rvv_prefill_pads", &v)) {
    if (v != "0" && v != "1") return "package metadata: bad rvv_prefill_pads '" + v + "'";
    n.prefill_pads = v == "1";
  }
  if (get("rvv_eos_token_ids", &v) && !v.empty()) {
    for (const auto& p : split(v, ',')) {
      if (!parse_int(p, 0, (1LL << 31) - 1, &x)) return "package metadata: bad rvv_eos_token_ids '" + v + "'";
      n.eos_ids.push_back(x);
    }
  }
  *out = n;
  return "";
}

std::string check_isa(const PackageNeeds& needs, const rvv_cpu_features& cpu) {
  // march is "rv64gc" + "v" + "_ext"...: the base letters after rv64, then extensions.
  std::vector<std::string> parts = split(needs.march, '_');
  const std::string base = parts.empty() ? "" : parts[0].substr(4);
  const bool wants_v = base.find('v') != std::string::npos;
  const std::string what = "the package's kernels are built for " + needs.march +
                           (needs.vlen ? " at VLEN " + std::to_string(needs.vlen) : std::string());
  if (!cpu.is_riscv64) return what + ", and this is not a riscv64 CPU";
  if (wants_v && !cpu.has_v) return what + ", and this CPU has no V extension (running it would die of SIGILL)";
  if (wants_v && needs.vlen && cpu.vlenb * 8 != needs.vlen)
    return what + ", and this CPU has VLEN " + std::to_string(cpu.vlenb * 8) + " (export the package on this CPU)";
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& e = parts[i];
    const int have = e == "zvfh" ? cpu.has_zvfh : e == "zvfbfmin" ? cpu.has_zvfbfmin : e == "zvfbfwma" ? cpu.has_zvfbfwma : -1;
    if (have == 0) return what + ", and this CPU lacks " + e;
    if (have < 0 && e.rfind("zv", 0) == 0) return what + ", and rvv-generate does not know the extension " + e;
  }
  return "";
}

std::string check_lengths(size_t prompt_len, int max_cache_len, int* new_tokens, std::string* note) {
  if (prompt_len == 0) return "empty prompt";
  if (prompt_len > static_cast<size_t>(max_cache_len))
    return "the prompt has " + std::to_string(prompt_len) + " tokens, longer than the package's KV cache (" +
           std::to_string(max_cache_len) + " positions; export with a larger --max-cache-len)";
  // The first new token comes from the prompt's last logits; each further one needs a step.
  const long long room = static_cast<long long>(max_cache_len) - static_cast<long long>(prompt_len) + 1;
  if (*new_tokens > room) {
    if (note) *note = "the KV cache holds " + std::to_string(max_cache_len) + " positions: generating " +
                      std::to_string(room) + " tokens, not " + std::to_string(*new_tokens);
    *new_tokens = static_cast<int>(room);
  }
  return "";
}

std::vector<int64_t> prefill_chunk_starts(size_t prompt_len, int chunk) {
  std::vector<int64_t> starts;
  if (chunk < 2 || prompt_len < static_cast<size_t>(chunk)) return starts;
  const auto P = static_cast<int64_t>(prompt_len), C = static_cast<int64_t>(chunk);
  for (int64_t s = 0; s + C <= P; s += C) starts.push_back(s);
  if (P % C) starts.push_back(P - C);
  return starts;
}

std::vector<PrefillCall> prefill_calls(size_t prompt_len, int chunk, bool pads, int max_cache_len) {
  std::vector<PrefillCall> calls;
  if (pads && chunk >= 2 && prompt_len >= 1 && prompt_len < static_cast<size_t>(chunk) && chunk <= max_cache_len) {
    calls.push_back({0, static_cast<int64_t>(prompt_len)});
    return calls;
  }
  for (int64_t s : prefill_chunk_starts(prompt_len, chunk)) calls.push_back({s, chunk});
  return calls;
}

}  // namespace rvv_generate
