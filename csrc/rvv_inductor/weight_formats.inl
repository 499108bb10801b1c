// The weight formats: one line per format, the traits every other part reads (the
// packing, the validation, the C ABI's rvv_weight_format_info, which the Python spec class
// and the GGUF loader read, and the kernel table's format column).
//
//   RVV_WEIGHT_FORMAT(name, code, gguf, bits, block_rows, super_rows, scales, offset,
//                     implicit_zero, record_bytes, file_block_bytes, configurable, lookup)
//
//   name           the format column of kernel_table.inl and the Python spec's name
//   gguf           the GGUF tensor type stored as this format value for value ("" none)
//   bits           bits per stored integer (bf16: 16, no integers)
//   block_rows     K rows per scale (a sub-block); 0 = the layout's group_size
//   super_rows     K rows per record (a super-block); 0 = the layout's group_size
//   scales         RVV_SCALES_*: how q is scaled (abi_types.h)
//   offset         RVV_OFFSET_*: what is added to the scaled q
//   implicit_zero  z of RVV_OFFSET_ZERO when no zero point is stored
//   record_bytes   bytes per output channel of one record: the file's bytes per block, so
//                  the packed weight keeps the file's bits per weight (0: configurable)
//   configurable   1: group size, scale dtype and zero points come from the layout
//   lookup         RVV_LOOKUP_*: the stored integer is q (NONE), or an index into a table
//                  whose entry + 128 is q (IQ4NL: then bits is the index's, and q has 8)
//
// A new format: its line here, its record (block_quant.h: offsets, pack from the file's
// block, the scalar dequantization), its vector decode (rvv/block_quant_decode.h) and its
// kernel-table lines (csrc/README.md, "Adding a format").
//
//                 name    code              gguf      bits blk super scales               offset                    z  rec  file cfg lookup
RVV_WEIGHT_FORMAT(bf16,   RVV_DTYPE_BF16,   "BF16",    16,  0,   0, RVV_SCALES_NONE,     RVV_OFFSET_NONE,          0,   0,   0, 0, RVV_LOOKUP_NONE)
RVV_WEIGHT_FORMAT(int8,   RVV_DTYPE_INT8,   "Q8_0",     8,  0,   0, RVV_SCALES_GROUP,    RVV_OFFSET_NONE,          0,   0,  34, 1, RVV_LOOKUP_NONE)
RVV_WEIGHT_FORMAT(int4,   RVV_DTYPE_INT4,   "Q4_0",     4,  0,   0, RVV_SCALES_GROUP,    RVV_OFFSET_ZERO,          8,   0,  18, 1, RVV_LOOKUP_NONE)
RVV_WEIGHT_FORMAT(q4_1,   RVV_DTYPE_Q4_1,   "Q4_1",     4, 32,  32, RVV_SCALES_F16,      RVV_OFFSET_F16_MIN,       0,  20,  20, 0, RVV_LOOKUP_NONE)
RVV_WEIGHT_FORMAT(q4_k,   RVV_DTYPE_Q4_K,   "Q4_K",     4, 32, 256, RVV_SCALES_F16_SUB6, RVV_OFFSET_F16_SUB6_MIN,  0, 144, 144, 0, RVV_LOOKUP_NONE)
RVV_WEIGHT_FORMAT(q5_k,   RVV_DTYPE_Q5_K,   "Q5_K",     5, 32, 256, RVV_SCALES_F16_SUB6, RVV_OFFSET_F16_SUB6_MIN,  0, 176, 176, 0, RVV_LOOKUP_NONE)
RVV_WEIGHT_FORMAT(q6_k,   RVV_DTYPE_Q6_K,   "Q6_K",     6, 16, 256, RVV_SCALES_F16_SUB8, RVV_OFFSET_ZERO,         32, 210, 210, 0, RVV_LOOKUP_NONE)
RVV_WEIGHT_FORMAT(q5_0,   RVV_DTYPE_Q5_0,   "Q5_0",     5, 32,  32, RVV_SCALES_F16,      RVV_OFFSET_ZERO,         16,  22,  22, 0, RVV_LOOKUP_NONE)
RVV_WEIGHT_FORMAT(q5_1,   RVV_DTYPE_Q5_1,   "Q5_1",     5, 32,  32, RVV_SCALES_F16,      RVV_OFFSET_F16_MIN,       0,  24,  24, 0, RVV_LOOKUP_NONE)
RVV_WEIGHT_FORMAT(iq4_nl, RVV_DTYPE_IQ4_NL, "IQ4_NL",   4, 32,  32, RVV_SCALES_F16,      RVV_OFFSET_ZERO,        128,  18,  18, 0, RVV_LOOKUP_IQ4NL)
RVV_WEIGHT_FORMAT(q2_k,   RVV_DTYPE_Q2_K,   "Q2_K",     2, 16, 256, RVV_SCALES_F16_SUB4, RVV_OFFSET_F16_SUB4_MIN,  0,  84,  84, 0, RVV_LOOKUP_NONE)
RVV_WEIGHT_FORMAT(q3_k,   RVV_DTYPE_Q3_K,   "Q3_K",     3, 16, 256, RVV_SCALES_F16_SUB6_M32, RVV_OFFSET_ZERO,     4, 110, 110, 0, RVV_LOOKUP_NONE)
RVV_WEIGHT_FORMAT(iq4_xs, RVV_DTYPE_IQ4_XS, "IQ4_XS",   4, 32, 256, RVV_SCALES_F16_SUB6_M32, RVV_OFFSET_ZERO,    128, 136, 136, 0, RVV_LOOKUP_IQ4NL)
