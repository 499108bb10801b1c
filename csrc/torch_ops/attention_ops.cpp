// The CPU kernel of rvv_inductor::varlen_attention as C++ (librvv_inductor_ops.so, beside
// linear_ops.cpp): attention over a packed batch of variable-length sequences, the layout of
// transformers' continuous batching (python/rvv_inductor/attention.py, paged_attention_forward).
// Continuous batching with compiled decoder layers calls this op from inside every compiled
// layer at every step; with this kernel the call goes from PyTorch's dispatcher straight into
// the core's rvv_attention_varlen_bf16: no Python function and no ctypes on the way.
//
//   varlen_attention(q [Tq, H, D], k [Lk, Hkv, D], v [Lk, Hkv, D], cu_q [S+1], cu_k [S+1],
//                    float scale, int window) -> out [Tq, H, D]
//
// Sequence s owns query rows [cu_q[s], cu_q[s+1]) and key rows [cu_k[s], cu_k[s+1]); its
// queries are its last keys (query j of nq attends keys [0, nk - nq + j], or only the last
// `window` of them when window > 0); query rows from cu_q[S] to Tq get zeros (abi_types.h,
// rvv_varlen_attention). All-BF16 operands run the core (FP32 inside, BF16 out); any other
// floating dtype runs a scalar reference here (inputs rounded to FP32 as the Python
// reference does, FP64 sums, the result in q's dtype), as the Python kernel falls back to
// varlen_attention_reference. Every operand is checked here with a RuntimeError naming it;
// the schema is defined by python/rvv_inductor/ops.py before this library is loaded.
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "rvv_inductor/capi.h"

namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

constexpr const char* kOp = "rvv_inductor::varlen_attention";

std::string last_error() {
  char buf[512] = {0};
  rvv_last_error(buf, sizeof buf);
  return buf;
}

std::string shape(const Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

bool is_float_dtype(ScalarType t) {
  return t == ScalarType::BFloat16 || t == ScalarType::Half || t == ScalarType::Float || t == ScalarType::Double;
}

// cu_seqlens as int32 (the core's type), from an int32 or int64 1-D tensor of any stride.
std::vector<int32_t> offsets(const Tensor& cu, const char* name) {
  STD_TORCH_CHECK(cu.is_cpu(), kOp, ": ", name, " must be a CPU tensor");
  STD_TORCH_CHECK(cu.scalar_type() == ScalarType::Int || cu.scalar_type() == ScalarType::Long, kOp, ": ", name,
                  " must be int32 or int64");
  const int64_t n = cu.size(0), st = cu.stride(0);
  std::vector<int32_t> out(size_t(n), 0);
  if (cu.scalar_type() == ScalarType::Int) {
    const int32_t* p = static_cast<const int32_t*>(cu.const_data_ptr());
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = p[i * st];
  } else {
    const int64_t* p = static_cast<const int64_t*>(cu.const_data_ptr());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t x = p[i * st];
      STD_TORCH_CHECK(x >= 0 && x <= std::numeric_limits<int32_t>::max(), kOp, ": ", name, "[", i, "] = ", x,
                      " is out of range");
      out[size_t(i)] = int32_t(x);
    }
  }
  return out;
}

// The batch's offsets: from 0, non-decreasing, within q's and k's rows, no sequence with
// fewer keys than queries (the core checks the same; the reference path needs it here, and
// the messages name the sequence).
void check_offsets(const std::vector<int32_t>& cq, const std::vector<int32_t>& ck, int64_t tq, int64_t lk) {
  STD_TORCH_CHECK(cq[0] == 0 && ck[0] == 0, kOp, ": cu_seqlens do not start at 0 (cu_q[0] = ", cq[0],
                  ", cu_k[0] = ", ck[0], ")");
  for (size_t s = 0; s + 1 < cq.size(); ++s) {
    const int64_t nq = int64_t(cq[s + 1]) - cq[s], nk = int64_t(ck[s + 1]) - ck[s];
    STD_TORCH_CHECK(nq >= 0 && nk >= 0, kOp, ": cu_seqlens decrease at sequence ", s, " (cu_q ", cq[s], " -> ",
                    cq[s + 1], ", cu_k ", ck[s], " -> ", ck[s + 1], ")");
    STD_TORCH_CHECK(nk >= nq, kOp, ": sequence ", s, " has ", nq, " queries but ", nk,
                    " keys (a sequence has fewer keys than queries)");
  }
  STD_TORCH_CHECK(cq.back() <= tq && ck.back() <= lk, kOp, ": cu_seqlens run past the rows (cu_q[S] = ", cq.back(),
                  " of ", tq, " query rows, cu_k[S] = ", ck.back(), " of ", lk, " key rows)");
}

// D with unit stride, as the core reads rows; anything else is copied once.
Tensor d_contiguous(const Tensor& t) { return t.stride(2) == 1 || t.size(2) <= 1 ? t : torch::stable::contiguous(t); }

Tensor empty_like_rows(const Tensor& q, int32_t dtype) {
  const int64_t sizes[3] = {q.size(0), q.size(1), q.size(2)};
  const int64_t strides[3] = {q.size(1) * q.size(2), q.size(2), 1};
  AtenTensorHandle h = nullptr;
  int32_t dev = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(q.get(), &dev));
  TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(3, sizes, strides, dtype, dev, 0, &h));
  return Tensor(h);
}

// The definition (varlen_attention_reference in attention.py) for operands that are not all
// BF16: q, k, v rounded to FP32, scores, softmax and weighted sum in FP64, one query row and
// head at a time; rows past cu_q[S] are zeros.
Tensor reference(const Tensor& q0, const Tensor& k0, const Tensor& v0, const std::vector<int32_t>& cq,
                 const std::vector<int32_t>& ck, double scale, int64_t window) {
  auto as_f32 = [](const Tensor& t) {
    return d_contiguous(t.scalar_type() == ScalarType::Float ? t : torch::stable::to(t, ScalarType::Float));
  };
  const Tensor q = as_f32(q0), k = as_f32(k0), v = as_f32(v0);
  const int64_t Tq = q.size(0), H = q.size(1), D = q.size(2), Hkv = k.size(1), G = H / Hkv;
  Tensor out = empty_like_rows(q, aoti_torch_dtype_float32());
  float* o = static_cast<float*>(out.mutable_data_ptr());
  for (int64_t i = 0; i < Tq * H * D; ++i) o[i] = 0.0f;
  const float* qp = static_cast<const float*>(q.const_data_ptr());
  const float* kp = static_cast<const float*>(k.const_data_ptr());
  const float* vp = static_cast<const float*>(v.const_data_ptr());
  std::vector<double> p, acc(size_t(D), 0.0);
  for (size_t s = 0; s + 1 < cq.size(); ++s) {
    const int64_t nq = int64_t(cq[s + 1]) - cq[s], nk = int64_t(ck[s + 1]) - ck[s];
    for (int64_t j = 0; j < nq; ++j) {
      const int64_t row = cq[s] + j, last = nk - nq + j;
      const int64_t first = window > 0 && last + 1 > window ? last + 1 - window : 0;
      p.assign(size_t(last + 1 - first), 0.0);
      for (int64_t h = 0; h < H; ++h) {
        const float* qr = qp + row * q.stride(0) + h * q.stride(1);
        const int64_t kh = h / G;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t t = first; t <= last; ++t) {
          const float* kr = kp + (ck[s] + t) * k.stride(0) + kh * k.stride(1);
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) dot += double(qr[d]) * double(kr[d]);
          p[size_t(t - first)] = dot * scale;
          if (p[size_t(t - first)] > mx) mx = p[size_t(t - first)];
        }
        double sum = 0.0;
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (double& a : acc) a = 0.0;
        for (int64_t t = first; t <= last; ++t) {
          const float* vr = vp + (ck[s] + t) * v.stride(0) + kh * v.stride(1);
          const double w = p[size_t(t - first)];
          for (int64_t d = 0; d < D; ++d) acc[size_t(d)] += w * double(vr[d]);
        }
        float* orow = o + (row * H + h) * D;
        for (int64_t d = 0; d < D; ++d) orow[d] = float(acc[size_t(d)] / sum);
      }
    }
  }
  return q0.scalar_type() == ScalarType::Float ? out : torch::stable::to(out, q0.scalar_type());
}

Tensor varlen_attention(Tensor q, Tensor k, Tensor v, Tensor cu_q, Tensor cu_k, double scale, int64_t window) {
  STD_TORCH_CHECK(q.is_cpu() && k.is_cpu() && v.is_cpu(), kOp, ": q, k, v must be CPU tensors");
  STD_TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3 && k.size(0) == v.size(0) && k.size(1) == v.size(1) &&
                      k.size(2) == v.size(2) && q.size(2) == k.size(2),
                  kOp, ": q [Tq, H, D], k/v [Lk, Hkv, D] expected, got ", shape(q), ", ", shape(k), ", ", shape(v));
  const int64_t H = q.size(1), Hkv = k.size(1);
  STD_TORCH_CHECK(Hkv >= 1 && H % Hkv == 0, kOp, ": ", H, " heads, ", Hkv,
                  " kv heads (the query heads must be a positive multiple of the kv heads)");
  STD_TORCH_CHECK(cu_q.dim() == 1 && cu_k.dim() == 1 && cu_q.size(0) == cu_k.size(0) && cu_q.size(0) >= 1, kOp,
                  ": cu_q ", shape(cu_q), " / cu_k ", shape(cu_k), ": expected 1-D offsets of equal length S + 1");
  STD_TORCH_CHECK(window >= 0, kOp, ": window ", window, " < 0");
  STD_TORCH_CHECK(std::isfinite(scale), kOp, ": scale ", scale, " is not finite");
  const ScalarType dt = q.scalar_type();
  STD_TORCH_CHECK(is_float_dtype(dt) && is_float_dtype(k.scalar_type()) && is_float_dtype(v.scalar_type()), kOp,
                  ": q, k, v must be floating point (bfloat16 runs the RVV kernel)");
  const std::vector<int32_t> cq = offsets(cu_q, "cu_q"), ck = offsets(cu_k, "cu_k");
  check_offsets(cq, ck, q.size(0), k.size(0));

  if (!(dt == ScalarType::BFloat16 && k.scalar_type() == dt && v.scalar_type() == dt))
    return reference(q, k, v, cq, ck, scale, window);

  Tensor out = empty_like_rows(q, aoti_torch_dtype_bfloat16());
  if (out.numel() == 0) return out;
  const Tensor qd = d_contiguous(q), kd = d_contiguous(k), vd = d_contiguous(v);
  rvv_varlen_attention a{};
  a.q = static_cast<const uint16_t*>(qd.const_data_ptr()), a.q_st = qd.stride(0), a.q_sh = qd.stride(1);
  a.k = static_cast<const uint16_t*>(kd.const_data_ptr()), a.k_sl = kd.stride(0), a.k_sh = kd.stride(1);
  a.v = static_cast<const uint16_t*>(vd.const_data_ptr()), a.v_sl = vd.stride(0), a.v_sh = vd.stride(1);
  a.cu_q = cq.data(), a.cu_k = ck.data();
  a.out = static_cast<uint16_t*>(out.mutable_data_ptr());
  a.S = int64_t(cq.size()) - 1, a.Tq = q.size(0), a.Lk = k.size(0), a.H = H, a.Hkv = Hkv, a.D = q.size(2);
  a.window = window, a.scale = float(scale);
  // torch's thread count, as the Python kernel passes torch.get_num_threads().
  const int rc = rvv_attention_varlen_bf16(&a, int(torch::stable::get_num_threads()));
  STD_TORCH_CHECK(rc == 0, kOp, ": ", last_error());
  return out;
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(rvv_inductor, CPU, m) { m.impl("varlen_attention", TORCH_BOX(&varlen_attention)); }
