/* Region markers for the rvvcount QEMU plugin (bench/plugin/rvvcount.cc).
 *
 *   RVV_BENCH_BEGIN(id); work(); RVV_BENCH_END(id);
 *
 * charges everything every thread of the process executes while the region is open
 * (opened and closed by the calling thread) to region `id` (an integer constant,
 * 1..2047), reported per thread and in total (bench/README.md, "Threads"). The markers are `ori x0,x0,id` / `xori x0,x0,id`:
 * architectural no-op HINTs, so the same binary runs unchanged on hardware and costs
 * one issue slot per marker there. The "memory" clobber keeps the compiler from moving
 * loads and stores of the measured work across a marker.
 *
 * rvv_bench_tag(kind, ptr, bytes) tells the plugin where the weights, input and output
 * live, so it can split bytes read and modelled DRAM traffic by buffer. It is a system
 * call Linux does not implement (returns -ENOSYS, no effect) and must be made outside
 * regions. Header-only, C and C++; on other architectures everything is a no-op. */
#ifndef RVV_BENCH_MARKERS_H
#define RVV_BENCH_MARKERS_H

#include <stddef.h>

#define RVV_BENCH_TAG_CLEAR 0
#define RVV_BENCH_TAG_WEIGHTS 1
#define RVV_BENCH_TAG_INPUT 2
#define RVV_BENCH_TAG_OUTPUT 3
#define RVV_BENCH_TAG_SCRATCH 4
#define RVV_BENCH_SYSCALL 0x5256

#if defined(__riscv)
#define RVV_BENCH_BEGIN(id) __asm__ __volatile__("ori x0, x0, %0" ::"i"(id) : "memory")
#define RVV_BENCH_END(id) __asm__ __volatile__("xori x0, x0, %0" ::"i"(id) : "memory")

static inline void rvv_bench_tag(long kind, const void *ptr, size_t bytes) {
  register long a0 __asm__("a0") = kind;
  register long a1 __asm__("a1") = (long)ptr;
  register long a2 __asm__("a2") = (long)bytes;
  register long a7 __asm__("a7") = RVV_BENCH_SYSCALL;
  __asm__ __volatile__("ecall" : "+r"(a0) : "r"(a1), "r"(a2), "r"(a7) : "memory");
}
#else
#define RVV_BENCH_BEGIN(id) ((void)(id))
#define RVV_BENCH_END(id) ((void)(id))
static inline void rvv_bench_tag(long kind, const void *ptr, size_t bytes) {
  (void)kind;
  (void)ptr;
  (void)bytes;
}
#endif

#endif /* RVV_BENCH_MARKERS_H */
