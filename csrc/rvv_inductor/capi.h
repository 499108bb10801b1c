/* C ABI of the kernel library for Python ctypes (librvv_inductor_core.so). Every function
 * returns RVV_OK (0) or a negative RVV_ERR_* code and never aborts on bad input; the
 * message of the calling thread's last failure is read with rvv_last_error. Calls use
 * the CPU configuration from rvv_effective_cpu (RVV_INDUCTOR_CPU may narrow it; an
 * invalid override falls back to scalar code). bf16 arrays are uint16_t bit patterns. */
#ifndef RVV_INDUCTOR_CAPI_H
#define RVV_INDUCTOR_CAPI_H
#include <stddef.h>
#include <stdint.h>

#include "rvv_inductor/abi_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copies the calling thread's last error message (NUL-terminated, truncated to len).
 * Returns the full message length; "" after a successful call. Thread-local, the only
 * state the library keeps. */
int rvv_last_error(char* buf, size_t len);
/* Short static name of a status code. */
const char* rvv_status_name(int status);

/* RVV_PATH_* the linear functions run on this CPU. */
int rvv_kernel_path(void);
/* Preferred block width nb for this CPU (2 * vlenb; 64 without V). */
int64_t rvv_preferred_nb(void);

/* Block width nb the kernels prefer at a given vlenb (VLEN/8; 0: no vector unit). The
 * one definition of the policy; rvv_preferred_nb is this at the running CPU's vlenb. */
int64_t rvv_nb_for_vlenb(int vlenb);
/* Fills *layout with the descriptor of a bf16 W[n, k] packed with block width nb (the
 * same descriptor rvv_pack_bf16 writes). */
int rvv_make_layout(int64_t n, int64_t k, int64_t nb, rvv_packed_layout* layout);
/* sizeof of the C struct RVV_ABI_* (0 for an unknown code), so that language bindings
 * can check their mirrors of the structs. */
size_t rvv_abi_sizeof(int which);

/* Elements (uint16_t) of W[n, k] packed with block width nb, in *elements. */
int rvv_packed_size(int64_t n, int64_t k, int64_t nb, int64_t* elements);
/* Packs W[n, k] (row stride ldw) into out (out_elements >= packed size) and fills
 * *layout (may be NULL). */
int rvv_pack_bf16(const uint16_t* w, int64_t ldw, int64_t n, int64_t k, int64_t nb, uint16_t* out,
                  int64_t out_elements, rvv_packed_layout* layout);
/* Inverse: writes W[n, k] with row stride ldw into w (w_elements >= (n-1)*ldw + k). */
int rvv_unpack_bf16(const uint16_t* packed, const rvv_packed_layout* layout, uint16_t* w, int64_t ldw,
                    int64_t w_elements);
/* RVV_OK when layout describes a bf16 W[n, k] packed with block width nb (nb 0: any). */
int rvv_validate_layout(const rvv_packed_layout* layout, int64_t n, int64_t k, int64_t nb);
/* Block range [*begin, *end) of thread t of nthreads over num_blocks blocks. */
int rvv_partition_blocks(int64_t num_blocks, int nthreads, int t, int64_t* begin, int64_t* end);

/* Y[m, cols] = X[m, k] . W^T (+ bias) for the columns of blocks [block_begin, block_end)
 * (block_end < 0: all), W packed as described by layout (bf16, int8 or int4), which must
 * say [n, k] and, when nb > 0, block width nb. bias_dtype / y_dtype: RVV_DTYPE_BF16 or RVV_DTYPE_F32 (bias
 * may be NULL). */
int rvv_linear_bf16_packed(const uint16_t* x, int64_t ldx, int64_t m, int64_t n, int64_t k,
                           const uint16_t* w_packed, const rvv_packed_layout* layout, int64_t nb, const void* bias,
                           int bias_dtype, void* y, int64_t ldy, int y_dtype, int64_t block_begin,
                           int64_t block_end);
/* The same with a row-major W[n, k] (row stride ldw), all n columns. */
int rvv_linear_bf16_rowmajor(const uint16_t* x, int64_t ldx, int64_t m, int64_t n, int64_t k, const uint16_t* w,
                             int64_t ldw, const void* bias, int bias_dtype, void* y, int64_t ldy, int y_dtype);

/* ---- Quantized (INT8 / INT4) weights: quant_packing.h has the layout. ----
 * format: RVV_DTYPE_INT8 or RVV_DTYPE_INT4; group_size: K rows per scale (0: one per
 * output channel, INT8 only; else even, 16..4096); scale_dtype: RVV_DTYPE_BF16 or
 * RVV_DTYPE_F16; zero_points: 1 for a zero point per group and column (INT4 only). */

/* Fills *layout for W[n, k] in that format with block width nb (layout->bytes is the
 * packed size). */
int rvv_quant_layout(int format, int group_size, int scale_dtype, int zero_points, int64_t n, int64_t k, int64_t nb,
                     rvv_packed_layout* layout);
/* Quantizes bf16 W[n, k] (row stride ldw) with the reference round-to-nearest quantizer
 * and packs it into out (out_bytes >= layout->bytes). */
int rvv_quantize_pack(const uint16_t* w, int64_t ldw, const rvv_packed_layout* layout, uint8_t* out,
                      int64_t out_bytes);
/* Packs already-quantized values bit for bit: values[n * ldq + k] (INT8: int8; INT4: 0..15),
 * scales[n * groups + g] (scale_dtype bits), zeros[n * groups + g] (INT4 with zero points,
 * else may be NULL); groups = ceil(k / group size). */
int rvv_pack_quantized(const int8_t* values, int64_t ldq, const uint16_t* scales, const uint8_t* zeros,
                       const rvv_packed_layout* layout, uint8_t* out, int64_t out_bytes);
/* The inverse: values [n, k] (row stride k), scales and zeros [n, groups] (zeros: implicit
 * zero points when the layout stores none; may be NULL). */
int rvv_unpack_quantized(const uint8_t* packed, const rvv_packed_layout* layout, int8_t* values, uint16_t* scales,
                         uint8_t* zeros);
/* The dequantized weight (q - z) * s as fp32 W[n, k], row stride ldw
 * (w_elements >= (n-1)*ldw + k). */
int rvv_dequantize(const uint8_t* packed, const rvv_packed_layout* layout, float* w, int64_t ldw, int64_t w_elements);

/* Rows rows[0..nrows) of the dequantized weight (q - z) * s as fp32, row i at w + i * ldw
 * (w_elements >= (nrows-1)*ldw + k): what a tied embedding reads from a quantized lm_head.
 * A row outside [0, n) is RVV_ERR_BAD_SHAPE, nothing written. */
int rvv_dequantize_rows(const uint8_t* packed, const rvv_packed_layout* layout, const int64_t* rows, int64_t nrows,
                        float* w, int64_t ldw, int64_t w_elements);

/* ---- Weight formats (weight_formats.inl) and the GGUF block formats (block_quant.h) ---- */
/* The traits of weight format `code` (RVV_DTYPE_*): RVV_ERR_BAD_DTYPE for another code. */
int rvv_weight_format_info(int code, rvv_weight_format* out);
/* Fills *layout for W[n, k] in block format `format` (RVV_DTYPE_Q4_1, _Q4_K, _Q5_K, _Q6_K)
 * with block width nb; k must be a multiple of the format's super-block rows. */
int rvv_block_layout(int format, int64_t n, int64_t k, int64_t nb, rvv_packed_layout* layout);
/* Packs a tensor stored as GGUF blocks of the layout's format, value for value: row n (one
 * output channel, k / super_rows file blocks) at blocks + n * ldb bytes. */
int rvv_pack_gguf_blocks(const uint8_t* blocks, int64_t ldb, const rvv_packed_layout* layout, uint8_t* out,
                         int64_t out_bytes);

/* rvv_linear_bf16_packed with options: RVV_LINEAR_X_INT8 lets INT4 decode (m == 1)
 * quantize the activations to INT8 per 16 elements; RVV_LINEAR_X_INT8_GEMM lets INT4/INT8
 * calls with m >= 2 quantize them per 32 elements (quant_x8.h). Both are faster, with
 * their own error bound (see csrc/README.md). */
enum { RVV_LINEAR_X_INT8 = 1, RVV_LINEAR_X_INT8_GEMM = 2 };
int rvv_linear_packed_opts(const uint16_t* x, int64_t ldx, int64_t m, int64_t n, int64_t k, const void* w_packed,
                           const rvv_packed_layout* layout, int64_t nb, const void* bias, int bias_dtype, void* y,
                           int64_t ldy, int y_dtype, int64_t block_begin, int64_t block_end, int options);

/* The kernel-table name the dispatcher picks ("rvv_zvfh/q4_k/gemv_1xm8"; "scalar/..." when
 * no vector kernel applies) for an m-row call on `layout` with `options` (RVV_LINEAR_*),
 * on a CPU whose features select exactly kernel path `path` (RVV_PATH_*) at vlenb: what
 * generated code that runs the same template says it runs. Copied into buf. */
int rvv_selected_kernel(int64_t m, const rvv_packed_layout* layout, int options, int path, int vlenb, char* buf,
                        size_t len);

/* Attention over a packed batch of variable-length sequences (rvv_varlen_attention in
 * abi_types.h: continuous batching's layout), BF16 in and out, FP32 inside; query rows
 * split over nthreads threads (0: libgomp's default). */
int rvv_attention_varlen_bf16(const rvv_varlen_attention* a, int nthreads);

/* Elementwise conversions (f32 -> bf16 rounds to nearest even, NaN stays quiet NaN). */
int rvv_f32_to_bf16(const float* src, uint16_t* dst, int64_t n);
int rvv_bf16_to_f32(const uint16_t* src, float* dst, int64_t n);

/* Begin (begin != 0) or end region id (1..16) of the rvvcount QEMU plugin's counters
 * (csrc/rvv_inductor/markers.h), so Python callers such as the demo can charge work to
 * regions. Without the plugin, and on hardware, it executes a no-op hint. */
int rvv_count_region(int id, int begin);

#ifdef __cplusplus
}
#endif
#endif
