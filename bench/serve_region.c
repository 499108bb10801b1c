/* LD_PRELOAD library for bench/serve_bench.py: lets the benchmark open and close rvvcount
 * regions in a running server process (python3 -m rvv_inductor serve, or llama-server)
 * without touching the server's code.
 *
 * When the variable RVV_REGION_FIFO=DIR is set, the constructor removes it (and
 * QEMU_PLUGIN) from the environment -- so processes the server starts are neither
 * controlled nor counted -- and starts one thread that reads commands, one line each, from
 * the FIFO DIR/cmd and answers each on the FIFO DIR/ack:
 *
 *   "o ID"  open region ID (1..16): ori x0,x0,ID     -> ack "o ID"
 *   "c ID"  close region ID: xori x0,x0,ID            -> ack "c ID"
 *   "l"     write the paths of the loaded shared objects to DIR/libs, one per line
 *           (which ggml CPU variant llama-server picked at run time)  -> ack "l"
 *   "q"     end the process now (exit_group(0): QEMU writes the plugin report)
 *
 * The control thread opens and closes every region itself (the plugin wants one owner per
 * region) and sleeps in read(2) in between, so it adds only its few instructions per
 * command; the plugin charges everything every other thread executes while a region is
 * open. On hardware the markers are no-op HINTs. Build (riscv64):
 *   clang-19 --target=riscv64-linux-gnu -O2 -fPIC -shared -o libserve_region.so serve_region.c -lpthread
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <link.h>

#if defined(__riscv)
#define MARK(op, id) __asm__ __volatile__(op " x0, x0, %0" ::"i"(id) : "memory")
#else
#define MARK(op, id) ((void)(id))
#endif

#define CASE(n)                \
  case n:                      \
    if (open_) MARK("ori", n); \
    else MARK("xori", n);      \
    return 0;

static int mark(int id, int open_) {
  switch (id) {
    CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8)
    CASE(9) CASE(10) CASE(11) CASE(12) CASE(13) CASE(14) CASE(15) CASE(16)
  }
  return -1;
}

/* rvv_serve_mark(id, open): the same markers for any id 1..2047 (the plugin's range), for
 * bench/serve_steps/sitecustomize.py, which opens one region per scheduling step from the
 * server's generation thread (ctypes finds this symbol: LD_PRELOAD puts it in the global
 * scope). The immediate is part of the instruction, hence one case per id. Returns -1
 * outside the range. */
#define S1(n) case (n): if (open_) MARK("ori", (n)); else MARK("xori", (n)); return 0;
#define S2(n) S1(n) S1((n) + 1)
#define S4(n) S2(n) S2((n) + 2)
#define S8(n) S4(n) S4((n) + 4)
#define S16(n) S8(n) S8((n) + 8)
#define S32(n) S16(n) S16((n) + 16)
#define S64(n) S32(n) S32((n) + 32)
#define S128(n) S64(n) S64((n) + 64)
#define S256(n) S128(n) S128((n) + 128)
#define S512(n) S256(n) S256((n) + 256)
#define S1024(n) S512(n) S512((n) + 512)

__attribute__((visibility("default"))) int rvv_serve_mark(int id, int open_) {
  switch (id) {
    S1024(1024) S512(512) S256(256) S128(128) S64(64) S32(32) S16(16) S8(8) S4(4) S2(2) S1(1)
  }
  return -1;
}

static char dir_[512];

static int list_one(struct dl_phdr_info *info, size_t size, void *fd) {
  (void)size;
  if (info->dlpi_name && info->dlpi_name[0]) {
    if (write(*(int *)fd, info->dlpi_name, strlen(info->dlpi_name)) < 0 || write(*(int *)fd, "\n", 1) < 0) return 1;
  }
  return 0;
}

static int list_libs(void) {
  char path[600];
  snprintf(path, sizeof path, "%s/libs", dir_);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return -1;
  dl_iterate_phdr(list_one, &fd);
  close(fd);
  return 0;
}

/* Raw read(2)/write(2), no stdio: a thread blocked in fgets() holds the FILE's lock, and
 * glibc's exit() flushes (and locks) every stream, so a server's own exit would hang. */
static int read_line(int fd, char *buf, int cap) {
  int n = 0;
  while (n < cap - 1) {
    char ch;
    ssize_t r = read(fd, &ch, 1);
    if (r <= 0) return -1;
    if (ch == '\n') break;
    buf[n++] = ch;
  }
  buf[n] = 0;
  return n;
}

static void *control(void *arg) {
  (void)arg;
  char path[600], line[64], ans[96];
  snprintf(path, sizeof path, "%s/cmd", dir_);
  int cmd = open(path, O_RDONLY);  /* blocks until the benchmark opens the other end */
  snprintf(path, sizeof path, "%s/ack", dir_);
  int ack = open(path, O_WRONLY);
  if (cmd < 0 || ack < 0) {
    fprintf(stderr, "serve_region: cannot open the FIFOs in %s\n", dir_);
    return NULL;
  }
  while (read_line(cmd, line, sizeof line) >= 0) {
    int id = 0;
    if (line[0] == 'q') {
      /* The counts are complete once the regions are closed: end the process at once
       * (exit_group; QEMU writes the plugin report) instead of a shutdown that runs the
       * server's own cleanup, which under emulation may wait on threads for minutes. */
      if (write(ack, "q\n", 2) < 0) {}
      syscall(SYS_exit_group, 0);
    }
    if (line[0] == 'l' && line[1] == 0 && list_libs() == 0)
      snprintf(ans, sizeof ans, "l\n");
    else if ((line[0] == 'o' || line[0] == 'c') && sscanf(line + 1, "%d", &id) == 1 && mark(id, line[0] == 'o') == 0)
      snprintf(ans, sizeof ans, "%c %d\n", line[0], id);
    else
      snprintf(ans, sizeof ans, "? %s\n", line);
    if (write(ack, ans, strlen(ans)) < 0) break;
  }
  return NULL;
}

__attribute__((constructor)) static void serve_region_init(void) {
  const char *d = getenv("RVV_REGION_FIFO");
  if (!d || !*d) return;
  snprintf(dir_, sizeof dir_, "%s", d);
  unsetenv("RVV_REGION_FIFO");
  unsetenv("QEMU_PLUGIN");
  unsetenv("LD_PRELOAD");
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&a, 64 * 1024);
  if (pthread_create(&t, &a, control, NULL) != 0) fprintf(stderr, "serve_region: no control thread\n");
  pthread_attr_destroy(&a);
}
