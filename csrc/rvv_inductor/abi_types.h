/* Plain data shared by the C ABI (ctypes) and the C++ API: status codes, dtypes and the
 * packed-weight layout descriptor. C-compatible, no code, so it is safe to include from
 * translation units compiled for any ISA. */
#ifndef RVV_INDUCTOR_ABI_TYPES_H
#define RVV_INDUCTOR_ABI_TYPES_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes of every rvv_* function and of the C++ API (as rvv_inductor::Status). */
enum {
  RVV_OK = 0,
  RVV_ERR_NULL_POINTER = -1,    /* a required pointer was NULL */
  RVV_ERR_BAD_SHAPE = -2,       /* negative or inconsistent M, N, K, leading dimension */
  RVV_ERR_LAYOUT_MISMATCH = -3, /* the packed-layout descriptor does not fit the call */
  RVV_ERR_BAD_DTYPE = -4,       /* unknown or unsupported dtype code */
  RVV_ERR_BAD_RANGE = -5,       /* block range outside [0, number of blocks] */
  RVV_ERR_NO_MEMORY = -6,       /* scratch or packed buffer allocation failed */
  RVV_ERR_BUFFER_TOO_SMALL = -7 /* a caller-provided buffer is smaller than needed */
};

/* Element types. Also the weight formats of a packed layout: BF16 (2-byte elements),
 * INT8 and INT4 (quantized, with 16-bit scales of RVV_DTYPE_BF16 or RVV_DTYPE_F16). */
enum {
  RVV_DTYPE_NONE = 0,
  RVV_DTYPE_BF16 = 1,
  RVV_DTYPE_F32 = 2,
  RVV_DTYPE_F16 = 3,
  RVV_DTYPE_INT8 = 4,
  RVV_DTYPE_INT4 = 5
};

/* Which implementation a call ran (or would run): the ISA variants of the kernel table
 * (kernel_table.inl), plus the portable scalar code. */
enum { RVV_PATH_SCALAR = 0, RVV_PATH_RVV = 1, RVV_PATH_RVV_ZVFBF = 2, RVV_PATH_RVV_ZVFH = 3 };

#define RVV_PACKED_MAGIC 0x4B505652u /* "RVPK" as little-endian bytes */
#define RVV_PACKED_VERSION 2u

/* Describes a weight W[N, K] packed as [ceil(N/nb)][K][nb] (see packing.h). */
typedef struct rvv_packed_layout {
  uint32_t magic;     /* RVV_PACKED_MAGIC */
  uint32_t version;   /* RVV_PACKED_VERSION */
  int64_t n;          /* rows of the unpacked weight = output features */
  int64_t k;          /* columns of the unpacked weight = input features */
  int64_t nb;         /* block width in elements along N */
  int64_t num_blocks; /* ceil(n / nb) */
  int64_t elements;   /* num_blocks * k * nb: size of the packed data in elements */
  int32_t dtype;      /* element type of the packed data: RVV_DTYPE_BF16 */
  int32_t vlenb;      /* VLEN/8 that nb was chosen for (0: no vector unit); informational */
  int32_t lmul;       /* e32 LMUL whose VLMAX nb equals at that vlenb; informational */
  int32_t reserved;   /* 0 */
  int64_t bytes;       /* storage of the packed data in bytes, scales and zero points included */
  int32_t group_size;  /* quantized: K rows sharing one scale (a group); 0 for bf16 */
  int32_t scale_dtype; /* quantized: RVV_DTYPE_BF16 or RVV_DTYPE_F16; 0 for bf16 */
  int32_t zero_points; /* quantized: 1 when every group stores a zero point per column */
  int32_t reserved2;   /* 0 */
} rvv_packed_layout;

/* Attention over a packed batch of variable-length sequences (continuous batching; see
 * attention.h, attention_varlen_rows). Sequence s owns query rows [cu_q[s], cu_q[s+1]) of q
 * and key/value rows [cu_k[s], cu_k[s+1]) of k and v; its queries are its last keys, so
 * query j of nq attends keys [0, nk - nq + j] (causal, aligned at the end), or only the
 * last `window` of those. Query rows from cu_q[S] to Tq (padding) get zeros. Strides are
 * in elements; the last dimension (D) of q, k, v is contiguous. */
typedef struct rvv_varlen_attention {
  const uint16_t* q; /* [Tq, H, D] bf16 */
  int64_t q_st, q_sh;
  const uint16_t* k; /* [Lk, Hkv, D] bf16 */
  int64_t k_sl, k_sh;
  const uint16_t* v; /* [Lk, Hkv, D] bf16 */
  int64_t v_sl, v_sh;
  const int32_t* cu_q; /* [S + 1], non-decreasing, cu_q[0] = 0 */
  const int32_t* cu_k; /* [S + 1], likewise */
  uint16_t* out;       /* [Tq, H, D] bf16, contiguous */
  int64_t S, Tq, Lk, H, Hkv, D;
  int64_t window; /* 0: every earlier key; else at most `window` keys, the query's own included */
  float scale;
  int32_t reserved; /* 0 */
} rvv_varlen_attention;

/* Which C struct rvv_abi_sizeof is asked about (ctypes mirrors check their size). */
enum { RVV_ABI_PACKED_LAYOUT = 1, RVV_ABI_CPU_FEATURES = 2, RVV_ABI_VARLEN_ATTENTION = 3 };

#ifdef __cplusplus
}
#endif
#endif
