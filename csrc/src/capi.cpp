// C ABI (capi.h) over the C++ API. Base-ISA code. Each call validates its arguments,
// returns a status and leaves a message for rvv_last_error in thread-local storage.
#include "rvv_inductor/capi.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <new>

#include "rvv_inductor/cpu_features.h"
#include "rvv_inductor/error.h"
#include "rvv_inductor/linear.h"
#include "rvv_inductor/markers.h"
#include "rvv_inductor/packing.h"
#include "rvv_inductor/quant_packing.h"

namespace {

using namespace rvv_inductor;

constexpr size_t kErrLen = 512;
thread_local char t_last_error[kErrLen];

// Records the outcome of a call: clears the message on success.
int finish(Status s) {
  if (s == Status::kOk) t_last_error[0] = '\0';
  return int(s);
}
int error(Status s, const char* msg) {
  std::snprintf(t_last_error, kErrLen, "%s", msg);
  return int(s);
}

// The operands every linear entry shares; the caller fills in the weight.
LinearProblem operands(const uint16_t* x, int64_t ldx, int64_t m, int64_t n, int64_t k, const void* bias, int bias_dtype,
                       void* y, int64_t ldy, int y_dtype) {
  LinearProblem p{};
  p.M = m;
  p.N = n;
  p.K = k;
  p.x = x;
  p.ldx = ldx;
  p.bias = bias;
  p.bias_dtype = DType(bias_dtype);
  p.y = y;
  p.ldy = ldy;
  p.y_dtype = DType(y_dtype);
  return p;
}

rvv_cpu_features effective_cpu() {
  rvv_cpu_features cpu;
  // An invalid RVV_INDUCTOR_CPU leaves the scalar configuration in cpu: safe to use.
  rvv_effective_cpu(&cpu, nullptr, 0);
  return cpu;
}

}  // namespace

extern "C" {

int rvv_last_error(char* buf, size_t len) {
  const size_t n = std::strlen(t_last_error);
  if (buf && len) std::snprintf(buf, len, "%s", t_last_error);
  return int(n);
}

const char* rvv_status_name(int status) { return status_name(Status(status)); }

int rvv_kernel_path(void) { return int(select_kernel_path(effective_cpu())); }

int64_t rvv_preferred_nb(void) { return preferred_nb(effective_cpu()); }

int64_t rvv_nb_for_vlenb(int vlenb) { return preferred_nb_for_vlenb(vlenb); }

int rvv_make_layout(int64_t n, int64_t k, int64_t nb, rvv_packed_layout* layout) {
  if (!layout) return error(Status::kNullPointer, "rvv_make_layout: layout is NULL");
  if (packed_size(n, k, nb) < 0) {
    std::snprintf(t_last_error, kErrLen, "rvv_make_layout: invalid n=%lld k=%lld nb=%lld", (long long)n, (long long)k,
                  (long long)nb);
    return int(Status::kBadShape);
  }
  *layout = make_packed_layout(n, k, nb, effective_cpu().vlenb);
  return finish(Status::kOk);
}

size_t rvv_abi_sizeof(int which) {
  switch (which) {
    case RVV_ABI_PACKED_LAYOUT: return sizeof(rvv_packed_layout);
    case RVV_ABI_CPU_FEATURES: return sizeof(rvv_cpu_features);
    case RVV_ABI_VARLEN_ATTENTION: return sizeof(rvv_varlen_attention);
    case RVV_ABI_WEIGHT_FORMAT: return sizeof(rvv_weight_format);
  }
  return 0;
}

int rvv_packed_size(int64_t n, int64_t k, int64_t nb, int64_t* elements) {
  if (!elements) return error(Status::kNullPointer, "rvv_packed_size: elements is NULL");
  const int64_t e = packed_size(n, k, nb);
  if (e < 0) {
    *elements = 0;
    std::snprintf(t_last_error, kErrLen, "rvv_packed_size: invalid n=%lld k=%lld nb=%lld", (long long)n, (long long)k,
                  (long long)nb);
    return int(Status::kBadShape);
  }
  *elements = e;
  return finish(Status::kOk);
}

int rvv_pack_bf16(const uint16_t* w, int64_t ldw, int64_t n, int64_t k, int64_t nb, uint16_t* out,
                  int64_t out_elements, rvv_packed_layout* layout) {
  const int64_t need = packed_size(n, k, nb);
  if (need >= 0 && out_elements < need) {
    std::snprintf(t_last_error, kErrLen, "rvv_pack_bf16: out has %lld elements, %lld needed", (long long)out_elements,
                  (long long)need);
    return int(Status::kBufferTooSmall);
  }
  const Status s = pack_bf16(w, ldw, n, k, nb, out, t_last_error, kErrLen);
  if (s == Status::kOk && layout) *layout = make_packed_layout(n, k, nb, effective_cpu().vlenb);
  return s == Status::kOk ? finish(s) : int(s);
}

int rvv_unpack_bf16(const uint16_t* packed, const rvv_packed_layout* layout, uint16_t* w, int64_t ldw,
                    int64_t w_elements) {
  if (!layout) return error(Status::kNullPointer, "rvv_unpack_bf16: layout is NULL");
  if (layout->n > 0 && layout->k > 0 && ldw >= layout->k && w_elements < (layout->n - 1) * ldw + layout->k) {
    std::snprintf(t_last_error, kErrLen, "rvv_unpack_bf16: w has %lld elements, %lld needed", (long long)w_elements,
                  (long long)((layout->n - 1) * ldw + layout->k));
    return int(Status::kBufferTooSmall);
  }
  const Status s = unpack_bf16(packed, *layout, w, ldw, t_last_error, kErrLen);
  return s == Status::kOk ? finish(s) : int(s);
}

int rvv_validate_layout(const rvv_packed_layout* layout, int64_t n, int64_t k, int64_t nb) {
  if (!layout) return error(Status::kNullPointer, "rvv_validate_layout: layout is NULL");
  const Status s = validate_layout(*layout, n, k, nb, t_last_error, kErrLen);
  return s == Status::kOk ? finish(s) : int(s);
}

int rvv_partition_blocks(int64_t num_blocks, int nthreads, int t, int64_t* begin, int64_t* end) {
  if (!begin || !end) return error(Status::kNullPointer, "rvv_partition_blocks: NULL output");
  if (num_blocks < 0 || nthreads <= 0 || t < 0 || t >= nthreads) {
    std::snprintf(t_last_error, kErrLen, "rvv_partition_blocks: need num_blocks >= 0 and 0 <= t < nthreads, got %lld, %d, %d",
                  (long long)num_blocks, t, nthreads);
    return int(Status::kBadRange);
  }
  const BlockRange r = partition_blocks(num_blocks, nthreads, t);
  *begin = r.begin;
  *end = r.end;
  return finish(Status::kOk);
}

int rvv_linear_bf16_packed(const uint16_t* x, int64_t ldx, int64_t m, int64_t n, int64_t k,
                           const uint16_t* w_packed, const rvv_packed_layout* layout, int64_t nb, const void* bias,
                           int bias_dtype, void* y, int64_t ldy, int y_dtype, int64_t block_begin,
                           int64_t block_end) {
  return rvv_linear_packed_opts(x, ldx, m, n, k, w_packed, layout, nb, bias, bias_dtype, y, ldy, y_dtype, block_begin,
                                block_end, 0);
}

int rvv_quant_layout(int format, int group_size, int scale_dtype, int zero_points, int64_t n, int64_t k, int64_t nb,
                     rvv_packed_layout* layout) {
  if (!layout) return error(Status::kNullPointer, "rvv_quant_layout: layout is NULL");
  const QuantSpec q{DType(format), group_size, DType(scale_dtype), zero_points != 0};
  Status s = validate_quant_spec(q, t_last_error, kErrLen);
  if (s != Status::kOk) return int(s);
  if (packed_size(n, k, nb) < 0) {
    std::snprintf(t_last_error, kErrLen, "rvv_quant_layout: invalid n=%lld k=%lld nb=%lld", (long long)n, (long long)k,
                  (long long)nb);
    return int(Status::kBadShape);
  }
  *layout = make_quant_layout(q, n, k, nb, effective_cpu().vlenb);
  return finish(Status::kOk);
}

namespace {
// Validates a quantized layout and the size of the caller's packed buffer.
Status check_quant_buffer(const rvv_packed_layout* layout, int64_t bytes, const char* what) {
  if (!layout) {
    std::snprintf(t_last_error, kErrLen, "%s: layout is NULL", what);
    return Status::kNullPointer;
  }
  Status s = validate_layout(*layout, layout->n, layout->k, 0, t_last_error, kErrLen);
  if (s != Status::kOk) return s;
  if (!is_quantized(DType(layout->dtype)) && !is_block_format(DType(layout->dtype))) {
    std::snprintf(t_last_error, kErrLen, "%s: the layout holds no quantized weight (format %d)", what, int(layout->dtype));
    return Status::kLayoutMismatch;
  }
  if (bytes < layout->bytes) {
    std::snprintf(t_last_error, kErrLen, "%s: buffer has %lld bytes, %lld needed", what, (long long)bytes,
                  (long long)layout->bytes);
    return Status::kBufferTooSmall;
  }
  return Status::kOk;
}
// The int8/int4 entry points (values, scales and zero points as arrays) take no block format.
Status check_int_format(const rvv_packed_layout* layout, const char* what) {
  if (is_block_format(DType(layout->dtype))) {
    std::snprintf(t_last_error, kErrLen, "%s: format %s is packed from its GGUF blocks (rvv_pack_gguf_blocks)", what,
                  weight_format(DType(layout->dtype))->name);
    return Status::kLayoutMismatch;
  }
  return Status::kOk;
}
}  // namespace

int rvv_quantize_pack(const uint16_t* w, int64_t ldw, const rvv_packed_layout* layout, uint8_t* out,
                      int64_t out_bytes) {
  Status s = check_quant_buffer(layout, out_bytes, "rvv_quantize_pack");
  if (s == Status::kOk) s = check_int_format(layout, "rvv_quantize_pack");
  if (s != Status::kOk) return int(s);
  const QuantSpec q = quant_spec_of(*layout);
  const int64_t N = layout->n, K = layout->k, G = quant_num_groups(q, K);
  std::unique_ptr<int8_t[]> values(new (std::nothrow) int8_t[size_t(N * K > 0 ? N * K : 1)]);
  std::unique_ptr<uint16_t[]> scales(new (std::nothrow) uint16_t[size_t(N * G > 0 ? N * G : 1)]);
  std::unique_ptr<uint8_t[]> zeros(new (std::nothrow) uint8_t[size_t(N * G > 0 ? N * G : 1)]);
  if (!values || !scales || !zeros) return error(Status::kNoMemory, "rvv_quantize_pack: out of memory");
  s = quantize_reference(q, w, ldw, N, K, values.get(), scales.get(), zeros.get(), t_last_error, kErrLen);
  if (s == Status::kOk)
    s = pack_quantized(q, values.get(), K, scales.get(), zeros.get(), N, K, layout->nb, out, t_last_error, kErrLen);
  return s == Status::kOk ? finish(s) : int(s);
}

int rvv_pack_quantized(const int8_t* values, int64_t ldq, const uint16_t* scales, const uint8_t* zeros,
                       const rvv_packed_layout* layout, uint8_t* out, int64_t out_bytes) {
  Status s = check_quant_buffer(layout, out_bytes, "rvv_pack_quantized");
  if (s == Status::kOk) s = check_int_format(layout, "rvv_pack_quantized");
  if (s != Status::kOk) return int(s);
  s = pack_quantized(quant_spec_of(*layout), values, ldq, scales, zeros, layout->n, layout->k, layout->nb, out,
                     t_last_error, kErrLen);
  return s == Status::kOk ? finish(s) : int(s);
}

int rvv_unpack_quantized(const uint8_t* packed, const rvv_packed_layout* layout, int8_t* values, uint16_t* scales,
                         uint8_t* zeros) {
  Status s = check_quant_buffer(layout, layout ? layout->bytes : 0, "rvv_unpack_quantized");
  if (s == Status::kOk) s = check_int_format(layout, "rvv_unpack_quantized");
  if (s != Status::kOk) return int(s);
  const QuantSpec q = quant_spec_of(*layout);
  const int64_t N = layout->n, K = layout->k, G = quant_num_groups(q, K), gr = quant_group_rows(q, K);
  if (N * K > 0 && (!packed || !values || !scales))
    return error(Status::kNullPointer, "rvv_unpack_quantized: NULL packed, values or scales");
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const QuantElement e = quant_element(packed, *layout, n, k);
      values[n * K + k] = int8_t(e.value);
      if (k % gr == 0) {
        scales[n * G + k / gr] = e.scale;
        if (zeros) zeros[n * G + k / gr] = uint8_t(e.zero);
      }
    }
  return finish(Status::kOk);
}

int rvv_dequantize(const uint8_t* packed, const rvv_packed_layout* layout, float* w, int64_t ldw, int64_t w_elements) {
  Status s = check_quant_buffer(layout, layout ? layout->bytes : 0, "rvv_dequantize");
  if (s != Status::kOk) return int(s);
  if (layout->n > 0 && layout->k > 0 && ldw >= layout->k && w_elements < (layout->n - 1) * ldw + layout->k) {
    std::snprintf(t_last_error, kErrLen, "rvv_dequantize: w has %lld elements, %lld needed", (long long)w_elements,
                  (long long)((layout->n - 1) * ldw + layout->k));
    return int(Status::kBufferTooSmall);
  }
  s = dequantize_packed(packed, *layout, w, ldw, t_last_error, kErrLen);
  return s == Status::kOk ? finish(s) : int(s);
}

int rvv_dequantize_rows(const uint8_t* packed, const rvv_packed_layout* layout, const int64_t* rows, int64_t nrows,
                        float* w, int64_t ldw, int64_t w_elements) {
  Status s = check_quant_buffer(layout, layout ? layout->bytes : 0, "rvv_dequantize_rows");
  if (s != Status::kOk) return int(s);
  const int64_t K = layout->k;
  if (nrows < 0 || ldw < K) {
    std::snprintf(t_last_error, kErrLen, "rvv_dequantize_rows: nrows=%lld, ldw=%lld (K=%lld)", (long long)nrows,
                  (long long)ldw, (long long)K);
    return int(Status::kBadShape);
  }
  if (nrows == 0 || K == 0) return finish(Status::kOk);
  if (!packed || !rows || !w) return error(Status::kNullPointer, "rvv_dequantize_rows: null pointer");
  if (w_elements < (nrows - 1) * ldw + K) {
    std::snprintf(t_last_error, kErrLen, "rvv_dequantize_rows: w has %lld elements, %lld needed", (long long)w_elements,
                  (long long)((nrows - 1) * ldw + K));
    return int(Status::kBufferTooSmall);
  }
  for (int64_t i = 0; i < nrows; ++i)
    if (rows[i] < 0 || rows[i] >= layout->n) {
      std::snprintf(t_last_error, kErrLen, "rvv_dequantize_rows: row %lld (index %lld) is outside [0, %lld)",
                    (long long)rows[i], (long long)i, (long long)layout->n);
      return int(Status::kBadShape);
    }
  const bool blocks = is_block_format(DType(layout->dtype));
  for (int64_t i = 0; i < nrows; ++i)
    for (int64_t k = 0; k < K; ++k)
      w[i * ldw + k] = blocks ? block_dequantized_weight(packed, *layout, rows[i], k)
                              : dequantized_weight(packed, *layout, rows[i], k);
  return finish(Status::kOk);
}

int rvv_weight_format_info(int code, rvv_weight_format* out) {
  if (!out) return error(Status::kNullPointer, "rvv_weight_format_info: out is NULL");
  if (!fill_weight_format(DType(code), out)) {
    std::snprintf(t_last_error, kErrLen, "rvv_weight_format_info: %d is not a weight format code", code);
    return int(Status::kBadDtype);
  }
  return finish(Status::kOk);
}

int rvv_block_layout(int format, int64_t n, int64_t k, int64_t nb, rvv_packed_layout* layout) {
  if (!layout) return error(Status::kNullPointer, "rvv_block_layout: layout is NULL");
  const WeightFormatTraits* t = weight_format(DType(format));
  if (!t || !is_block_format(DType(format))) {
    std::snprintf(t_last_error, kErrLen, "rvv_block_layout: format %d is not a block format", format);
    return int(Status::kBadDtype);
  }
  if (block_packed_bytes(DType(format), n, k, nb) < 0) {
    std::snprintf(t_last_error, kErrLen, "rvv_block_layout: %s [n=%lld, k=%lld] nb=%lld: k must be a multiple of %d",
                  t->name, (long long)n, (long long)k, (long long)nb, int(t->super_rows));
    return int(Status::kBadShape);
  }
  *layout = make_block_layout(DType(format), n, k, nb, effective_cpu().vlenb);
  return finish(Status::kOk);
}

int rvv_pack_gguf_blocks(const uint8_t* blocks, int64_t ldb, const rvv_packed_layout* layout, uint8_t* out,
                         int64_t out_bytes) {
  Status s = check_quant_buffer(layout, out_bytes, "rvv_pack_gguf_blocks");
  if (s == Status::kOk && !is_block_format(DType(layout->dtype))) {
    std::snprintf(t_last_error, kErrLen, "rvv_pack_gguf_blocks: format %d is not a block format", int(layout->dtype));
    s = Status::kLayoutMismatch;
  }
  if (s != Status::kOk) return int(s);
  s = pack_gguf_blocks(DType(layout->dtype), blocks, ldb, layout->n, layout->k, layout->nb, out, t_last_error, kErrLen);
  return s == Status::kOk ? finish(s) : int(s);
}

int rvv_linear_packed_opts(const uint16_t* x, int64_t ldx, int64_t m, int64_t n, int64_t k, const void* w_packed,
                           const rvv_packed_layout* layout, int64_t nb, const void* bias, int bias_dtype, void* y,
                           int64_t ldy, int y_dtype, int64_t block_begin, int64_t block_end, int options) {
  if (options & ~int(RVV_LINEAR_X_INT8 | RVV_LINEAR_X_INT8_GEMM)) {
    std::snprintf(t_last_error, kErrLen, "rvv_linear_packed_opts: unknown option bits 0x%x", unsigned(options));
    return int(Status::kBadShape);
  }
  LinearProblem p = operands(x, ldx, m, n, k, bias, bias_dtype, y, ldy, y_dtype);
  p.weight_layout = WeightLayout::kPacked;
  p.w = w_packed;
  p.layout = layout;
  p.nb = nb;
  p.block_begin = block_begin;
  p.block_end = block_end;
  p.x_int8 = options & (RVV_LINEAR_X_INT8 | RVV_LINEAR_X_INT8_GEMM);
  const Status s = linear_bf16(p, effective_cpu(), nullptr, t_last_error, kErrLen);
  return s == Status::kOk ? finish(s) : int(s);
}

int rvv_selected_kernel(int64_t m, const rvv_packed_layout* layout, int options, int path, int vlenb, char* buf,
                        size_t len) {
  if (!layout || !buf) return error(Status::kNullPointer, "rvv_selected_kernel: layout or buf is NULL");
  if (options & ~int(RVV_LINEAR_X_INT8 | RVV_LINEAR_X_INT8_GEMM) || path < RVV_PATH_SCALAR || path > RVV_PATH_RVV_ZVFH ||
      m < 1 || vlenb < 0) {
    std::snprintf(t_last_error, kErrLen, "rvv_selected_kernel: m=%lld, options 0x%x, path %d, vlenb %d", (long long)m,
                  unsigned(options), path, vlenb);
    return int(Status::kBadShape);
  }
  const Status s = validate_layout(*layout, layout->n, layout->k, 0, t_last_error, kErrLen);
  if (s != Status::kOk) return int(s);
  LinearProblem p{};
  p.M = m, p.N = layout->n, p.K = layout->k;
  p.weight_layout = WeightLayout::kPacked, p.layout = layout, p.nb = layout->nb;
  p.y_dtype = DType::kBF16, p.block_end = -1;
  p.x_int8 = options;
  const char* name = selected_kernel_name(p, features_for_path(KernelPath(path), vlenb));
  if (!name || std::strlen(name) >= len) return error(Status::kBufferTooSmall, "rvv_selected_kernel: no name or buf too small");
  std::strcpy(buf, name);
  return finish(Status::kOk);
}

int rvv_linear_bf16_rowmajor(const uint16_t* x, int64_t ldx, int64_t m, int64_t n, int64_t k, const uint16_t* w,
                             int64_t ldw, const void* bias, int bias_dtype, void* y, int64_t ldy, int y_dtype) {
  LinearProblem p = operands(x, ldx, m, n, k, bias, bias_dtype, y, ldy, y_dtype);
  p.weight_layout = WeightLayout::kRowMajor;
  p.w = w;
  p.ldw = ldw;
  p.block_end = -1;
  const Status s = linear_bf16(p, effective_cpu(), nullptr, t_last_error, kErrLen);
  return s == Status::kOk ? finish(s) : int(s);
}

int rvv_f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  const Status s = convert_f32_to_bf16(src, dst, n, effective_cpu());
  return s == Status::kOk ? finish(s) : error(s, "rvv_f32_to_bf16: n < 0 or NULL pointer");
}

int rvv_bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  const Status s = convert_bf16_to_f32(src, dst, n, effective_cpu());
  return s == Status::kOk ? finish(s) : error(s, "rvv_bf16_to_f32: n < 0 or NULL pointer");
}

int rvv_attention_varlen_bf16(const rvv_varlen_attention* a, int nthreads) {
  if (!a) return error(Status::kNullPointer, "rvv_attention_varlen_bf16: a is NULL");
  return finish(attention_varlen(*a, effective_cpu(), nthreads, nullptr, t_last_error, kErrLen));
}

// The marker's region id is an instruction immediate, hence one case per id.
int rvv_count_region(int id, int begin) {
  if (id < 1 || id > 16) return error(Status::kBadRange, "rvv_count_region: id must be 1..16");
  if (begin) {
    switch (id) {
      case 1: RVV_BENCH_BEGIN(1); break;
      case 2: RVV_BENCH_BEGIN(2); break;
      case 3: RVV_BENCH_BEGIN(3); break;
      case 4: RVV_BENCH_BEGIN(4); break;
      case 5: RVV_BENCH_BEGIN(5); break;
      case 6: RVV_BENCH_BEGIN(6); break;
      case 7: RVV_BENCH_BEGIN(7); break;
      case 8: RVV_BENCH_BEGIN(8); break;
      case 9: RVV_BENCH_BEGIN(9); break;
      case 10: RVV_BENCH_BEGIN(10); break;
      case 11: RVV_BENCH_BEGIN(11); break;
      case 12: RVV_BENCH_BEGIN(12); break;
      case 13: RVV_BENCH_BEGIN(13); break;
      case 14: RVV_BENCH_BEGIN(14); break;
      case 15: RVV_BENCH_BEGIN(15); break;
      case 16: RVV_BENCH_BEGIN(16); break;
    }
  } else {
    switch (id) {
      case 1: RVV_BENCH_END(1); break;
      case 2: RVV_BENCH_END(2); break;
      case 3: RVV_BENCH_END(3); break;
      case 4: RVV_BENCH_END(4); break;
      case 5: RVV_BENCH_END(5); break;
      case 6: RVV_BENCH_END(6); break;
      case 7: RVV_BENCH_END(7); break;
      case 8: RVV_BENCH_END(8); break;
      case 9: RVV_BENCH_END(9); break;
      case 10: RVV_BENCH_END(10); break;
      case 11: RVV_BENCH_END(11); break;
      case 12: RVV_BENCH_END(12); break;
      case 13: RVV_BENCH_END(13); break;
      case 14: RVV_BENCH_END(14); break;
      case 15: RVV_BENCH_END(15); break;
      case 16: RVV_BENCH_END(16); break;
    }
  }
  return finish(Status::kOk);
}

}  // extern "C"
