// TorchInductor CppGemmTemplate micro-kernel for RVV:
//   C[M, N] (+)= A[M, K] * B[K, N]
// A bf16 [M, K] with row stride lda; B one packed weight block, bf16 [K, N] with row
// stride ldb (usually ldb == nb and N <= nb); C fp32 with row stride ldc; accumulate:
// true adds to C, false overwrites it. Header-only: generated code compiled with
// -march=rv64gcv (optionally _zvfbfmin) includes this and calls it directly.
//
// M >= 2: the same 6 x m4 register tile as the packed GEMM (gemm_tile_bf16.h); M == 1: the
// 1 x m8 GEMV loop (micro_gemv_bf16f32_1xm8 below). A is converted to
// fp32 in chunks of kKC columns into a 6 * kKC float stack buffer (6 KiB), each chunk
// reused for every column chunk of N; partial sums go through C between chunks, which
// costs 2 * rows vector memory ops per kKC * rows * VLMAX multiply-adds.
// With four or more tiles (M > 18) the rows go in slabs of up to kMicroGemmSlab: per K
// chunk the slab's A panels are converted once, and each column chunk of B is widened once
// into an fp32 panel that all the slab's tiles stream (gemm_tile_bf16.h, F32Rows), instead
// of once per tile. The sums are the same, in the same order: the result does not change.
#pragma once
#include "rvv_inductor/config.h"

#if RVV_INDUCTOR_HAS_RVV
#include <riscv_vector.h>

#include <cstddef>
#include <cstdint>

#include "rvv_inductor/bf16.h"
#include "rvv_inductor/rvv/bf16_widen.h"
#include "rvv_inductor/rvv/gemm_tile_bf16.h"

RVV_INDUCTOR_BEGIN_NAMESPACE
namespace rvv {

#if RVV_INDUCTOR_HAS_ZVFBFMIN
using MicroGemmBf16Ops = Bf16Zvfbfmin;
#else
using MicroGemmBf16Ops = Bf16Soft;
#endif

constexpr int64_t kMicroGemmKC = 256;
constexpr int64_t kMicroGemmSlab = 8 * kGemmMR;

// M > 2 * kGemmMR: slabs of rows sharing widened B panels (see the file comment). Stack:
// the slab's A panels (48 x up to 256 floats) and one B panel (16 KB).
template <class Ops>
inline void micro_gemm_bf16f32_slabs(const uint16_t* A, const uint16_t* B, float* C, int64_t M, int64_t N, int64_t K,
                                     int64_t lda, int64_t ldb, int64_t ldc, bool accumulate) {
  const size_t vlmax = __riscv_vsetvlmax_e32m4();
  int64_t kcp = gemm_panel_rows(vlmax);
  if (kcp > kMicroGemmKC) kcp = kMicroGemmKC;
  float ap[kMicroGemmSlab * kMicroGemmKC];
  float bp[kGemmPanelFloats];
  for (int64_t s0 = 0; s0 < M; s0 += kMicroGemmSlab) {
    const int64_t srows = M - s0 < kMicroGemmSlab ? M - s0 : kMicroGemmSlab;
    for (int64_t k0 = 0; k0 < K; k0 += kcp) {
      const int64_t kc = K - k0 < kcp ? K - k0 : kcp;
      for (int64_t t = 0; t < srows; t += kGemmMR) {
        const int rows = int(srows - t < kGemmMR ? srows - t : kGemmMR);
        pack_a_panel_f32<Ops>(A + (s0 + t) * lda, lda, rows, k0, kc, ap + t * kc);
      }
      const bool load_c = accumulate || k0 > 0;
      for (int64_t j = 0; j < N;) {
        const size_t vl = __riscv_vsetvl_e32m4(size_t(N - j));
        widen_b_panel<Ops>(B + k0 * ldb + j, ldb, kc, vl, bp);
        for (int64_t t = 0; t < srows; t += kGemmMR) {
          const int rows = int(srows - t < kGemmMR ? srows - t : kGemmMR);
          float* c = C + (s0 + t) * ldc + j;
          auto init = [&](int r) {
            return load_c ? __riscv_vle32_v_f32m4(c + r * ldc, vl) : __riscv_vfmv_v_f_f32m4(0.0f, vl);
          };
          auto store = [&](int r, vfloat32m4_t acc) { __riscv_vse32_v_f32m4(c + r * ldc, acc, vl); };
          gemm_bf16_tile_m4_rows<F32Rows>(rows, ap + t * kc, static_cast<const float*>(bp), int64_t(vl), kc, vl, init,
                                          store);
        }
        j += int64_t(vl);
      }
    }
  }
}

template <class Ops>
inline void micro_gemm_bf16f32_6xm4(const uint16_t* A, const uint16_t* B, float* C, int64_t M, int64_t N, int64_t K,
                                    int64_t lda, int64_t ldb, int64_t ldc, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < N;) {
          const size_t vl = __riscv_vsetvl_e32m8(size_t(N - j));
          __riscv_vse32_v_f32m8(C + m * ldc + j, __riscv_vfmv_v_f_f32m8(0.0f, vl), vl);
          j += int64_t(vl);
        }
    return;
  }
  if (M > (kGemmPanelMinTiles - 1) * kGemmMR && __riscv_vsetvlmax_e32m4() <= size_t(kGemmPanelFloats)) {
    micro_gemm_bf16f32_slabs<Ops>(A, B, C, M, N, K, lda, ldb, ldc, accumulate);
    return;
  }
  float ap[kGemmMR * kMicroGemmKC];
  for (int64_t m0 = 0; m0 < M; m0 += kGemmMR) {
    const int rows = int(M - m0 < kGemmMR ? M - m0 : kGemmMR);
    for (int64_t k0 = 0; k0 < K; k0 += kMicroGemmKC) {
      const int64_t kc = K - k0 < kMicroGemmKC ? K - k0 : kMicroGemmKC;
      pack_a_panel_f32<Ops>(A + m0 * lda, lda, rows, k0, kc, ap);
      const bool load_c = accumulate || k0 > 0;
      for (int64_t j = 0; j < N;) {
        const size_t vl = __riscv_vsetvl_e32m4(size_t(N - j));
        float* c = C + m0 * ldc + j;
        auto init = [&](int r) {
          return load_c ? __riscv_vle32_v_f32m4(c + r * ldc, vl) : __riscv_vfmv_v_f_f32m4(0.0f, vl);
        };
        auto store = [&](int r, vfloat32m4_t acc) { __riscv_vse32_v_f32m4(c + r * ldc, acc, vl); };
        gemm_bf16_tile_m4_rows<Ops>(rows, ap, B + k0 * ldb + j, ldb, kc, vl, init, store);
        j += int64_t(vl);
      }
    }
  }
}

// M == 1 (decode): a single row cannot amortise the widen over several accumulators, so
// the 6 x m4 tile would spend 5 instructions per 32 multiply-adds at VLEN 256. One e32/m8
// accumulator per column chunk halves that (the gemv_bf16_packed_1xm8 loop, K unrolled
// by 4): ~6 instructions per 64 multiply-adds, the weight streamed once.
template <class Ops>
inline void micro_gemv_bf16f32_1xm8(const uint16_t* A, const uint16_t* B, float* C, int64_t N, int64_t K,
                                    int64_t ldb, bool accumulate) {
  float af[kMicroGemmKC];
  for (int64_t k0 = 0; k0 < K; k0 += kMicroGemmKC) {
    const int64_t kc = K - k0 < kMicroGemmKC ? K - k0 : kMicroGemmKC;
    widen_bf16_row<Ops>(A + k0, af, kc);
    const bool load_c = accumulate || k0 > 0;
    for (int64_t j = 0; j < N;) {
      const size_t vl = __riscv_vsetvl_e32m8(size_t(N - j));
      vfloat32m8_t acc = load_c ? __riscv_vle32_v_f32m8(C + j, vl) : __riscv_vfmv_v_f_f32m8(0.0f, vl);
      const uint16_t* w = B + k0 * ldb + j;
      int64_t k = 0;
      for (; k + 4 <= kc; k += 4, w += 4 * ldb) {
        acc = __riscv_vfmacc_vf_f32m8(acc, af[k], Ops::load_m8(w, vl), vl);
        acc = __riscv_vfmacc_vf_f32m8(acc, af[k + 1], Ops::load_m8(w + ldb, vl), vl);
        acc = __riscv_vfmacc_vf_f32m8(acc, af[k + 2], Ops::load_m8(w + 2 * ldb, vl), vl);
        acc = __riscv_vfmacc_vf_f32m8(acc, af[k + 3], Ops::load_m8(w + 3 * ldb, vl), vl);
      }
      for (; k < kc; ++k, w += ldb) acc = __riscv_vfmacc_vf_f32m8(acc, af[k], Ops::load_m8(w, vl), vl);
      __riscv_vse32_v_f32m8(C + j, acc, vl);
      j += int64_t(vl);
    }
  }
}

}  // namespace rvv

// The entry generated code calls. Uses the hardware conversion when the including TU is
// compiled with Zvfbfmin, the integer widen otherwise.
inline void micro_gemm_bf16f32_rvv(const uint16_t* A, const uint16_t* B, float* C, int64_t M, int64_t N, int64_t K,
                                   int64_t lda, int64_t ldb, int64_t ldc, bool accumulate) {
  if (M == 1 && K > 0 && N > 0) {
    rvv::micro_gemv_bf16f32_1xm8<rvv::MicroGemmBf16Ops>(A, B, C, N, K, ldb, accumulate);
    return;
  }
  rvv::micro_gemm_bf16f32_6xm4<rvv::MicroGemmBf16Ops>(A, B, C, M, N, K, lda, ldb, ldc, accumulate);
}

// Accepts at::BFloat16 / c10::BFloat16 pointers as Inductor's generated code has them.
template <class TA, class TB>
inline void micro_gemm_bf16f32_rvv(const TA* A, const TB* B, float* C, int64_t M, int64_t N, int64_t K, int64_t lda,
                                   int64_t ldb, int64_t ldc, bool accumulate) {
  micro_gemm_bf16f32_rvv(as_bf16_bits(A), as_bf16_bits(B), C, M, N, K, lda, ldb, ldc, accumulate);
}

RVV_INDUCTOR_END_NAMESPACE
#endif  // RVV_INDUCTOR_HAS_RVV
