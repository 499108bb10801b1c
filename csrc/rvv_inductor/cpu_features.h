// CPU capability detection for RISC-V vector code, with a C ABI (used from Python via
// ctypes, and from C++). Detection never executes a vector instruction in-process unless
// the kernel or a sandboxed probe has confirmed that V exists, so it cannot SIGILL.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Where a feature bit came from (bitmask in rvv_cpu_features.sources).
enum {
  RVV_SRC_HWPROBE = 1,  // riscv_hwprobe(2), Linux >= 6.4
  RVV_SRC_HWCAP = 2,    // getauxval(AT_HWCAP) single-letter bits
  RVV_SRC_CPUINFO = 4,  // the "isa" line of /proc/cpuinfo
  RVV_SRC_PROBE = 8,    // executed the instruction in a forked child and survived
  RVV_SRC_OVERRIDE = 16 // narrowed by the RVV_INDUCTOR_CPU environment variable
};

typedef struct rvv_cpu_features {
  int is_riscv64;    // built for and running on riscv64
  int has_v;         // RVV 1.0 (V extension) usable from user space
  int vlenb;         // VLEN / 8 in bytes; 0 when there is no V
  int has_zvfh;      // vector FP16 arithmetic
  int has_zvfbfmin;  // vector BF16 <-> FP32 conversions
  int has_zvfbfwma;  // vector BF16 widening multiply-add
  int sources;       // RVV_SRC_* bits that contributed
  int version;       // RVV_CPU_FEATURES_VERSION in every struct this library fills
} rvv_cpu_features;

// The layout and meaning of rvv_cpu_features; a reader (Python's mirror) checks it. The
// vector extensions beyond V are the fields of cpu_extensions.inl.
#define RVV_CPU_FEATURES_VERSION 2

// What the hardware and kernel offer, ignoring any override. Cached after the first call;
// thread-safe. Returns 0.
int rvv_detect_cpu(rvv_cpu_features* out);

// What this library will use: detection narrowed by RVV_INDUCTOR_CPU, a comma-separated
// list drawn from {auto, scalar, v, zvfh, zvfbfmin, zvfbfwma}. "scalar" disables vector
// code; "v,zvfbfmin" uses V and BF16 converts only. Claiming a feature that detection did
// not find is an error: returns -1, writes a message to err (if non-null), and fills *out
// with the scalar configuration so a caller that ignores the error still stays safe.
int rvv_effective_cpu(rvv_cpu_features* out, char* err, size_t err_len);

// Same as rvv_effective_cpu but with the override string given explicitly (NULL = none).
int rvv_resolve_cpu(const char* override_spec, rvv_cpu_features* out, char* err, size_t err_len);

// "-march=..." string for code generated for these features, e.g. "rv64gcv_zvfbfmin".
// Returns the number of characters written (excluding NUL), or -1 if it does not fit.
int rvv_march_string(const rvv_cpu_features* f, char* buf, size_t buf_len);

#ifdef __cplusplus
}
#endif
