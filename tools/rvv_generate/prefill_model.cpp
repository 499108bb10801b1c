#include "prefill_model.h"

#include <caffe2/serialize/inline_container.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace rvv_generate {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A file removed (and its directory) when this goes out of scope: the runner dlopen()s the
// library, and a mapped library outlives its directory entry.
struct TempFile {
  std::string dir, path;
  ~TempFile() {
    if (!path.empty()) std::remove(path.c_str());
    if (!dir.empty()) rmdir(dir.c_str());
  }
};

// Writes the package's shared library of AOTI model `name` to a temporary file.
void extract_library(const std::string& package, const std::string& name, TempFile* out) {
  caffe2::serialize::PyTorchStreamReader reader(package);
  const std::string prefix = "data/aotinductor/" + name + "/";
  std::string record;
  for (const auto& r : reader.getAllRecords())
    if (r.rfind(prefix, 0) == 0 && ends_with(r, ".so")) {
      if (!record.empty()) throw PackageError("AOTI model '" + name + "' has more than one shared library");
      record = r;
    }
  if (record.empty())
    throw PackageError("the metadata promises a prefill model, but the package has no AOTI model '" + name + "'");
  auto [data, size] = reader.getRecord(record);
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/rvv-generate-XXXXXX";
  if (!mkdtemp(dir.data())) throw std::runtime_error("cannot create a temporary directory in " + dir);
  out->dir = dir;
  out->path = dir + "/" + name + ".so";
  FILE* f = std::fopen(out->path.c_str(), "wb");
  const bool ok = f && std::fwrite(data.get(), 1, size, f) == size;
  if (f && std::fclose(f) != 0) throw std::runtime_error(out->path + ": write failed");
  if (!ok) throw std::runtime_error(out->path + ": write failed");
}

// Runs make() with stderr going to a temporary file, then copies what it wrote to stderr
// except AOTI's warning that the external-constants runner "calls constant_folding" in a
// model compiled without runtime constant folding: it folds nothing (export does not use
// runtime folding), and the warning would otherwise precede every chunked prefill.
template <class F>
auto without_folding_warning(F make) {
  std::fflush(stderr);
  FILE* tmp = std::tmpfile();
  const int saved = tmp ? dup(2) : -1;
  if (saved < 0 || dup2(fileno(tmp), 2) < 0) {
    if (saved >= 0) close(saved);
    if (tmp) std::fclose(tmp);
    return make();
  }
  auto restore = [&] {
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::rewind(tmp);
    char line[4096];
    while (std::fgets(line, sizeof line, tmp))
      if (std::strncmp(line, "[WARNING] Calling constant_folding in model", 43) != 0) std::fputs(line, stderr);
    std::fclose(tmp);
  };
  try {
    auto made = make();
    restore();
    return made;
  } catch (...) {
    restore();
    throw;
  }
}

}  // namespace

PrefillModel::PrefillModel(const std::string& package, const std::string& name,
                           torch::inductor::AOTIModelContainerRunner& decode, int chunk, bool pads)
    : chunk_(chunk), pads_(pads) {
  // A loaded model hands out its constants by original FQN only; export gives every
  // constant a distinct one (export._recording_constants), so name -> FQN -> tensor is exact.
  const auto names = decode.getConstantNamesToOriginalFQNs();
  const auto by_fqn = decode.extract_constants_map(/*use_inactive=*/false);
  std::unordered_map<std::string, std::string> owner;  // FQN -> name
  for (const auto& [n, fqn] : names) {
    auto [it, fresh] = owner.emplace(fqn, n);
    if (!fresh)
      throw PackageError("the decode model's constants " + it->second + " and " + n + " share the FQN " + fqn +
                         " (export the package again)");
    auto t = by_fqn.find(fqn);
    if (t != by_fqn.end()) constants_.emplace(n, t->second);
  }
  TempFile lib;
  extract_library(package, name, &lib);
  runner_ = without_folding_warning(
      [&] { return std::make_unique<torch::inductor::AOTIModelContainerRunnerCpu>(lib.path, 1, constants_); });
  // The runner skips a constant it was not given and would then read a null tensor: check
  // that it got all of them, and that they are what it was compiled for.
  const auto dtypes = decode.getConstantNamesToDtypes();
  const auto want_dtypes = runner_->getConstantNamesToDtypes();
  for (const auto& [n, fqn] : runner_->getConstantNamesToOriginalFQNs()) {
    auto it = names.find(n);
    if (it == names.end() || !constants_.count(n))
      throw PackageError("the prefill model's constant " + n + " (" + fqn + ") is not one of the decode model's");
    if (it->second != fqn || dtypes.at(n) != want_dtypes.at(n))
      throw PackageError("the prefill model's constant " + n + " differs from the decode model's (FQN " + fqn +
                         " vs " + it->second + ")");
  }
}

at::Tensor PrefillModel::run(const std::vector<int64_t>& ids, int64_t start, int64_t rows) {
  if (start < 0 || rows < 1 || rows > chunk_ || start + rows > static_cast<int64_t>(ids.size()) ||
      (rows < chunk_ && !pads_))
    throw std::out_of_range("prefill chunk outside the prompt");
  std::vector<int64_t> chunk(ids.begin() + start, ids.begin() + start + rows);
  chunk.resize(static_cast<size_t>(chunk_), chunk.back());
  std::vector<at::Tensor> in{at::tensor(chunk, at::kLong).reshape({1, chunk_}), at::arange(start, start + chunk_, at::kLong)};
  if (pads_) in.push_back(at::tensor(std::vector<int64_t>{rows - 1}, at::kLong));
  std::vector<at::Tensor> out = runner_->run(in);
  return out.at(0).reshape({-1}).to(at::kFloat).contiguous();
}

}  // namespace rvv_generate
