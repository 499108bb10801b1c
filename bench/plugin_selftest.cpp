// Known-answer regions for the rvvcount plugin: each region is hand-written assembly
// whose instruction classes, register-group weights and bytes follow from the ISA alone,
// so tests/bench/smoke.sh can check the plugin's decoding and accounting exactly.
// Expected values (VLEN = v bits) are documented next to each region. The markers are
// written inside each asm statement (rather than with RVV_BENCH_BEGIN/END around it) so
// that the compiler cannot schedule, say, a pointer move between them.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "rvv_inductor/markers.h"

// Region 9 calls these two assembly functions, whose instruction counts are exact, so the
// plugin's profile= output can be checked by function name (bench/profile_report.py):
// rvv_prof_hot runs 1 + 2 * 1000 + 1 = 2002 instructions, rvv_prof_cold 10 + 1 = 11.
extern "C" void rvv_prof_hot();
extern "C" void rvv_prof_cold();
__asm__(
    ".text\n .globl rvv_prof_hot\n .type rvv_prof_hot, @function\n rvv_prof_hot:\n"
    " li t2, 1000\n 1: addi t2, t2, -1\n bnez t2, 1b\n ret\n .size rvv_prof_hot, .-rvv_prof_hot\n"
    " .globl rvv_prof_cold\n .type rvv_prof_cold, @function\n rvv_prof_cold:\n"
    " .rept 10\n addi t2, t2, 1\n .endr\n ret\n .size rvv_prof_cold, .-rvv_prof_cold\n");

alignas(64) static uint16_t src[4096];
alignas(64) static uint16_t dst[4096];
alignas(64) static uint32_t words[1024];

int main() {
  for (int i = 0; i < 4096; i++) src[i] = uint16_t(i);
  for (int i = 0; i < 1024; i++) words[i] = uint32_t(i);
  unsigned long vlenb;
  __asm__ volatile("csrr %0, vlenb" : "=r"(vlenb));
  rvv_bench_tag(RVV_BENCH_TAG_CLEAR, nullptr, 0);
  rvv_bench_tag(RVV_BENCH_TAG_WEIGHTS, src, sizeof src);
  rvv_bench_tag(RVV_BENCH_TAG_OUTPUT, dst, sizeof dst);

  // Region 1: 100 scalar instructions, nothing else.
  __asm__ volatile("ori x0, x0, 1\n .rept 100\n addi t0, t0, 1\n .endr\n xori x0, x0, 1" ::: "t0", "memory");

  // Region 2: vsetvli e16,m1 + vle16 + vse16 at VLMAX: 3 vector insns (1 vsetvl,
  // 1 vload, 1 vstore), vregops 2, reads v/8 bytes of src (weights tag) and writes v/8.
  __asm__ volatile(
      "ori x0, x0, 2\n"
      "vsetvli t0, zero, e16, m1, ta, ma\n"
      "vle16.v v8, (%0)\n"
      "vse16.v v8, (%1)\n"
      "xori x0, x0, 2\n" ::"r"(src),
      "r"(dst)
      : "t0", "v8", "memory");

  // Region 3: the BF16 widening path at m4->m8: vle16 (m4: 4) + vzext.vf2 (m8: 8, widen)
  // + vsll (8, arith) + vfmacc.vf (8, fma) = vregops 28, 2 vsetvl, 4*v/8 bytes read.
  __asm__ volatile(
      "ori x0, x0, 3\n"
      "vsetvli t0, zero, e16, m4, ta, ma\n"
      "vle16.v v8, (%0)\n"
      "vsetvli zero, zero, e32, m8, ta, ma\n"
      "vzext.vf2 v16, v8\n"
      "vsll.vi v16, v16, 16\n"
      "fmv.w.x fa0, zero\n"
      "vfmacc.vf v0, fa0, v16\n"
      "xori x0, x0, 3\n" ::"r"(src)
      : "t0", "fa0", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v16",
        "v17", "v18", "v19", "v20", "v21", "v22", "v23", "memory");

  // Region 4: 1000-iteration scalar loop of lw: 4001 instructions (li + 4 per iteration), 1000 scalar_mem,
  // 4000 bytes read.
  {
    const uint32_t* p = words;
    __asm__ volatile(
        "ori x0, x0, 4\n"
        "li t2, 1000\n"
        "1:\n"
        "lw t1, 0(%0)\n"
        "addi %0, %0, 4\n"
        "addi t2, t2, -1\n"
        "bnez t2, 1b\n"
        "xori x0, x0, 4\n"
        : "+r"(p)
        :
        : "t1", "t2", "memory");
  }

  // Region 5: fractional LMUL: vsetivli 4,e16,mf2 + vle16: vregops 1 (EMUL 1/2 counts as
  // one register), 8 bytes read.
  __asm__ volatile(
      "ori x0, x0, 5\n"
      "vsetivli zero, 4, e16, mf2, ta, ma\n"
      "vle16.v v1, (%0)\n"
      "xori x0, x0, 5\n" ::"r"(src)
      : "v1", "memory");

  // Region 6: register-form vsetvl to e32,m2 then vadd.vv: vregops 2 when vtype is read
  // from the CSR (QEMU >= 9); with decode-only tracking vtype is unknown (vtype_unknown 1,
  // weighed as 1).
  __asm__ volatile(
      "ori x0, x0, 6\n"
      "li t0, 0x11\n"
      "vsetvl t1, zero, t0\n"
      "vadd.vv v2, v4, v6\n"
      "xori x0, x0, 6\n" ::
          : "t0", "t1", "v2", "v3", "memory");

  // Region 7: markers in the middle of straight-line code (one translation block):
  // exactly the 5 instructions between them.
  __asm__ volatile(
      "addi t0, t0, 1\n addi t0, t0, 1\n addi t0, t0, 1\n"
      "ori x0, x0, 7\n"
      ".rept 5\n addi t0, t0, 1\n .endr\n"
      "xori x0, x0, 7\n"
      "addi t0, t0, 1\n addi t0, t0, 1\n" ::
          : "t0", "memory");

  // Region 8: whole-register load vl2re32 (2 registers whatever vtype says): vregops 2,
  // 2*v/8 bytes read; called twice, so calls 2 and all counts doubled.
  for (int rep = 0; rep < 2; rep++) {
    __asm__ volatile(
        "ori x0, x0, 8\n"
        "vl2re32.v v2, (%0)\n"
        "xori x0, x0, 8\n" ::"r"(words)
        : "v2", "v3", "memory");
  }

  // Region 9: two calls; the profile charges 2002 to rvv_prof_hot and 11 to rvv_prof_cold.
  __asm__ volatile(
      "ori x0, x0, 9\n"
      "jal ra, rvv_prof_hot\n"
      "jal ra, rvv_prof_cold\n"
      "xori x0, x0, 9\n" ::
          : "t2", "ra", "memory");

  std::printf("{\"vlen\": %lu}\n", vlenb * 8);
  return 0;
}
