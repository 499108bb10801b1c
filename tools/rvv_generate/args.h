// rvv-generate's command line and the checks made before a package is loaded: no libtorch
// here, so tests/cpp/rvv_generate_args_test.cpp tests it in every build.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rvv_inductor/cpu_features.h"

namespace rvv_generate {

struct Options {
  std::string package;
  std::vector<int64_t> prompt_ids;
  int max_new_tokens = 16;
  int threads = 0;           // 0: libtorch's default
  std::string dump_logits;   // empty: none
  bool ignore_eos = false;
  int region = 0;            // 1..4: one rvvcount marker region per decode step (bench)
  int prefill_region = 0;    // 1..4: one rvvcount marker region around the whole prefill
  // Teacher forcing (the demo compares logits position by position with eager's): decode
  // step i feeds feed_ids[i] instead of the token just chosen. Exactly max_new_tokens - 1
  // ids; a forced run does not stop at EOS.
  std::vector<int64_t> feed_ids;
  // Run the prompt through the decode step one token at a time even when the package has a
  // prefill model (to compare the two, or to count the decode step alone).
  bool tokenwise_prefill = false;
  bool help = false;
};

// Parses argv (argv[0] is the program). Returns "" on success, else a one-line error.
std::string parse_args(int argc, const char* const* argv, Options* out);

// The usage text (several lines).
std::string usage();

// "" when `path` is a readable regular file that starts like a zip archive (a .pt2 is a
// zip), else a one-line error naming the path.
std::string check_package_file(const std::string& path);

// What the package's metadata says the kernels need (the keys rvv_inductor export writes
// into the AOTI model metadata: rvv_format, rvv_march, rvv_vlen, rvv_max_cache_len, ...).
struct PackageNeeds {
  std::string march;       // e.g. rv64gcv or rv64gcv_zvfh
  int vlen = 0;            // bits
  int max_cache_len = 0;
  int vocab_size = 0;
  int prefill_chunk = 0;   // tokens per call of the package's prefill model; 0: none
  // The prefill model takes a third input, the row whose logits it returns (rvv_prefill_pads
  // = 1): a prompt shorter than a chunk runs as one padded call instead of token by token.
  bool prefill_pads = false;
  std::vector<int64_t> eos_ids;
};

// Reads the metadata map; "" on success, else why the package is not one of ours.
std::string read_needs(const std::map<std::string, std::string>& meta, PackageNeeds* out);

// "" when `cpu` can run kernels built for `needs` (V present, same VLEN, every extension of
// the march string present), else a one-line refusal.
std::string check_isa(const PackageNeeds& needs, const rvv_cpu_features& cpu);

// "" when the prompt fits the cache (prefill writes prompt_len positions), else the error.
// *new_tokens is lowered to what the cache can hold (each token after the first needs one
// more position); a note is written to *note when that happens.
std::string check_lengths(size_t prompt_len, int max_cache_len, int* new_tokens, std::string* note);

// Where the prefill model's calls start for a prompt of prompt_len tokens and chunks of
// `chunk`: 0, chunk, 2 chunk, ..., and, when the prompt is not a multiple of the chunk, one
// last chunk ending at the prompt's last token (it overlaps the one before; recomputing a
// cached position writes the values it already holds). Empty when the prompt is shorter
// than a chunk (or chunk < 2): then every prompt token goes through the decode step.
std::vector<int64_t> prefill_chunk_starts(size_t prompt_len, int chunk);

// One call of the prefill model: ids[start, start + rows) are the prompt's, the rest of the
// chunk is padding (its positions lie past the prompt: the cache entries it writes there
// are overwritten by the decode steps before any step reads them), and the logits are row
// rows - 1's.
struct PrefillCall {
  int64_t start;
  int64_t rows;
};

// prefill_chunk_starts as calls of `chunk` real rows; with `pads`, a prompt shorter than a
// chunk is one padded call (if the chunk fits the cache: chunk <= max_cache_len).
std::vector<PrefillCall> prefill_calls(size_t prompt_len, int chunk, bool pads, int max_cache_len);

}  // namespace rvv_generate
