// Known split for the rvvcount plugin's per-thread counting (tests/bench/smoke.sh).
//
//   thread_selftest pthread|omp THREADS [ITERS]
//
// Region 1 is opened and closed by the main thread. While it is open, worker t
// (t = 0..THREADS-1) runs known_loop((t + 1) * ITERS) once: ITERS*(t+1) vadd.vv at
// e64/m4 (the only LMUL-4 instructions of the process: the cross libc, libgomp and the
// code around the loop use none), 3 instructions per iteration, 3 more around the loop.
// So the plugin must report, per thread, vtype_lmul_hist.m4 = (t + 1) * ITERS exactly
// and insns = 3 * (t + 1) * ITERS + a small constant (the synchronisation around it).
//
// pthread: THREADS pthreads created before the region wait at a barrier; the main thread
//   opens the region, joins the barrier, waits at a second barrier for the loops, and
//   closes the region (it runs no loop itself: THREADS + 1 threads take part).
// omp: the same through libgomp's thread pool (GOMP_parallel, what `#pragma omp parallel`
//   compiles to with GCC; the cross clang has no OpenMP runtime of its own). The pool is
//   started by a first, uncounted parallel region; the main thread is OpenMP thread 0.
//   Run with OMP_WAIT_POLICY=passive: with the default policy, threads that finish early
//   spin at the closing barrier and the spinning is charged like work.
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "rvv_inductor/markers.h"

extern "C" {
// libgomp's ABI (GOMP_4.0), as GCC emits it for `#pragma omp parallel`.
void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);
int omp_get_thread_num(void);
int omp_get_num_threads(void);
}

namespace {

long g_iters = 20000;
pthread_barrier_t g_start, g_done;

__attribute__((noinline)) void known_loop(long n) {
  __asm__ volatile(
      "vsetvli zero, zero, e64, m4, ta, ma\n"
      "mv t0, %0\n"
      "1:\n"
      "vadd.vv v8, v8, v12\n"
      "addi t0, t0, -1\n"
      "bnez t0, 1b\n" ::"r"(n)
      : "t0", "v8", "v9", "v10", "v11", "memory");
}

void* pthread_worker(void* arg) {
  const long t = long(arg);
  pthread_barrier_wait(&g_start);
  known_loop((t + 1) * g_iters);
  pthread_barrier_wait(&g_done);
  return nullptr;
}

int g_team = 0;
void omp_body(void*) {
  if (omp_get_thread_num() == 0) g_team = omp_get_num_threads();
  known_loop((omp_get_thread_num() + 1) * g_iters);
}
void omp_warm(void*) {}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || (strcmp(argv[1], "pthread") && strcmp(argv[1], "omp"))) {
    fprintf(stderr, "usage: thread_selftest pthread|omp THREADS [ITERS]\n");
    return 2;
  }
  const bool omp = !strcmp(argv[1], "omp");
  const int n = atoi(argv[2]);
  if (argc > 3) g_iters = atol(argv[3]);
  if (n < 1 || n > 64 || g_iters < 1) {
    fprintf(stderr, "thread_selftest: need 1 <= THREADS <= 64 and ITERS >= 1\n");
    return 2;
  }
  if (omp) {
    GOMP_parallel(omp_warm, nullptr, unsigned(n), 0);  // start the pool outside the region
    RVV_BENCH_BEGIN(1);
    GOMP_parallel(omp_body, nullptr, unsigned(n), 0);
    RVV_BENCH_END(1);
    if (g_team != n) {
      fprintf(stderr, "thread_selftest: libgomp gave %d threads, not %d\n", g_team, n);
      return 1;
    }
  } else {
    pthread_barrier_init(&g_start, nullptr, unsigned(n + 1));
    pthread_barrier_init(&g_done, nullptr, unsigned(n + 1));
    std::vector<pthread_t> th(static_cast<size_t>(n));
    for (int t = 0; t < n; t++)
      if (pthread_create(&th[size_t(t)], nullptr, pthread_worker, reinterpret_cast<void*>(long(t)))) return 1;
    RVV_BENCH_BEGIN(1);
    pthread_barrier_wait(&g_start);
    pthread_barrier_wait(&g_done);
    RVV_BENCH_END(1);
    for (auto& h : th) pthread_join(h, nullptr);
  }
  printf("{\"mode\": \"%s\", \"threads\": %d, \"iters\": %ld}\n", argv[1], n, g_iters);
  return 0;
}
