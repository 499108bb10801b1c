// FP32 scratch for the converted activations: the caller's buffer when it passes one
// (Inductor and OpenMP callers can keep one per thread), a small array on the stack when
// that is enough, otherwise the heap. Never global, so kernels stay reentrant.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "rvv_inductor/config.h"

RVV_INDUCTOR_BEGIN_NAMESPACE

template <size_t kInline>
class F32Scratch {
 public:
  F32Scratch() {}
  F32Scratch(const F32Scratch&) = delete;
  F32Scratch& operator=(const F32Scratch&) = delete;
  // nullptr only when the heap allocation fails.
  float* get(float* caller, int64_t n) {
    if (caller) return caller;
    if (n <= int64_t(kInline)) return inline_;
    heap_.reset(new (std::nothrow) float[size_t(n)]);
    return heap_.get();
  }

 private:
  float inline_[kInline > 0 ? kInline : 1];
  std::unique_ptr<float[]> heap_;
};

RVV_INDUCTOR_END_NAMESPACE
