// The CPU kernels of the operators rvv_inductor::linear_packed and linear_packed_q as C++
// (librvv_inductor_ops.so), so that a call from Python or from a compiled graph goes from
// PyTorch's dispatcher straight into the core library: no Python function and no ctypes
// between the op and the kernel.
//
// Built against LibTorch's stable ABI (torch/csrc/stable, TORCH_TARGET_VERSION 2.10): the
// library uses only the C shim, so one build loads into any torch from 2.10 on, and its
// headers are light enough to compile under emulation. The schemas are defined by the
// Python package (python/rvv_inductor/ops.py) before this library is loaded; without this
// library the package registers its Python (ctypes) kernels instead, with the same results
// (tests/python/test_torch_ops.py compares them).
//
// x is [..., K] bf16 (rows with unit stride along K; anything else is copied first), the
// result [..., N] bf16. Every operand is checked here; bad input is a RuntimeError naming
// the operand, never a crash.
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "rvv_inductor/capi.h"

namespace {

using torch::stable::Tensor;
using torch::headeronly::ScalarType;

std::string last_error() {
  char buf[512] = {0};
  rvv_last_error(buf, sizeof buf);
  return buf;
}

// Layouts by (format, group, scale dtype, zero points, n, k, nb): computing one validates
// the combination in the core, which a decode call must not repeat.
struct LayoutKey {
  int64_t v[7];
  bool operator==(const LayoutKey& o) const {
    for (int i = 0; i < 7; ++i)
      if (v[i] != o.v[i]) return false;
    return true;
  }
};
struct LayoutHash {
  size_t operator()(const LayoutKey& k) const {
    size_t h = 1469598103934665603ull;
    for (int64_t x : k.v) h = (h ^ size_t(x)) * 1099511628211ull;
    return h;
  }
};

const rvv_packed_layout& cached_layout(int64_t fmt, int64_t group, int64_t scale_dtype, int64_t zero_points, int64_t n,
                                       int64_t k, int64_t nb) {
  static std::mutex mu;
  static std::unordered_map<LayoutKey, rvv_packed_layout, LayoutHash> cache;
  const LayoutKey key{{fmt, group, scale_dtype, zero_points, n, k, nb}};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  rvv_packed_layout lay{};
  // A GGUF block format's record fixes its group, scales and zero points (weight_formats.inl).
  rvv_weight_format info{};
  const bool block = rvv_weight_format_info(int(fmt), &info) == 0 && info.record_bytes > 0;
  int rc = fmt == RVV_DTYPE_BF16 ? rvv_make_layout(n, k, nb, &lay)
           : block              ? rvv_block_layout(int(fmt), n, k, nb, &lay)
                                : rvv_quant_layout(int(fmt), int(group), int(scale_dtype), int(zero_points), n, k, nb, &lay);
  STD_TORCH_CHECK(rc == 0, "rvv_inductor: layout: ", last_error());
  return cache.emplace(key, lay).first->second;  // unordered_map never moves its elements
}

// x as M rows of K with unit stride along K and row stride *ldx: the tensor itself when it
// is contiguous, or a 2-D matrix of strided rows (the last position of a prefill, sliced for
// lm_head); anything else is copied.
Tensor dense_rows(const Tensor& x, int64_t k, int64_t* m, int64_t* ldx) {
  *m = x.dim() == 1 ? 1 : x.numel() / (k ? k : 1);
  *ldx = k;
  if (x.is_contiguous()) return x;
  if (x.dim() == 2 && x.stride(1) == 1 && x.stride(0) >= k) {
    *ldx = x.stride(0);
    return x;
  }
  return torch::stable::contiguous(x);
}

Tensor new_output(const Tensor& x, int64_t n) {
  const int64_t d = x.dim();
  std::vector<int64_t> sizes(size_t(d), 0), strides(size_t(d), 0);
  for (int64_t i = 0; i < d - 1; ++i) sizes[size_t(i)] = x.size(i);
  sizes[size_t(d - 1)] = n;
  int64_t s = 1;
  for (int64_t i = d - 1; i >= 0; --i) {
    strides[size_t(i)] = s;
    s *= sizes[size_t(i)] > 0 ? sizes[size_t(i)] : 1;
  }
  AtenTensorHandle h = nullptr;
  int32_t dev = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(x.get(), &dev));
  TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(d, sizes.data(), strides.data(), aoti_torch_dtype_bfloat16(), dev, 0,
                                                  &h));
  return Tensor(h);
}

void check_x(const Tensor& x, int64_t k, const char* op) {
  STD_TORCH_CHECK(x.is_cpu(), op, ": x must be a CPU tensor");
  STD_TORCH_CHECK(x.scalar_type() == ScalarType::BFloat16 && x.dim() >= 1 && x.size(x.dim() - 1) == k, op,
                  ": expected x of shape [..., ", k, "] bfloat16, got ", x.dim(), "-D with last dimension ",
                  x.dim() ? x.size(x.dim() - 1) : 0);
}

const void* check_bias(const std::optional<Tensor>& bias, int64_t n, const char* op, Tensor* keep) {
  if (!bias.has_value()) return nullptr;
  const Tensor& b = *bias;
  STD_TORCH_CHECK(b.is_cpu() && b.scalar_type() == ScalarType::BFloat16 && b.dim() == 1 && b.size(0) == n, op,
                  ": expected a bfloat16 CPU bias of shape [", n, "]");
  *keep = b.stride(0) == 1 ? b : torch::stable::contiguous(b);
  return keep->const_data_ptr();
}

Tensor run(const Tensor& x, const void* w, const rvv_packed_layout& lay, const std::optional<Tensor>& bias, int64_t n,
           int64_t options, const char* op) {
  const int64_t k = lay.k;
  check_x(x, k, op);
  Tensor bias_keep;
  const void* b = check_bias(bias, n, op, &bias_keep);
  int64_t m = 0, ldx = k;
  Tensor xr = dense_rows(x, k, &m, &ldx);
  Tensor y = new_output(x, n);
  if (m == 0) return y;
  const int rc = rvv_linear_packed_opts(static_cast<const uint16_t*>(xr.const_data_ptr()), ldx, m, n, k, w, &lay, lay.nb,
                                        b, b ? RVV_DTYPE_BF16 : 0, y.mutable_data_ptr(), n, RVV_DTYPE_BF16, 0, -1,
                                        int(options));
  STD_TORCH_CHECK(rc == 0, op, ": ", last_error());
  return y;
}

Tensor linear_packed(Tensor x, Tensor wp, std::optional<Tensor> bias, int64_t n) {
  const char* op = "rvv_inductor::linear_packed";
  STD_TORCH_CHECK(wp.is_cpu() && wp.scalar_type() == ScalarType::BFloat16 && wp.dim() == 3 && wp.is_contiguous(), op,
                  ": expected a contiguous packed [blocks, K, nb] bfloat16 CPU weight");
  STD_TORCH_CHECK(n > 0, op, ": n must be positive, got ", n);
  const rvv_packed_layout& lay = cached_layout(RVV_DTYPE_BF16, 0, 0, 0, n, wp.size(1), wp.size(2));
  STD_TORCH_CHECK(lay.num_blocks == wp.size(0), op, ": N=", n, " does not match a packed weight of ", wp.size(0),
                  " blocks of ", wp.size(2));
  return run(x, wp.const_data_ptr(), lay, bias, n, 0, op);
}

Tensor linear_packed_q(Tensor x, Tensor wq, std::optional<Tensor> bias, int64_t n, int64_t fmt, int64_t group_size,
                       int64_t scale_dtype, int64_t zero_points, int64_t nb, int64_t options) {
  const char* op = "rvv_inductor::linear_packed_q";
  rvv_weight_format info{};
  STD_TORCH_CHECK(fmt != RVV_DTYPE_BF16 && rvv_weight_format_info(int(fmt), &info) == 0, op, ": format ", fmt,
                  " is not a quantized weight format (weight_formats.inl)");
  STD_TORCH_CHECK(x.dim() >= 1, op, ": x must have a last dimension K");
  const rvv_packed_layout& lay =
      cached_layout(fmt, group_size, scale_dtype, zero_points, n, x.size(x.dim() - 1), nb);
  // Exactly the layout's size: a buffer packed for another K (x of the wrong width) has
  // another size, and is refused instead of read with the wrong geometry.
  STD_TORCH_CHECK(wq.is_cpu() && wq.scalar_type() == ScalarType::Byte && wq.dim() == 1 && wq.is_contiguous() &&
                      wq.numel() == lay.bytes,
                  op, ": expected a contiguous uint8 CPU buffer of ", lay.bytes, " bytes for [", n, ", ", lay.k,
                  "], got ", wq.numel());
  return run(x, wq.const_data_ptr(), lay, bias, n, options, op);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(rvv_inductor, CPU, m) {
  m.impl("linear_packed", TORCH_BOX(&linear_packed));
  m.impl("linear_packed_q", TORCH_BOX(&linear_packed_q));
}
