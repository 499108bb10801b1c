// The kernel table: every vector kernel, as (ISA variant, weight format, call kind, tile,
// function). The one list from which come the per-ISA kernel sets (src/kernel_set.inc),
// the dispatch (src/linear_dispatch.cpp), the names tests and the benchmark print
// (rvv_inductor::list_kernels) and the per-kernel tests (tests/cpp).
//
//   isa     a variant of kernel_isas.inl; the function is compiled with its -march
//   format  weight format, a name of weight_formats.inl: bf16 | int8 | int4 (quant_packing.h)
//           | q4_1 | q5_0 | q5_1 | iq4_nl | iq4_xs | q2_k | q3_k | q4_k | q5_k | q6_k (GGUF block formats,
//           block_quant.h)
//   kind    gemv: packed weight, M == 1   gemm: packed weight, M >= 2
//           rowmajor: unpacked bf16 W[N, K], any M
//           gemv_x8: packed weight, M == 1, activations quantized to int8 (opt-in)
//           gemm_x8: packed weight, M >= 2, activations quantized to int8 per 32 (quant_x8.h;
//                    INT4, INT8 and the block formats)
//   tile    rows x LMUL of the register tile, for the name (e.g. 6xm4: 6 rows of e32 m4)
//   fn      Status(const LinearOperands&) in rvv_inductor::rvv, in parentheses
//
// To add a format or a tile: write the kernel header under rvv/, include it in
// src/kernel_set.inc, and add its lines here (see csrc/README.md).
//
//         isa        format kind      tile  function
RVV_KERNEL(rvv_zvfbf, bf16,  gemv,     1xm8, (gemv_bf16_packed_1xm8<Bf16Zvfbfmin>))
RVV_KERNEL(rvv_zvfbf, bf16,  gemm,     6xm4, (gemm_bf16_packed_6xm4<Bf16Zvfbfmin>))
RVV_KERNEL(rvv_zvfbf, bf16,  rowmajor, 4xm4, (gemv_bf16_rowmajor_4xm4<Bf16Zvfbfmin, true>))
RVV_KERNEL(rvv_zvfh,  int8,  gemv,     1xm8, (gemv_quant_packed_1xm8<QuantF16, DType::kInt8>))
RVV_KERNEL(rvv_zvfh,  int8,  gemm,     4xm4, (gemm_quant_packed_4xm4<DType::kInt8>))
RVV_KERNEL(rvv_zvfh,  int4,  gemv,     1xm8, (gemv_quant_packed_1xm8<QuantF16, DType::kInt4>))
RVV_KERNEL(rvv_zvfh,  int4,  gemm,     4xm4, (gemm_quant_packed_4xm4<DType::kInt4>))
RVV_KERNEL(rvv_zvfh,  int8,  gemm_x8,  3xm4, (gemm_quant_x8_packed<DType::kInt8>))
RVV_KERNEL(rvv_zvfh,  int4,  gemm_x8,  4xm4, (gemm_quant_x8_packed<DType::kInt4>))
RVV_KERNEL(rvv_zvfh,  q4_1,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF16, DType::kQ4_1>))
RVV_KERNEL(rvv_zvfh,  q4_k,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF16, DType::kQ4_K>))
RVV_KERNEL(rvv_zvfh,  q5_k,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF16, DType::kQ5_K>))
RVV_KERNEL(rvv_zvfh,  q6_k,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF16, DType::kQ6_K>))
RVV_KERNEL(rvv_zvfh,  q5_0,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF16, DType::kQ5_0>))
RVV_KERNEL(rvv_zvfh,  q5_1,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF16, DType::kQ5_1>))
RVV_KERNEL(rvv_zvfh,  iq4_nl, gemv,    1xm8, (gemv_block_quant_1xm8<QuantF16, DType::kIQ4_NL>))
RVV_KERNEL(rvv_zvfh,  iq4_xs, gemv,    1xm8, (gemv_block_quant_1xm8<QuantF16, DType::kIQ4_XS>))
RVV_KERNEL(rvv_zvfh,  q2_k,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF16, DType::kQ2_K>))
RVV_KERNEL(rvv_zvfh,  q3_k,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF16, DType::kQ3_K>))
RVV_KERNEL(rvv,       bf16,  gemv,     1xm8, (gemv_bf16_packed_1xm8<Bf16Soft>))
RVV_KERNEL(rvv,       bf16,  gemm,     6xm4, (gemm_bf16_packed_6xm4<Bf16Soft>))
RVV_KERNEL(rvv,       bf16,  rowmajor, 4xm4, (gemv_bf16_rowmajor_4xm4<Bf16Soft, false>))
RVV_KERNEL(rvv,       int8,  gemv,     1xm8, (gemv_quant_packed_1xm8<QuantF32, DType::kInt8>))
RVV_KERNEL(rvv,       int8,  gemm,     4xm4, (gemm_quant_packed_4xm4<DType::kInt8>))
RVV_KERNEL(rvv,       int4,  gemv,     1xm8, (gemv_quant_packed_1xm8<QuantF32, DType::kInt4>))
RVV_KERNEL(rvv,       int4,  gemm,     4xm4, (gemm_quant_packed_4xm4<DType::kInt4>))
RVV_KERNEL(rvv,       int4,  gemv_x8,  1xm8, (gemv_int4_x8_packed_1xm8))
RVV_KERNEL(rvv,       int8,  gemm_x8,  3xm4, (gemm_quant_x8_packed<DType::kInt8>))
RVV_KERNEL(rvv,       int4,  gemm_x8,  4xm4, (gemm_quant_x8_packed<DType::kInt4>))
RVV_KERNEL(rvv,       q4_1,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF32, DType::kQ4_1>))
RVV_KERNEL(rvv,       q4_1,  gemm,     4xm4, (gemm_quant_packed_4xm4<DType::kQ4_1>))
RVV_KERNEL(rvv,       q4_k,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF32, DType::kQ4_K>))
RVV_KERNEL(rvv,       q4_k,  gemm,     4xm4, (gemm_quant_packed_4xm4<DType::kQ4_K>))
RVV_KERNEL(rvv,       q5_k,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF32, DType::kQ5_K>))
RVV_KERNEL(rvv,       q5_k,  gemm,     4xm4, (gemm_quant_packed_4xm4<DType::kQ5_K>))
RVV_KERNEL(rvv,       q6_k,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF32, DType::kQ6_K>))
RVV_KERNEL(rvv,       q6_k,  gemm,     4xm4, (gemm_quant_packed_4xm4<DType::kQ6_K>))
RVV_KERNEL(rvv,       q5_0,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF32, DType::kQ5_0>))
RVV_KERNEL(rvv,       q5_0,  gemm,     4xm4, (gemm_quant_packed_4xm4<DType::kQ5_0>))
RVV_KERNEL(rvv,       q5_1,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF32, DType::kQ5_1>))
RVV_KERNEL(rvv,       q5_1,  gemm,     4xm4, (gemm_quant_packed_4xm4<DType::kQ5_1>))
RVV_KERNEL(rvv,       iq4_nl, gemv,    1xm8, (gemv_block_quant_1xm8<QuantF32, DType::kIQ4_NL>))
RVV_KERNEL(rvv,       iq4_nl, gemm,    4xm4, (gemm_quant_packed_4xm4<DType::kIQ4_NL>))
RVV_KERNEL(rvv,       iq4_xs, gemv,    1xm8, (gemv_block_quant_1xm8<QuantF32, DType::kIQ4_XS>))
RVV_KERNEL(rvv,       iq4_xs, gemm,    4xm4, (gemm_quant_packed_4xm4<DType::kIQ4_XS>))
RVV_KERNEL(rvv,       q2_k,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF32, DType::kQ2_K>))
RVV_KERNEL(rvv,       q2_k,  gemm,     4xm4, (gemm_quant_packed_4xm4<DType::kQ2_K>))
RVV_KERNEL(rvv,       q3_k,  gemv,     1xm8, (gemv_block_quant_1xm8<QuantF32, DType::kQ3_K>))
RVV_KERNEL(rvv,       q3_k,  gemm,     4xm4, (gemm_quant_packed_4xm4<DType::kQ3_K>))
RVV_KERNEL(rvv,       q4_1,  gemm_x8,  4xm4, (gemm_quant_x8_packed<DType::kQ4_1>))
RVV_KERNEL(rvv,       q4_k,  gemm_x8,  4xm4, (gemm_quant_x8_packed<DType::kQ4_K>))
RVV_KERNEL(rvv,       q5_k,  gemm_x8,  3xm4, (gemm_quant_x8_packed<DType::kQ5_K>))
RVV_KERNEL(rvv,       q6_k,  gemm_x8,  3xm4, (gemm_quant_x8_packed<DType::kQ6_K>))
RVV_KERNEL(rvv,       q5_0,  gemm_x8,  3xm4, (gemm_quant_x8_packed<DType::kQ5_0>))
RVV_KERNEL(rvv,       q5_1,  gemm_x8,  3xm4, (gemm_quant_x8_packed<DType::kQ5_1>))
RVV_KERNEL(rvv,       iq4_nl, gemm_x8, 3xm4, (gemm_quant_x8_packed<DType::kIQ4_NL>))
RVV_KERNEL(rvv,       iq4_xs, gemm_x8, 3xm4, (gemm_quant_x8_packed<DType::kIQ4_XS>))
RVV_KERNEL(rvv,       q2_k,  gemm_x8,  4xm4, (gemm_quant_x8_packed<DType::kQ2_K>))
RVV_KERNEL(rvv,       q3_k,  gemm_x8,  4xm4, (gemm_quant_x8_packed<DType::kQ3_K>))

// Elementwise bf16 <-> fp32 conversions of a variant, with its widen/narrow policy
// (rvv/bf16_widen.h). A variant without a line uses the next one that has one.
RVV_CONVERT(rvv_zvfbf, Bf16Zvfbfmin)
RVV_CONVERT(rvv, Bf16Soft)
