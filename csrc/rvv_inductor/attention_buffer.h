// Scratch memory of the attention kernels: malloc/free, not std::vector, whose member
// templates would be weak symbols outside the ISA namespace in a vector TU (config.h).
#pragma once
#include <cstddef>
#include <cstdlib>

#include "rvv_inductor/config.h"

RVV_INDUCTOR_BEGIN_NAMESPACE

struct AttnBuffer {
  void* p;
  explicit AttnBuffer(size_t bytes) : p(std::malloc(bytes ? bytes : 1)) {}
  ~AttnBuffer() { std::free(p); }
  AttnBuffer(const AttnBuffer&) = delete;
  AttnBuffer& operator=(const AttnBuffer&) = delete;
};

RVV_INDUCTOR_END_NAMESPACE
