// Capability detection: hwprobe -> AT_HWCAP -> /proc/cpuinfo -> sandboxed probe.
// This file is compiled for the base ISA (rv64gc), never with V enabled.
#include "rvv_inductor/cpu_features.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#if defined(__riscv) && __riscv_xlen == 64 && defined(__linux__)
#define RVV_DETECT_RISCV 1
#include <signal.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#else
#define RVV_DETECT_RISCV 0
#endif

namespace {

#if RVV_DETECT_RISCV
// Values from the Linux UAPI <asm/hwprobe.h>; spelled out so that old headers still build.
constexpr long kSysRiscvHwprobe = 258;
constexpr long long kKeyImaExt0 = 4;
constexpr unsigned long long kImaV = 1ULL << 2;
constexpr unsigned long long kExtZvfh = 1ULL << 30;
constexpr unsigned long long kExtZvfbfmin = 1ULL << 53;
constexpr unsigned long long kExtZvfbfwma = 1ULL << 54;
constexpr unsigned long kHwcapV = 1UL << ('V' - 'A');

struct HwprobePair {
  long long key;
  unsigned long long value;
};

// Returns true when the kernel answered; *ext gets the IMA_EXT_0 bits.
bool hwprobe_ext0(unsigned long long* ext) {
  HwprobePair pair{kKeyImaExt0, 0};
  long rc = syscall(kSysRiscvHwprobe, &pair, 1, 0, nullptr, 0);
  if (rc != 0 || pair.key != kKeyImaExt0) return false;
  *ext = pair.value;
  return true;
}

// Parses "isa : rv64imafdcv_zicsr_zvfbfmin..." and reports whether each wanted extension
// appears. Multi-letter extensions are matched as whole '_'-separated tokens.
bool cpuinfo_isa(std::string* isa) {
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return false;
  char line[4096];
  bool found = false;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "isa", 3) != 0) continue;
    const char* colon = std::strchr(line, ':');
    if (!colon) continue;
    std::string s(colon + 1);
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.erase(0, 1);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    *isa = s;
    found = true;
    break;  // the first hart is representative; heterogeneous harts are not supported
  }
  std::fclose(f);
  return found;
}

bool isa_has_token(const std::string& isa, const char* ext) {
  size_t pos = 0;
  const size_t n = std::strlen(ext);
  while ((pos = isa.find(ext, pos)) != std::string::npos) {
    const bool left = pos > 0 && isa[pos - 1] == '_';
    const bool right = pos + n == isa.size() || isa[pos + n] == '_';
    if (left && right) return true;
    pos += n;
  }
  return false;
}

bool isa_has_v(const std::string& isa) {
  // Single-letter extensions come first, after "rv64", up to the first '_'.
  if (isa.compare(0, 4, "rv64") != 0) return false;
  const size_t end = isa.find('_');
  const std::string base = isa.substr(4, end == std::string::npos ? std::string::npos : end - 4);
  return base.find('v') != std::string::npos;
}

enum class Probe { kV, kZvfbfmin, kZvfbfwma, kZvfh };

// Executes one instruction of the extension in a forked child: if the CPU lacks it, only
// the child dies of SIGILL. The child also reports vlenb through a pipe. The instructions
// are assembled with ".option arch" so this file itself stays base-ISA code.
bool probe_in_child(Probe what, int* vlenb_out) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return false;
  }
  if (pid == 0) {
    close(fds[0]);
    signal(SIGILL, SIG_DFL);
    unsigned long vlenb = 0;
    switch (what) {
      case Probe::kV:
        __asm__ volatile(".option push\n.option arch, +v\ncsrr %0, vlenb\nvsetvli zero, zero, e32, m1, ta, ma\n.option pop"
                         : "=r"(vlenb));
        break;
      case Probe::kZvfbfmin:
        __asm__ volatile(".option push\n.option arch, +v, +zvfbfmin\nvsetivli zero, 4, e16, mf2, ta, ma\nvfwcvtbf16.f.f.v v2, v1\n.option pop" ::: "v1", "v2");
        break;
      case Probe::kZvfbfwma:
        __asm__ volatile(".option push\n.option arch, +v, +zvfbfwma\nvsetivli zero, 4, e16, mf2, ta, ma\nvfwmaccbf16.vv v2, v1, v3\n.option pop" ::: "v1", "v2", "v3");
        break;
      case Probe::kZvfh:
        // What the fp16 kernels execute: a scalar f16 move (Zfhmin, which Zvfh implies; QEMU
        // 7.2 runs vector f16 code without it unless Zfh=true), int8 -> f16 widening
        // conversion, and the f16 widening multiply-add with a scalar operand.
        __asm__ volatile(
            ".option push\n.option arch, +v, +zvfh, +zfhmin\nfmv.h.x ft0, zero\n"
            "vsetivli zero, 4, e8, mf2, ta, ma\nvfwcvt.f.xu.v v2, v1\n"
            "vsetivli zero, 4, e16, m1, ta, ma\nvfwmacc.vf v4, ft0, v2\n.option pop" ::: "ft0", "v1", "v2", "v4");
        break;
    }
    ssize_t w = write(fds[1], &vlenb, sizeof vlenb);
    _exit(w == (ssize_t)sizeof vlenb ? 0 : 1);
  }
  close(fds[1]);
  unsigned long vlenb = 0;
  ssize_t r = read(fds[0], &vlenb, sizeof vlenb);
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && r == (ssize_t)sizeof vlenb;
  if (ok && vlenb_out) *vlenb_out = static_cast<int>(vlenb);
  return ok;
}
#endif  // RVV_DETECT_RISCV

rvv_cpu_features detect_uncached() {
  rvv_cpu_features f{};
  f.version = RVV_CPU_FEATURES_VERSION;
#if RVV_DETECT_RISCV
  f.is_riscv64 = 1;
  unsigned long long ext = 0;
  bool decided = false;  // a positive or negative answer from the kernel
  if (hwprobe_ext0(&ext)) {
    f.sources |= RVV_SRC_HWPROBE;
    f.has_v = (ext & kImaV) != 0;
    f.has_zvfh = (ext & kExtZvfh) != 0;
    f.has_zvfbfmin = (ext & kExtZvfbfmin) != 0;
    f.has_zvfbfwma = (ext & kExtZvfbfwma) != 0;
    decided = true;
  } else {
    if (getauxval(AT_HWCAP) & kHwcapV) {
      f.has_v = 1;
      f.sources |= RVV_SRC_HWCAP;
    }
    std::string isa;
    if (cpuinfo_isa(&isa)) {
      if (isa_has_v(isa)) {
        f.has_v = 1;
        f.sources |= RVV_SRC_CPUINFO;
      }
      if (f.has_v) {
        f.has_zvfh = isa_has_token(isa, "zvfh");
        f.has_zvfbfmin = isa_has_token(isa, "zvfbfmin");
        f.has_zvfbfwma = isa_has_token(isa, "zvfbfwma");
        if (f.has_zvfh || f.has_zvfbfmin || f.has_zvfbfwma) f.sources |= RVV_SRC_CPUINFO;
      }
    }
  }
  // Old kernels and user-mode emulators may under-report (QEMU 7.2 has no hwprobe and
  // does not advertise V in AT_HWCAP). When the kernel did not answer, ask the CPU itself.
  if (!decided) {
    int vlenb = 0;
    if (!f.has_v && probe_in_child(Probe::kV, &vlenb)) {
      f.has_v = 1;
      f.sources |= RVV_SRC_PROBE;
    }
    if (f.has_v) {
      if (!f.has_zvfbfmin && probe_in_child(Probe::kZvfbfmin, nullptr)) f.has_zvfbfmin = 1, f.sources |= RVV_SRC_PROBE;
      if (!f.has_zvfbfwma && probe_in_child(Probe::kZvfbfwma, nullptr)) f.has_zvfbfwma = 1, f.sources |= RVV_SRC_PROBE;
      if (!f.has_zvfh && probe_in_child(Probe::kZvfh, nullptr)) f.has_zvfh = 1, f.sources |= RVV_SRC_PROBE;
    }
  } else if (f.has_v && !(f.has_zvfbfmin && f.has_zvfbfwma)) {
    // Kernels older than 6.15 know V but not the BF16 bits; a probe settles those.
    if (!f.has_zvfbfmin && probe_in_child(Probe::kZvfbfmin, nullptr)) f.has_zvfbfmin = 1, f.sources |= RVV_SRC_PROBE;
    if (!f.has_zvfbfwma && probe_in_child(Probe::kZvfbfwma, nullptr)) f.has_zvfbfwma = 1, f.sources |= RVV_SRC_PROBE;
  }
  if (f.has_v) {
    // V is confirmed, so reading vlenb here is safe.
    unsigned long vlenb = 0;
    __asm__ volatile(".option push\n.option arch, +v\ncsrr %0, vlenb\n.option pop" : "=r"(vlenb));
    f.vlenb = static_cast<int>(vlenb);
  } else {
    f.has_zvfh = f.has_zvfbfmin = f.has_zvfbfwma = 0;
  }
#endif
  return f;
}

void set_err(char* err, size_t len, const std::string& msg) {
  if (err && len) std::snprintf(err, len, "%s", msg.c_str());
}

rvv_cpu_features scalar_of(const rvv_cpu_features& d) {
  rvv_cpu_features s{};
  s.version = RVV_CPU_FEATURES_VERSION;
  s.is_riscv64 = d.is_riscv64;
  s.sources = d.sources | RVV_SRC_OVERRIDE;
  return s;
}

}  // namespace

extern "C" int rvv_detect_cpu(rvv_cpu_features* out) {
  static std::once_flag once;
  static rvv_cpu_features cached;
  std::call_once(once, [] { cached = detect_uncached(); });
  *out = cached;
  return 0;
}

extern "C" int rvv_resolve_cpu(const char* spec, rvv_cpu_features* out, char* err, size_t err_len) {
  rvv_cpu_features d;
  rvv_detect_cpu(&d);
  set_err(err, err_len, "");
  if (!spec || !*spec || std::strcmp(spec, "auto") == 0) {
    *out = d;
    return 0;
  }
  rvv_cpu_features want = scalar_of(d);
  std::string s(spec), missing, unknown;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string tok = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? s.size() + 1 : comma + 1;
    while (!tok.empty() && tok.front() == ' ') tok.erase(0, 1);
    while (!tok.empty() && tok.back() == ' ') tok.pop_back();
    for (auto& c : tok) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (tok.empty() || tok == "scalar" || tok == "none") continue;
    struct {
      const char* name;
      int detected;
      int* field;
    } table[] = {{"v", d.has_v, &want.has_v},
#define RVV_CPU_EXT(field, name) {name, d.field, &want.field},
#include "rvv_inductor/cpu_extensions.inl"
#undef RVV_CPU_EXT
    };
    bool known = false;
    for (auto& e : table) {
      if (tok != e.name) continue;
      known = true;
      if (e.detected)
        *e.field = 1;
      else
        missing += (missing.empty() ? "" : ", ") + tok;
    }
    if (!known) unknown += (unknown.empty() ? "" : ", ") + tok;
  }
  if (!unknown.empty()) {
    *out = scalar_of(d);
    std::string known = "auto, scalar, v";
#define RVV_CPU_EXT(field, name) known += ", " name;
#include "rvv_inductor/cpu_extensions.inl"
#undef RVV_CPU_EXT
    set_err(err, err_len, "RVV_INDUCTOR_CPU: unknown feature(s) '" + unknown + "'; use a comma-separated list of " + known);
    return -1;
  }
  if (!missing.empty()) {
    *out = scalar_of(d);
    std::string detected = d.has_v ? "v" : "no v";
#define RVV_CPU_EXT(field, name) \
  if (d.field) detected += ", " name;
#include "rvv_inductor/cpu_extensions.inl"
#undef RVV_CPU_EXT
    set_err(err, err_len,
            "RVV_INDUCTOR_CPU claims '" + missing + "', but this CPU does not have it (detected: " + detected +
                "). Running vector code on it would die with SIGILL; remove the override or narrow it.");
    return -1;
  }
  // Extensions on top of V are meaningless without V.
  if (!want.has_v) {
#define RVV_CPU_EXT(field, name) want.field = 0;
#include "rvv_inductor/cpu_extensions.inl"
#undef RVV_CPU_EXT
  }
  want.vlenb = want.has_v ? d.vlenb : 0;
  *out = want;
  return 0;
}

extern "C" int rvv_effective_cpu(rvv_cpu_features* out, char* err, size_t err_len) {
  return rvv_resolve_cpu(std::getenv("RVV_INDUCTOR_CPU"), out, err, err_len);
}

extern "C" int rvv_march_string(const rvv_cpu_features* f, char* buf, size_t buf_len) {
  std::string m = f->has_v ? "rv64gcv" : "rv64gc";
#define RVV_CPU_EXT(field, name) \
  if (f->has_v && f->field) m += "_" name;
#include "rvv_inductor/cpu_extensions.inl"
#undef RVV_CPU_EXT
  if (m.size() + 1 > buf_len) return -1;
  std::memcpy(buf, m.c_str(), m.size() + 1);
  return static_cast<int>(m.size());
}
