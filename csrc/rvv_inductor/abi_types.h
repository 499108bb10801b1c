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
 * INT8 and INT4 (quantized, with 16-bit scales of RVV_DTYPE_BF16 or RVV_DTYPE_F16), and
 * the GGUF block formats Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (block_quant.h),
 * kept as the file stores
 * them. Every weight format is described by one line of weight_formats.inl. */
enum {
  RVV_DTYPE_NONE = 0,
  RVV_DTYPE_BF16 = 1,
  RVV_DTYPE_F32 = 2,
  RVV_DTYPE_F16 = 3,
  RVV_DTYPE_INT8 = 4,
  RVV_DTYPE_INT4 = 5,
  RVV_DTYPE_Q4_1 = 6,
  RVV_DTYPE_Q4_K = 7,
  RVV_DTYPE_Q5_K = 8,
  RVV_DTYPE_Q6_K = 9,
  RVV_DTYPE_Q5_0 = 10,
  RVV_DTYPE_Q5_1 = 11,
  RVV_DTYPE_IQ4_NL = 12,
  RVV_DTYPE_IQ4_XS = 13,
  RVV_DTYPE_Q2_K = 14,
  RVV_DTYPE_Q3_K = 15
};

/* How a weight format scales its integers (rvv_weight_format.scales). */
enum {
  RVV_SCALES_NONE = 0,      /* bf16: no integers */
  RVV_SCALES_GROUP = 1,     /* one 16-bit scale per group of group_size rows (layout's scale_dtype) */
  RVV_SCALES_F16 = 2,       /* one f16 scale d per block (Q4_1, Q5_0, Q5_1) */
  RVV_SCALES_F16_SUB6 = 3,  /* f16 d per super-block x 6-bit unsigned sub-block scales (Q4_K, Q5_K) */
  RVV_SCALES_F16_SUB8 = 4,  /* f16 d per super-block x 8-bit signed sub-block scales (Q6_K) */
  RVV_SCALES_F16_SUB6_M32 = 5, /* f16 d per super-block x (6-bit sub-block scale - 32) (IQ4_XS, Q3_K) */
  RVV_SCALES_F16_SUB4 = 6      /* f16 d per super-block x 4-bit unsigned sub-block scales (Q2_K) */
};
/* What a weight format adds to scale * q (rvv_weight_format.offset). */
enum {
  RVV_OFFSET_NONE = 0,       /* w = s * q */
  RVV_OFFSET_ZERO = 1,       /* w = s * (q - z), z = implicit_zero, or stored with zero points (int4) */
  RVV_OFFSET_F16_MIN = 2,    /* w = d * q + m, f16 m per block (Q4_1, Q5_1) */
  RVV_OFFSET_F16_SUB6_MIN = 3, /* w = d * sc * q - dmin * m, f16 dmin x 6-bit sub-block mins (Q4_K, Q5_K) */
  RVV_OFFSET_F16_SUB4_MIN = 4  /* w = d * sc * q - dmin * m, f16 dmin x 4-bit sub-block mins (Q2_K) */
};

/* How a stored integer becomes the q of the value formula (before scale and offset). */
enum {
  RVV_LOOKUP_NONE = 0,  /* q is the stored integer */
  RVV_LOOKUP_IQ4NL = 1  /* q = kvalues_iq4nl[stored 4 bits] + 128 (IQ4_NL, IQ4_XS; block_quant.h) */
};

#define RVV_WEIGHT_FORMAT_VERSION 2u

/* One weight format's traits (weight_formats.inl), for rvv_weight_format_info. */
typedef struct rvv_weight_format {
  uint32_t version;      /* RVV_WEIGHT_FORMAT_VERSION */
  int32_t code;          /* RVV_DTYPE_* */
  char name[16];         /* "int4", "q4_k", ... (the Python spec's format name) */
  char gguf_type[16];    /* the GGUF tensor type packed as this format bit for bit ("" if none) */
  int32_t bits;          /* bits per stored integer (16 for bf16) */
  int32_t block_rows;    /* K rows sharing one scale (a sub-block); 0: the layout's group_size */
  int32_t super_rows;    /* K rows of one record (a super-block); 0: the layout's group_size */
  int32_t scales;        /* RVV_SCALES_* */
  int32_t offset;        /* RVV_OFFSET_* */
  int32_t implicit_zero; /* z of RVV_OFFSET_ZERO without stored zero points */
  int32_t record_bytes;  /* bytes per column of one record (fixed formats); 0: from the layout */
  int32_t file_block_bytes; /* bytes of one GGUF block of super_rows values (fixed formats) */
  int32_t configurable;  /* 1: group size, scale dtype, zero points come from the layout (int8, int4) */
  int32_t lookup;        /* RVV_LOOKUP_*: how the stored integer maps to q */
} rvv_weight_format;

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
enum { RVV_ABI_PACKED_LAYOUT = 1, RVV_ABI_CPU_FEATURES = 2, RVV_ABI_VARLEN_ATTENTION = 3, RVV_ABI_WEIGHT_FORMAT = 4 };

#ifdef __cplusplus
}
#endif
#endif
