// The package's prefill model, run on the decode model's constants.
//
// `rvv_inductor export` compiles the prefill step (a chunk of prompt tokens) as a second
// AOTI model whose shared library holds no constants. Loaded as an ordinary AOTI model it
// would own a second copy of the weights and a second KV cache, which the decode model
// would never see. Here it is built with AOTI's external-constants runner on the decode
// model's tensors (weights and KV cache buffers, by constant name, no copy): what a
// prefill call writes into the cache is what the next decode step reads.
#pragma once
#include <ATen/ATen.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner_cpu.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace rvv_generate {

// The package is not what the runner expects (exit status 2, like the other package checks).
struct PackageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class PrefillModel {
 public:
  // Loads the AOTI model `name` of `package` on the constants of `decode` (which must
  // outlive this object). Throws PackageError when the package has no such model or its
  // constants are not the decode model's (names, original FQNs, dtypes).
  PrefillModel(const std::string& package, const std::string& name,
               torch::inductor::AOTIModelContainerRunner& decode, int chunk, bool pads);

  int chunk() const { return chunk_; }

  // One call on ids[start, start + rows) at positions start..start + chunk - 1 (rows <
  // chunk only for a model that pads: the rest repeats the last id): the logits of row
  // rows - 1, float32 [vocab].
  at::Tensor run(const std::vector<int64_t>& ids, int64_t start, int64_t rows);

 private:
  std::unordered_map<std::string, at::Tensor> constants_;  // the decode model's, by name
  std::unique_ptr<torch::inductor::AOTIModelContainerRunnerCpu> runner_;
  int chunk_;
  bool pads_;
};

}  // namespace rvv_generate
