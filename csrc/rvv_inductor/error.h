// Error reporting without exceptions or hidden state: functions that can fail return a
// Status and, when the caller passes a buffer, a sentence saying what was wrong.
#pragma once
#include <cstdarg>
#include <cstddef>
#include <cstdio>

#include "rvv_inductor/config.h"
#include "rvv_inductor/types.h"

RVV_INDUCTOR_BEGIN_NAMESPACE

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
inline Status
fail(Status s, char* err, size_t err_len, const char* fmt, ...) {
  if (err && err_len) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
  }
  return s;
}

inline const char* status_name(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kNullPointer: return "null pointer";
    case Status::kBadShape: return "bad shape";
    case Status::kLayoutMismatch: return "packed layout mismatch";
    case Status::kBadDtype: return "bad dtype";
    case Status::kBadRange: return "bad block range";
    case Status::kNoMemory: return "out of memory";
    case Status::kBufferTooSmall: return "buffer too small";
  }
  return "unknown status";
}

RVV_INDUCTOR_END_NAMESPACE
