// Compile-time ISA selection for the header-only kernels.
//
// The same inline function compiled with different -march flags in different translation
// units would be one ODR entity, and the linker would keep an arbitrary copy: a copy with
// vector instructions could end up called on a CPU without V. Every header therefore puts
// its code in an inline namespace named after the ISA the including TU is compiled for
// (as ATen does with CPU_CAPABILITY): rvv_inductor::isa_rvv::foo and
// rvv_inductor::isa_rv64gc::foo are different functions, and code still calls
// rvv_inductor::foo. Plain data types (abi_types.h, types.h) have no code and stay outside.
//
// The V, Zvfh and BF16 extensions split the namespace, one per ISA variant of the kernel
// table (kernel_isas.inl). A TU that adds other flags lands in the namespace of the
// strongest of these it has.
#pragma once

#if defined(__riscv_v) && __riscv_v >= 1000000 && defined(__riscv_vector)
#define RVV_INDUCTOR_HAS_RVV 1
// Zvfh implies Zfhmin (scalar f16 loads and moves), which the f16 kernels use for their
// vfwmacc.vf scalar operand.
#if defined(__riscv_zvfh)
#define RVV_INDUCTOR_HAS_ZVFH 1
#else
#define RVV_INDUCTOR_HAS_ZVFH 0
#endif
#if defined(__riscv_zvfbfmin) && defined(__riscv_zvfbfwma)
#define RVV_INDUCTOR_HAS_ZVFBFMIN 1
#define RVV_INDUCTOR_HAS_ZVFBFWMA 1
#define RVV_INDUCTOR_ISA_NS isa_rvv_zvfbfwma
#elif defined(__riscv_zvfbfmin)
#define RVV_INDUCTOR_HAS_ZVFBFMIN 1
#define RVV_INDUCTOR_HAS_ZVFBFWMA 0
#define RVV_INDUCTOR_ISA_NS isa_rvv_zvfbfmin
#elif RVV_INDUCTOR_HAS_ZVFH
#define RVV_INDUCTOR_HAS_ZVFBFMIN 0
#define RVV_INDUCTOR_HAS_ZVFBFWMA 0
#define RVV_INDUCTOR_ISA_NS isa_rvv_zvfh
#else
#define RVV_INDUCTOR_HAS_ZVFBFMIN 0
#define RVV_INDUCTOR_HAS_ZVFBFWMA 0
#define RVV_INDUCTOR_ISA_NS isa_rvv
#endif
#else
#define RVV_INDUCTOR_HAS_RVV 0
#define RVV_INDUCTOR_HAS_ZVFH 0
#define RVV_INDUCTOR_HAS_ZVFBFMIN 0
#define RVV_INDUCTOR_HAS_ZVFBFWMA 0
#if defined(__riscv)
#define RVV_INDUCTOR_ISA_NS isa_rv64gc
#elif defined(__x86_64__) || defined(_M_X64)
#define RVV_INDUCTOR_ISA_NS isa_x86_64
#else
#define RVV_INDUCTOR_ISA_NS isa_generic
#endif
#endif

#define RVV_INDUCTOR_BEGIN_NAMESPACE \
  namespace rvv_inductor {           \
  inline namespace RVV_INDUCTOR_ISA_NS {
#define RVV_INDUCTOR_END_NAMESPACE \
  }                                \
  }
