// rvvcount: a QEMU TCG plugin (riscv64 linux-user) that charges executed instructions,
// RVV register-group work, memory bytes and a two-level cache model to marked regions.
//
// Regions are delimited by architectural no-op hints that compilers never emit:
//   ori  x0, x0, ID   begin region ID (1..2047)
//   xori x0, x0, ID   end region ID
// (csrc/rvv_inductor/markers.h has the macros). A region is opened and closed by one guest
// thread (its owner); everything EVERY thread of the process executes while it is open is
// charged to ID, per thread: the report has the totals over all threads (the keys that
// existed before threads were counted keep their names and now mean "all threads"), a
// "threads" breakdown keyed by QEMU vCPU index (one per guest thread in linux-user; the
// owner is "owner_vcpu"), and the imbalance max/mean over the threads that executed at
// least one instruction in the region ("threads_active"). One region is open at a time:
// a begin while another is open (from any thread) is ignored and noted.
//
// Idle threads: a thread spinning while a region is open is charged like any other work
// (the plugin cannot tell a spin loop from work). Counting runs of OpenMP code should set
// OMP_WAIT_POLICY=passive so that idle workers sleep in futex(2) instead; every thread's
// system calls in the region are counted ("syscalls"), which shows the waits.
//
// Cache model: each thread has its own L1 and L2 (both cold at every region begin): the
// counts of a thread depend on that thread's accesses only, so they are deterministic
// whatever the host scheduling. On the K1 the L2 is shared per 4-core cluster, so data
// that several threads read (the activations of a Linear whose N is split) is charged
// to DRAM once per thread here: an overcount of at most (threads - 1) x the shared
// bytes, small next to the disjoint weight slices the threads stream.
//
// A guest can describe its buffers with a private system call (number RVVCOUNT_SYSCALL,
// which Linux does not have and which returns -ENOSYS harmlessly on real hardware):
//   a0 = tag kind (1 weights, 2 input, 3 output, 4 scratch, 0 = forget all tags),
//   a1 = address, a2 = bytes.
// Reads and cache misses falling in a tagged range are then reported per kind.
//
// Builds against QEMU plugin API 1 (QEMU 7.2) and 4 (QEMU 10); see
// scripts/build-qemu-plugins. Arguments (-plugin rvvcount.so,key=value,...):
//   out=FILE      JSON report (default: QEMU's log/stderr)
//   vlen=BITS     VLEN the guest runs at (QEMU_CPU vlen=); used for datapath beats
//   dlen=BITS     datapath width of the modelled core (default 128, as the SpacemiT X60)
//   l1=SIZE:WAYS:LINE, l2=SIZE:WAYS:LINE   cache geometry (default 32768:8:64, 524288:16:64)
//   cache=on|off  run the cache model (default on)
//   hist=on|off   per-mnemonic histogram of region instructions (default off)
//   format=json|kv  JSON (default) or flat "region.ID.counter value" lines
//   vtype=track|read  how vtype is known: decoded from vsetvli/vsetivli immediates
//                 (track, the only choice on API 1) or read from the vtype CSR (read,
//                 API >= 3; tracking still runs and disagreements are counted)
//   profile=FILE  where region instructions execute: one line per code location that ran
//                 inside a region, "insns<TAB>file<TAB>file_offset<TAB>guest_vaddr", most
//                 first. The location is the host mapping of the guest code (linux-user
//                 maps guest files into QEMU's own address space, so /proc/self/maps names
//                 the file), summed over all threads and regions; bench/profile_report.py
//                 turns file offsets into function names.

#include <glib.h>
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sched.h>
#include <string>
#include <vector>

extern "C" {
#include <qemu-plugin.h>
}

extern "C" {
QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;
}

#define RVVCOUNT_SYSCALL 0x5256  // "RV": far above the last Linux riscv64 syscall (~470)

namespace {

// ---------------------------------------------------------------- instruction classes
enum Cls : int {
  C_SCALAR,  // scalar ALU, branches, FP arithmetic, CSR accesses, system
  C_SMEM,    // scalar loads/stores/AMOs (integer and FP)
  C_VSETVL,  // vsetvli/vsetivli/vsetvl
  C_VLOAD,
  C_VSTORE,
  C_VFMA,    // multiply-accumulate, integer and FP, widening or not
  C_VWIDEN,  // widening/narrowing arithmetic, extensions, conversions
  C_VARITH,  // every other vector instruction (ALU, shifts, moves, reductions, masks)
  C_N
};
const char *const kClsName[C_N] = {"scalar", "scalar_mem", "vsetvl", "vload",
                                   "vstore", "vfma",       "vwiden", "varith"};

// How a vector instruction's register-group size (EMUL, in eighths of a register)
// follows from vtype. Datapath work scales with the largest operand group.
enum VKind : uint8_t {
  VK_FIXED,    // weight8 = fixed (masks, scalar moves, whole-register ops)
  VK_LMUL,     // weight8 = lmul8 * mult
  VK_EEW,      // unit-stride/strided memory: EMUL = EEW/SEW * LMUL, times nf
  VK_INDEXED,  // data EMUL = LMUL * nf, index EMUL = EEW/SEW * LMUL
};
struct VDesc {
  uint8_t kind, mult, eew_log, nf, fixed8;
};

struct VType {
  uint8_t valid = 0;  // 0 unknown, 1 known
  uint8_t vill = 1;
  uint8_t sew_log = 3;  // log2(SEW): 3..6
  uint8_t lmul8 = 8;    // LMUL * 8: 1,2,4,8,16,32,64
};

VType decode_vtype(uint64_t v) {
  VType t;
  t.valid = 1;
  unsigned vlmul = v & 7, vsew = (v >> 3) & 7;
  bool reserved = (v >> 8) != 0 || vlmul == 4 || vsew > 3;
  // Bit 63 is vill when the value comes from the CSR.
  if (reserved) {
    t.vill = 1;
    return t;
  }
  t.vill = 0;
  t.sew_log = 3 + vsew;
  static const uint8_t l8[8] = {8, 16, 32, 64, 0, 1, 2, 4};
  t.lmul8 = l8[vlmul];
  return t;
}

uint32_t weight8(const VDesc &d, const VType &t) {
  switch (d.kind) {
    case VK_FIXED:
      return d.fixed8;
    case VK_LMUL:
      return uint32_t(t.lmul8) * d.mult;
    case VK_EEW: {
      // EMUL = EEW/SEW * LMUL, kept exact in eighths (may be < 8 for fractional).
      int sh = int(d.eew_log) - int(t.sew_log);
      uint32_t e = sh >= 0 ? uint32_t(t.lmul8) << sh : uint32_t(t.lmul8) >> (-sh);
      if (e == 0) e = 1;
      return e * d.nf;
    }
    case VK_INDEXED: {
      int sh = int(d.eew_log) - int(t.sew_log);
      uint32_t idx = sh >= 0 ? uint32_t(t.lmul8) << sh : std::max(1u, uint32_t(t.lmul8) >> (-sh));
      return std::max<uint32_t>(uint32_t(t.lmul8) * d.nf, idx);
    }
  }
  return 8;
}

struct Decoded {
  int cls = C_SCALAR;
  bool mem = false;       // accesses data memory (gets a memory callback)
  bool vector = false;    // counts as a V-extension instruction (incl. vsetvl)
  int marker = 0;         // 1 begin, 2 end
  int marker_id = 0;
  bool has_vdesc = false;
  VDesc vd{};
  int vset = 0;           // 1 immediate vsetvl(i) (vtype known), 2 register vsetvl
  uint64_t vset_vtype = 0;
};

Decoded decode(uint32_t w, unsigned len) {
  Decoded d;
  if (len == 2) {
    unsigned q = w & 3, f3 = (w >> 13) & 7;
    if ((q == 0 && f3 != 0) || (q == 2 && (f3 == 1 || f3 == 2 || f3 == 3 || f3 == 5 || f3 == 6 || f3 == 7))) {
      d.cls = C_SMEM;
      d.mem = true;
    }
    return d;
  }
  unsigned op = w & 0x7f, f3 = (w >> 12) & 7, rd = (w >> 7) & 31, rs1 = (w >> 15) & 31;
  switch (op) {
    case 0x13:  // OP-IMM: ori/xori x0, x0, ID are the markers
      if (rd == 0 && rs1 == 0 && (f3 == 6 || f3 == 4)) {
        int id = int32_t(w) >> 20;
        if (id > 0) {
          d.marker = f3 == 6 ? 1 : 2;
          d.marker_id = id;
        }
      }
      return d;
    case 0x03: case 0x23: case 0x2f:
      d.cls = C_SMEM;
      d.mem = true;
      return d;
    case 0x07: case 0x27: {
      d.mem = true;
      if (f3 >= 1 && f3 <= 4) {  // flh/flw/fld/flq and stores
        d.cls = C_SMEM;
        return d;
      }
      d.vector = true;
      d.cls = op == 0x07 ? C_VLOAD : C_VSTORE;
      d.has_vdesc = true;
      unsigned eew_log = f3 == 0 ? 3 : f3 - 5 + 4;  // 0:8 5:16 6:32 7:64
      unsigned nf = ((w >> 29) & 7) + 1, mop = (w >> 26) & 3, umop = (w >> 20) & 31;
      d.vd.eew_log = eew_log;
      d.vd.nf = nf;
      if (mop == 0 && umop == 8) {  // whole-register load/store: nf registers
        d.vd.kind = VK_FIXED;
        d.vd.fixed8 = 8 * nf;
      } else if (mop == 0 && umop == 11) {  // vlm/vsm: at most one register
        d.vd.kind = VK_FIXED;
        d.vd.fixed8 = 8;
      } else if (mop == 1 || mop == 3) {
        d.vd.kind = VK_INDEXED;
      } else {
        d.vd.kind = VK_EEW;
      }
      return d;
    }
    case 0x57:
      break;
    default:
      return d;
  }
  // OP-V
  d.vector = true;
  if (f3 == 7) {
    d.cls = C_VSETVL;
    if ((w >> 31) == 0) {  // vsetvli: zimm[10:0]
      d.vset = 1;
      d.vset_vtype = (w >> 20) & 0x7ff;
    } else if (((w >> 30) & 3) == 3) {  // vsetivli: zimm[9:0]
      d.vset = 1;
      d.vset_vtype = (w >> 20) & 0x3ff;
    } else {
      d.vset = 2;
    }
    return d;
  }
  unsigned f6 = w >> 26, vs1 = (w >> 15) & 31;
  d.has_vdesc = true;
  d.vd.kind = VK_LMUL;
  d.vd.mult = 1;
  d.cls = C_VARITH;
  auto fixed = [&](unsigned regs) {
    d.vd.kind = VK_FIXED;
    d.vd.fixed8 = uint8_t(8 * regs);
  };
  const bool opi = f3 == 0 || f3 == 3 || f3 == 4;
  const bool opm = f3 == 2 || f3 == 6;
  const bool opf = f3 == 1 || f3 == 5;
  if (opi) {
    if (f6 == 0x27 && f3 == 3) fixed(vs1 % 8 + 1);  // vmv<nr>r.v
    else if (f6 >= 0x2c && f6 <= 0x2f) { d.cls = C_VWIDEN; d.vd.mult = 2; }  // narrowing
    else if (f6 == 0x30 || f6 == 0x31) d.vd.mult = 1;  // widening reductions
  } else if (opm) {
    if (f6 == 0x10) fixed(1);                          // vmv.x.s, vcpop, vfirst, vmv.s.x
    else if (f6 == 0x12) d.cls = C_VWIDEN;             // vzext/vsext
    else if (f6 >= 0x18 && f6 <= 0x1f) fixed(1);       // mask logical
    else if (f6 == 0x29 || f6 == 0x2b || f6 == 0x2d || f6 == 0x2f) d.cls = C_VFMA;
    else if (f6 >= 0x30 && f6 <= 0x3b) { d.cls = C_VWIDEN; d.vd.mult = 2; }
    else if (f6 >= 0x3c) { d.cls = C_VFMA; d.vd.mult = 2; }
  } else if (opf) {
    if (f6 == 0x10) fixed(1);                          // vfmv.f.s, vfmv.s.f
    else if (f6 == 0x12) {                             // VFUNARY0 conversions
      d.cls = C_VWIDEN;
      if (vs1 >= 8) d.vd.mult = 2;                     // widening (8..15) and narrowing (16..)
    } else if (f6 >= 0x28 && f6 <= 0x2f) d.cls = C_VFMA;
    else if (f6 == 0x31 || f6 == 0x33) d.vd.mult = 1;  // widening reductions
    else if (f6 == 0x3b || f6 >= 0x3c) { d.cls = C_VFMA; d.vd.mult = 2; }  // vfwmaccbf16, vfwmacc...
    else if (f6 >= 0x30) { d.cls = C_VWIDEN; d.vd.mult = 2; }
  }
  return d;
}

// ---------------------------------------------------------------- cache model
// Set-associative, LRU by generation stamps (the idea of QEMU's contrib/plugins/cache.c),
// write-allocate and write-back, no prefetcher.
struct Cache {
  unsigned line_log = 6, sets = 0, ways = 0;
  std::vector<uint64_t> tag;    // sets * ways; ~0 = invalid
  std::vector<uint64_t> stamp;
  std::vector<uint8_t> dirty;
  uint64_t gen = 0;

  void init(uint64_t size, unsigned w, unsigned line) {
    ways = w;
    line_log = __builtin_ctz(line);
    sets = unsigned(size / line / w);
    tag.assign(size_t(sets) * ways, ~0ull);
    stamp.assign(tag.size(), 0);
    dirty.assign(tag.size(), 0);
  }
  void reset() {
    std::fill(tag.begin(), tag.end(), ~0ull);
    std::fill(dirty.begin(), dirty.end(), 0);
  }
  // Looks up line number ln. On a miss the line is inserted; *evicted/*evicted_dirty
  // describe the victim. Returns true on a hit.
  bool access(uint64_t ln, bool write, uint64_t *evicted, bool *evicted_dirty) {
    size_t base = size_t(ln % sets) * ways;
    *evicted = ~0ull;
    *evicted_dirty = false;
    size_t victim = base;
    for (size_t i = base; i < base + ways; i++) {
      if (tag[i] == ln) {
        stamp[i] = ++gen;
        if (write) dirty[i] = 1;
        return true;
      }
      if (tag[i] == ~0ull) {
        if (tag[victim] != ~0ull) victim = i;
      } else if (tag[victim] != ~0ull && stamp[i] < stamp[victim]) {
        victim = i;
      }
    }
    *evicted = tag[victim];
    *evicted_dirty = tag[victim] != ~0ull && dirty[victim];
    tag[victim] = ln;
    stamp[victim] = ++gen;
    dirty[victim] = write;
    return false;
  }
  // Marks a line dirty if present (write-back from the level above); returns presence.
  bool mark_dirty(uint64_t ln) {
    size_t base = size_t(ln % sets) * ways;
    for (size_t i = base; i < base + ways; i++)
      if (tag[i] == ln) {
        dirty[i] = 1;
        return true;
      }
    return false;
  }
};

// ---------------------------------------------------------------- per-region counters
enum { TAG_W = 1, TAG_X = 2, TAG_Y = 3, TAG_SCRATCH = 4, TAG_KINDS = 5 };
const char *const kTagName[TAG_KINDS] = {"other", "weights", "input", "output", "scratch"};

struct Counters {
  uint64_t cls[C_N] = {};
  uint64_t vregops8 = 0;     // sum of max(EMUL, 1) in eighths of a register
  uint64_t vbeats = 0;       // sum of max(1, ceil(EMUL * VLEN / DLEN))
  uint64_t lmul_hist[7] = {};  // vector insns by vtype LMUL: mf8..m8
  uint64_t vtype_unknown = 0, vtype_mismatch = 0;
  uint64_t reads = 0, writes = 0, bytes_read = 0, bytes_written = 0;
  uint64_t vreads = 0, vbytes_read = 0, vbytes_written = 0;
  uint64_t tag_bytes_read[TAG_KINDS] = {};
  uint64_t l1_accesses = 0, l1_misses = 0, l2_misses = 0;
  uint64_t dram_read_lines[TAG_KINDS] = {};
  uint64_t dram_write_lines = 0;
  uint64_t syscalls = 0;
  std::map<std::string, uint64_t> hist;

  void add(const Counters &o) {
    for (int i = 0; i < C_N; i++) cls[i] += o.cls[i];
    vregops8 += o.vregops8;
    vbeats += o.vbeats;
    for (int i = 0; i < 7; i++) lmul_hist[i] += o.lmul_hist[i];
    vtype_unknown += o.vtype_unknown;
    vtype_mismatch += o.vtype_mismatch;
    reads += o.reads;
    writes += o.writes;
    bytes_read += o.bytes_read;
    bytes_written += o.bytes_written;
    vreads += o.vreads;
    vbytes_read += o.vbytes_read;
    vbytes_written += o.vbytes_written;
    for (int i = 0; i < TAG_KINDS; i++) tag_bytes_read[i] += o.tag_bytes_read[i];
    l1_accesses += o.l1_accesses;
    l1_misses += o.l1_misses;
    l2_misses += o.l2_misses;
    for (int i = 0; i < TAG_KINDS; i++) dram_read_lines[i] += o.dram_read_lines[i];
    dram_write_lines += o.dram_write_lines;
    syscalls += o.syscalls;
    for (auto &kv : o.hist) hist[kv.first] += kv.second;
  }
};

struct Range {
  uint64_t lo, len;
  int kind;
};

// ---------------------------------------------------------------- configuration
struct Config {
  std::string out;
  unsigned vlen = 0, dlen = 128;
  uint64_t l1_size = 32768, l2_size = 524288;
  unsigned l1_ways = 8, l1_line = 64, l2_ways = 16, l2_line = 64;
  bool cache = true, hist = false, read_vtype = false, kv = false;
  std::string profile;
} cfg;

// ---------------------------------------------------------------- translation-time data
// A TB is cut into segments at marker instructions; each segment's static counts are
// charged by one callback on its first instruction, after the marker (if it starts
// with one) has opened or closed the region. vsetvl* always ends a TB in QEMU (vtype is
// part of the TB flags), so vtype is constant over every segment.
struct Segment {
  uint64_t cls[C_N] = {};
  std::vector<VDesc> vdesc;
  std::vector<uint32_t> hist_ids;
  int marker = 0, marker_id = 0;
  int vset = 0;  // last instruction is vsetvl(i): 1 immediate, 2 register form
  VType vset_vtype;
  // profile=: where the segment's code lives and how many of its instructions ran in regions.
  uint64_t haddr = 0, vaddr = 0, n_charged = 0;
  mutable std::atomic<uint64_t> prof{0};
};

// What one region id accumulated over its calls.
struct Region {
  uint64_t calls = 0;
  unsigned owner = 0;  // vCPU index of the thread that opened it (last call)
  Counters total;      // all threads
  std::map<unsigned, std::pair<uint64_t, Counters>> threads;  // vCPU -> (calls joined, counters)
};

std::mutex g_mu;  // guards g_hist_names, g_regions, g_tags, g_segments, g_notes and the open-region fields
std::vector<std::string> g_hist_names;
std::map<std::string, uint32_t> g_hist_index;
std::vector<std::unique_ptr<Segment>> g_segments;  // kept for the process lifetime
std::map<int, Region> g_regions;
std::vector<Range> g_tags;
std::map<std::string, uint64_t> g_notes;
int g_api_cur = 0;

// The open region. g_open is its epoch (a new number at every begin), 0 when none is
// open. The other fields are written under g_mu before g_open is published (release)
// and stay constant while it is open, so vCPUs read them without the lock.
std::atomic<uint64_t> g_open{0};
uint64_t g_epoch = 0;
int g_open_id = 0;
unsigned g_owner = 0;
Range g_open_tags[8];
int g_open_ntags = 0;

// ---------------------------------------------------------------- per-vCPU state
// Counters of a vCPU belong to the region epoch in `epoch`. Only the vCPU's own thread
// updates them, between acquire() and release(); the owner closing the region reads them
// after it has closed g_open and seen `busy` clear (a Dekker handshake with seq_cst
// fences), so no update can be lost or land after the read.
struct Vcpu {
  VType vt;
  std::atomic<int> busy{0};
  uint64_t epoch = 0;
  Counters c;
  Range tags[8];
  int ntags = 0;
  Cache l1, l2;
  std::vector<uint64_t> hist;  // by g_hist_names index
#if QEMU_PLUGIN_VERSION >= 3
  struct qemu_plugin_register *vtype_reg = nullptr;
  GByteArray *buf = nullptr;
#endif
};
constexpr unsigned kMaxVcpus = 4096;
std::atomic<Vcpu *> g_vcpu[kMaxVcpus];
std::atomic<unsigned> g_nvcpus{0};  // 1 + the highest vCPU index seen

Vcpu *vcpu(unsigned i) {
  if (i >= kMaxVcpus) return nullptr;
  Vcpu *v = g_vcpu[i].load(std::memory_order_acquire);
  if (!v) {
    v = new Vcpu();
    if (cfg.cache) {
      v->l1.init(cfg.l1_size, cfg.l1_ways, cfg.l1_line);
      v->l2.init(cfg.l2_size, cfg.l2_ways, cfg.l2_line);
    }
    g_vcpu[i].store(v, std::memory_order_release);
    unsigned cur = g_nvcpus.load();
    while (cur < i + 1 && !g_nvcpus.compare_exchange_weak(cur, i + 1)) {
    }
  }
  return v;
}

[[maybe_unused]] void note(const std::string &what) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_notes[what]++;
}

// ---------------------------------------------------------------- cache simulation
inline int tag_of(const Vcpu *v, uint64_t a) {
  for (int i = 0; i < v->ntags; i++)
    if (a - v->tags[i].lo < v->tags[i].len) return v->tags[i].kind;
  return 0;
}

void cache_access(Vcpu *v, uint64_t addr, unsigned size, bool write) {
  unsigned lg = v->l1.line_log;
  for (uint64_t ln = addr >> lg; ln <= (addr + size - 1) >> lg; ln++) {
    v->c.l1_accesses++;
    uint64_t ev;
    bool evd;
    if (v->l1.access(ln, write, &ev, &evd)) continue;
    v->c.l1_misses++;
    if (evd && !v->l2.mark_dirty(ev)) v->c.dram_write_lines++;  // L1 victim not in L2
    uint64_t ev2;
    bool evd2;
    if (!v->l2.access(ln, false, &ev2, &evd2)) {
      v->c.l2_misses++;
      v->c.dram_read_lines[tag_of(v, ln << lg)]++;
      if (evd2) v->c.dram_write_lines++;
    }
  }
}

// Dirty lines still cached at region end would be written back eventually: charge them.
void cache_flush(Vcpu *v) {
  for (size_t i = 0; i < v->l1.tag.size(); i++)
    if (v->l1.tag[i] != ~0ull && v->l1.dirty[i] && !v->l2.mark_dirty(v->l1.tag[i])) v->c.dram_write_lines++;
  for (size_t i = 0; i < v->l2.tag.size(); i++)
    if (v->l2.tag[i] != ~0ull && v->l2.dirty[i]) v->c.dram_write_lines++;
}

// ---------------------------------------------------------------- execution callbacks
// The vCPU joins epoch e: its counters, tags and caches start afresh (cold caches: the
// region's own traffic, nothing inherited). Called by the vCPU's thread inside acquire().
void enter(Vcpu *v, uint64_t e) {
  v->epoch = e;
  v->c = Counters();
  std::fill(v->hist.begin(), v->hist.end(), 0);
  v->ntags = g_open_ntags;
  for (int i = 0; i < g_open_ntags; i++) v->tags[i] = g_open_tags[i];
  if (cfg.cache) {
    v->l1.reset();
    v->l2.reset();
  }
}

// Non-zero (the open epoch) when a region is open: the caller may then update v's
// counters and must call release(v) afterwards. 0: nothing to charge, no release.
inline uint64_t acquire(Vcpu *v) {
  if (!g_open.load(std::memory_order_relaxed)) return 0;
  v->busy.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint64_t e = g_open.load(std::memory_order_acquire);
  if (!e) {
    v->busy.store(0, std::memory_order_release);
    return 0;
  }
  if (v->epoch != e) enter(v, e);
  return e;
}
inline void release(Vcpu *v) { v->busy.store(0, std::memory_order_release); }

void region_begin(unsigned idx, int id) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_open.load()) {
    g_notes["region begin while another region is open (ignored)"]++;
    return;
  }
  g_open_ntags = 0;
  for (auto &r : g_tags)
    if (g_open_ntags < 8) g_open_tags[g_open_ntags++] = r;
  g_open_id = id;
  g_owner = idx;
  g_open.store(++g_epoch, std::memory_order_release);
}

void region_end(unsigned idx, int id) {
  std::lock_guard<std::mutex> lk(g_mu);
  const uint64_t e = g_open.load();
  if (!e || id != g_open_id || idx != g_owner) {
    g_notes["region end without matching begin on the same thread (ignored)"]++;
    return;
  }
  g_open.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  Region &r = g_regions[id];
  r.calls++;
  r.owner = idx;
  const unsigned n = g_nvcpus.load(std::memory_order_acquire);
  for (unsigned i = 0; i < n; i++) {
    Vcpu *w = g_vcpu[i].load(std::memory_order_acquire);
    if (!w) continue;
    while (w->busy.load(std::memory_order_acquire)) sched_yield();
    if (w->epoch != e) continue;  // did not run while the region was open
    if (cfg.cache) cache_flush(w);
    for (size_t h = 0; h < w->hist.size(); h++)
      if (w->hist[h]) w->c.hist[g_hist_names[h]] += w->hist[h];
    auto &t = r.threads[i];
    t.first++;
    t.second.add(w->c);
    r.total.add(w->c);
  }
}

void on_segment(unsigned vcpu_index, void *udata) {
  Vcpu *v = vcpu(vcpu_index);
  if (!v) return;
  const Segment *s = static_cast<const Segment *>(udata);
  if (s->marker == 1) region_begin(vcpu_index, s->marker_id);
  else if (s->marker == 2) region_end(vcpu_index, s->marker_id);
  const bool open = acquire(v) != 0;

  VType vt = v->vt;
#if QEMU_PLUGIN_VERSION >= 3
  if (cfg.read_vtype && !s->vdesc.empty() && v->vtype_reg) {
    g_byte_array_set_size(v->buf, 0);
    if (qemu_plugin_read_register(v->vtype_reg, v->buf) >= 8) {
      uint64_t raw;
      memcpy(&raw, v->buf->data, 8);
      VType csr = (raw >> 63) ? VType{1, 1, 3, 8} : decode_vtype(raw);
      if (open && vt.valid &&
          (csr.vill != vt.vill || (!csr.vill && (csr.sew_log != vt.sew_log || csr.lmul8 != vt.lmul8))))
        v->c.vtype_mismatch += s->vdesc.size();
      vt = csr;
      v->vt = csr;
    }
  }
#endif
  if (open) {
    Counters &c = v->c;
    for (int i = 0; i < C_N; i++) c.cls[i] += s->cls[i];
    if (!s->vdesc.empty()) {
      VType w = vt;
      if (!vt.valid || vt.vill) {
        // Unknown vtype (register-form vsetvl on API 1) or vill: weigh as LMUL 1.
        for (const VDesc &d : s->vdesc) c.vtype_unknown += d.kind != VK_FIXED;
        w = VType{1, 0, 3, 8};
      }
      unsigned li = 0;
      while ((1u << li) < w.lmul8) li++;
      c.lmul_hist[std::min(li, 6u)] += s->vdesc.size();
      for (const VDesc &d : s->vdesc) {
        uint64_t w8 = weight8(d, w);
        c.vregops8 += std::max<uint64_t>(w8, 8);
        uint64_t beats = (w8 * cfg.vlen + 8 * cfg.dlen - 1) / (8 * cfg.dlen);
        c.vbeats += std::max<uint64_t>(beats, 1);
      }
    }
    for (uint32_t h : s->hist_ids) {
      if (h >= v->hist.size()) v->hist.resize(h + 1);
      v->hist[h]++;
    }
    if (s->n_charged && !cfg.profile.empty()) s->prof.fetch_add(s->n_charged, std::memory_order_relaxed);
    release(v);
  }
  if (s->vset == 1) v->vt = s->vset_vtype;
  else if (s->vset == 2) v->vt = VType{0, 1, 3, 8};
}

void on_mem(unsigned vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata) {
  if (vcpu_index >= kMaxVcpus) return;
  Vcpu *v = g_vcpu[vcpu_index].load(std::memory_order_relaxed);
  if (!v || !acquire(v)) return;
  unsigned size = 1u << qemu_plugin_mem_size_shift(info);
  bool store = qemu_plugin_mem_is_store(info);
  bool vec = udata != nullptr;
  Counters &c = v->c;
  if (store) {
    c.writes++;
    c.bytes_written += size;
    if (vec) c.vbytes_written += size;
  } else {
    c.reads++;
    c.bytes_read += size;
    if (vec) {
      c.vreads++;
      c.vbytes_read += size;
    }
    c.tag_bytes_read[tag_of(v, vaddr)] += size;
  }
  if (cfg.cache) cache_access(v, vaddr, size, store);
  release(v);
}

void on_syscall(qemu_plugin_id_t, unsigned int vcpu_index, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3,
                uint64_t, uint64_t, uint64_t, uint64_t, uint64_t) {
  if (Vcpu *v = vcpu(vcpu_index)) {
    if (acquire(v)) {
      v->c.syscalls++;
      release(v);
    }
  }
  if (num != RVVCOUNT_SYSCALL) return;
  std::lock_guard<std::mutex> lk(g_mu);
  if (a1 == 0) g_tags.clear();
  else if (a1 < TAG_KINDS && a3 > 0) g_tags.push_back(Range{a2, a3, int(a1)});
}

// ---------------------------------------------------------------- translation
uint32_t hist_id(const std::string &name) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_hist_index.find(name);
  if (it != g_hist_index.end()) return it->second;
  uint32_t id = uint32_t(g_hist_names.size());
  g_hist_names.push_back(name);
  g_hist_index[name] = id;
  return id;
}

std::string mnemonic(struct qemu_plugin_insn *insn) {
  char *dis = qemu_plugin_insn_disas(insn);
  std::string m = dis ? dis : "?";
  g_free(dis);
  size_t sp = m.find_first_of(" \t");
  return sp == std::string::npos ? m : m.substr(0, sp);
}

uint32_t insn_word(struct qemu_plugin_insn *insn, unsigned *len) {
  uint32_t w = 0;
  *len = unsigned(qemu_plugin_insn_size(insn));
#if QEMU_PLUGIN_VERSION >= 3
  qemu_plugin_insn_data(insn, &w, std::min<size_t>(*len, 4));
#else
  memcpy(&w, qemu_plugin_insn_data(insn), std::min<size_t>(*len, 4));
#endif
  return w;
}

void on_tb_trans(qemu_plugin_id_t, struct qemu_plugin_tb *tb) {
  size_t n = qemu_plugin_tb_n_insns(tb);
  std::vector<std::unique_ptr<Segment>> made;
  std::vector<struct qemu_plugin_insn *> starts;
  Segment *seg = nullptr;
  for (size_t i = 0; i < n; i++) {
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    unsigned len = 0;
    uint32_t word = insn_word(insn, &len);  // sets len: keep out of decode()'s argument list
    Decoded d = decode(word, len);
    if (i == 0 || d.marker) {
      made.emplace_back(new Segment());
      starts.push_back(insn);
      seg = made.back().get();
      seg->marker = d.marker;
      seg->marker_id = d.marker_id;
      if (!cfg.profile.empty()) {
        seg->haddr = uint64_t(uintptr_t(qemu_plugin_insn_haddr(insn)));
        seg->vaddr = qemu_plugin_insn_vaddr(insn);
      }
    }
    if (d.marker) continue;  // markers are not charged
    seg->cls[d.cls]++;
    if (d.has_vdesc) seg->vdesc.push_back(d.vd);
    if (d.vset == 1) {
      seg->vset = 1;
      seg->vset_vtype = decode_vtype(d.vset_vtype);
    } else if (d.vset == 2) {
      seg->vset = 2;
    }
    seg->n_charged++;
    if (cfg.hist) seg->hist_ids.push_back(hist_id(mnemonic(insn)));
    if (d.mem)
      qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                       d.vector ? reinterpret_cast<void *>(1) : nullptr);
  }
  for (size_t k = 0; k < made.size(); k++) {
    enum qemu_plugin_cb_flags fl = QEMU_PLUGIN_CB_NO_REGS;
#if QEMU_PLUGIN_VERSION >= 3
    // Reading a register makes QEMU write back guest state first: only segments with
    // vector instructions, whose weights need vtype, pay for it.
    if (cfg.read_vtype && !made[k]->vdesc.empty()) fl = QEMU_PLUGIN_CB_R_REGS;
#endif
    qemu_plugin_register_vcpu_insn_exec_cb(starts[k], on_segment, fl, made[k].get());
  }
  std::lock_guard<std::mutex> lk(g_mu);
  for (auto &s : made) g_segments.push_back(std::move(s));
}

#if QEMU_PLUGIN_VERSION >= 3
void on_vcpu_init(qemu_plugin_id_t, unsigned int idx) {
  Vcpu *v = vcpu(idx);
  if (!v) return;
  // A thread reusing an index must not inherit the previous thread's vtype (counters of
  // an open region go on: they are the same slot's share of the region).
  v->vt = VType();
  if (!cfg.read_vtype) return;
  GArray *regs = qemu_plugin_get_registers();
  for (guint i = 0; regs && i < regs->len; i++) {
    qemu_plugin_reg_descriptor *r = &g_array_index(regs, qemu_plugin_reg_descriptor, i);
    if (strcmp(r->name, "vtype") == 0) v->vtype_reg = r->handle;
  }
  if (regs) g_array_free(regs, TRUE);
  if (!v->buf) v->buf = g_byte_array_new();
  if (!v->vtype_reg) note("vtype CSR not exposed by this QEMU: vtype tracked from vsetvl immediates");
}
#else
void on_vcpu_init(qemu_plugin_id_t, unsigned int idx) {
  Vcpu *v = vcpu(idx);
  if (!v) return;
  v->vt = VType();
}
#endif

// ---------------------------------------------------------------- report
// One writer for both output formats: nested JSON for the report generator, and flat
// "path value" lines (region.1.insns 1234) that shell tests can grep.
class Emitter {
 public:
  explicit Emitter(bool kv) : kv_(kv) {}
  void open(const std::string &name) {
    if (!kv_) {
      sep();
      if (!name.empty()) o_ += quote(name) + ": ";
      o_ += "{";
      first_ = true;
    }
    path_.push_back(name);
  }
  void close() {
    path_.pop_back();
    if (!kv_) {
      o_ += "}";
      first_ = false;
    }
  }
  void num(const std::string &k, uint64_t v) { raw(k, std::to_string(v)); }
  void dbl(const std::string &k, double v) {
    char b[64];
    snprintf(b, sizeof b, "%.3f", v);
    raw(k, b);
  }
  void str(const std::string &k, const std::string &v) { raw(k, kv_ ? v : quote(v)); }
  std::string text() const { return kv_ ? o_ : o_ + "\n"; }

 private:
  void sep() {
    if (!first_) o_ += ", ";
    first_ = false;
  }
  static std::string quote(const std::string &s) {
    std::string q = "\"";
    for (char ch : s) {
      if (ch == '"' || ch == '\\') q += '\\';
      q += ch;
    }
    return q + "\"";
  }
  void raw(const std::string &k, const std::string &v) {
    if (kv_) {
      std::string p;
      for (auto &s : path_)
        if (!s.empty()) p += s + ".";
      o_ += p + k + " " + v + "\n";
    } else {
      sep();
      o_ += quote(k) + ": " + v;
    }
  }
  bool kv_, first_ = true;
  std::string o_;
  std::vector<std::string> path_;
};

uint64_t insns_of(const Counters &c) {
  uint64_t t = 0;
  for (int i = 0; i < C_N; i++) t += c.cls[i];
  return t;
}
uint64_t dram_bytes_of(const Counters &c) {
  uint64_t t = c.dram_write_lines;
  for (int i = 0; i < TAG_KINDS; i++) t += c.dram_read_lines[i];
  return t * cfg.l2_line;
}

void emit_counters(Emitter &e, const Counters &c, uint64_t calls, bool with_hist = true) {
  e.num("calls", calls);
  uint64_t total = 0, vec = 0;
  for (int i = 0; i < C_N; i++) total += c.cls[i];
  for (int i = C_VSETVL; i < C_N; i++) vec += c.cls[i];
  e.num("insns", total);
  e.num("vector_insns", vec);
  for (int i = 0; i < C_N; i++) e.num(kClsName[i], c.cls[i]);
  e.dbl("vregops", c.vregops8 / 8.0);
  e.num("vbeats", c.vbeats);
  static const char *const ln[7] = {"mf8", "mf4", "mf2", "m1", "m2", "m4", "m8"};
  e.open("vtype_lmul_hist");
  for (int i = 0; i < 7; i++) e.num(ln[i], c.lmul_hist[i]);
  e.close();
  e.num("vtype_unknown", c.vtype_unknown);
  e.num("vtype_mismatch", c.vtype_mismatch);
  e.num("reads", c.reads);
  e.num("writes", c.writes);
  e.num("bytes_read", c.bytes_read);
  e.num("bytes_written", c.bytes_written);
  e.num("vreads", c.vreads);
  e.num("vbytes_read", c.vbytes_read);
  e.num("vbytes_written", c.vbytes_written);
  e.open("bytes_read_by_tag");
  for (int i = 0; i < TAG_KINDS; i++) e.num(kTagName[i], c.tag_bytes_read[i]);
  e.close();
  if (cfg.cache) {
    e.num("l1_accesses", c.l1_accesses);
    e.num("l1_misses", c.l1_misses);
    e.num("l2_misses", c.l2_misses);
    uint64_t line = cfg.l2_line, dr = 0;
    e.open("dram_read_bytes_by_tag");
    for (int i = 0; i < TAG_KINDS; i++) {
      dr += c.dram_read_lines[i];
      e.num(kTagName[i], c.dram_read_lines[i] * line);
    }
    e.close();
    e.num("dram_read_bytes", dr * line);
    e.num("dram_write_bytes", c.dram_write_lines * line);
  }
  e.num("syscalls", c.syscalls);
  if (cfg.hist && with_hist) {
    std::vector<std::pair<uint64_t, std::string>> h;
    for (auto &kvp : c.hist) h.push_back({kvp.second, kvp.first});
    std::sort(h.rbegin(), h.rend());
    e.open("hist");
    for (auto &x : h) e.num(x.second, x.first);
    e.close();
  }
}

// profile=: segments -> (file, offset) through QEMU's own /proc/self/maps (the guest's
// file mappings are host mappings in linux-user). Called with g_mu held.
void write_profile() {
  struct Map {
    uint64_t lo, hi, off;
    std::string path;
  };
  std::vector<Map> maps;
  if (FILE *f = fopen("/proc/self/maps", "r")) {
    char line[4096];
    while (fgets(line, sizeof line, f)) {
      unsigned long long lo, hi, off;
      int n = 0;
      if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %n", &lo, &hi, &off, &n) < 3) continue;
      std::string path = n ? std::string(line + n) : std::string();
      while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
      maps.push_back(Map{lo, hi, off, path.empty() ? "[anon]" : path});
    }
    fclose(f);
  }
  std::map<std::pair<std::string, uint64_t>, std::pair<uint64_t, uint64_t>> by_loc;  // -> (insns, vaddr)
  for (auto &sp : g_segments) {
    uint64_t n = sp->prof.load(std::memory_order_relaxed);
    if (!n) continue;
    std::string path = "[unmapped]";
    uint64_t off = sp->vaddr;
    for (const Map &m : maps)
      if (sp->haddr >= m.lo && sp->haddr < m.hi) {
        path = m.path;
        off = sp->haddr - m.lo + m.off;
        break;
      }
    auto &slot = by_loc[{path, off}];
    slot.first += n;  // a TB translated again lands on the same location
    slot.second = sp->vaddr;
  }
  std::vector<std::pair<uint64_t, std::pair<std::string, uint64_t>>> rows;
  for (auto &kv : by_loc) rows.push_back({kv.second.first, kv.first});
  std::sort(rows.rbegin(), rows.rend());
  FILE *f = fopen(cfg.profile.c_str(), "w");
  if (!f) {
    fprintf(stderr, "rvvcount: cannot write %s\n", cfg.profile.c_str());
    return;
  }
  for (auto &r : rows)
    fprintf(f, "%" PRIu64 "\t%s\t0x%" PRIx64 "\t0x%" PRIx64 "\n", r.first, r.second.first.c_str(), r.second.second,
            by_loc[r.second].second);
  if (fclose(f) != 0) fprintf(stderr, "rvvcount: cannot write %s\n", cfg.profile.c_str());
}

void on_exit(qemu_plugin_id_t, void *) {
  Emitter e(cfg.kv);
  e.open("");
  e.str("plugin", "rvvcount");
  e.num("api", uint64_t(g_api_cur));
  e.num("built_api", QEMU_PLUGIN_VERSION);
  e.num("vlen", cfg.vlen);
  e.num("dlen", cfg.dlen);
  e.num("cache", cfg.cache);
  e.num("l1_size", cfg.l1_size);
  e.num("l1_ways", cfg.l1_ways);
  e.num("l2_size", cfg.l2_size);
  e.num("l2_ways", cfg.l2_ways);
  e.num("line", cfg.l1_line);
  e.str("vtype_source", cfg.read_vtype ? "csr" : "decode");
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_open.load()) g_notes["region still open at exit (not reported)"]++;
  if (!cfg.profile.empty()) write_profile();
  e.open("notes");
  for (auto &n : g_notes) e.num(n.first, n.second);
  e.close();
  e.open("regions");
  for (auto &r : g_regions) {
    const Region &g = r.second;
    e.open(std::to_string(r.first));
    emit_counters(e, g.total, g.calls);  // all threads
    e.num("owner_vcpu", g.owner);
    // The parallel shape: per counter, the busiest thread and max/mean over the threads
    // that executed at least one instruction (1 = perfectly even; 0 when nothing counted).
    struct Metric {
      const char *name;
      uint64_t (*get)(const Counters &);
    };
    const Metric metrics[] = {{"insns", insns_of},
                              {"vbeats", [](const Counters &c) { return c.vbeats; }},
                              {"bytes", [](const Counters &c) { return c.bytes_read + c.bytes_written; }},
                              {"dram_bytes", dram_bytes_of}};
    uint64_t active = 0;
    for (auto &t : g.threads) active += insns_of(t.second.second) > 0;
    e.num("threads_active", active);
    e.open("max_thread");
    for (const Metric &m : metrics) {
      uint64_t mx = 0;
      for (auto &t : g.threads) mx = std::max(mx, m.get(t.second.second));
      e.num(m.name, mx);
    }
    e.close();
    e.open("imbalance");
    for (const Metric &m : metrics) {
      uint64_t mx = 0, sum = 0;
      for (auto &t : g.threads)
        if (insns_of(t.second.second) > 0) {
          mx = std::max(mx, m.get(t.second.second));
          sum += m.get(t.second.second);
        }
      e.dbl(m.name, sum ? double(mx) * double(active) / double(sum) : 0.0);
    }
    e.close();
    e.open("threads");
    for (auto &t : g.threads) {
      e.open(std::to_string(t.first));
      emit_counters(e, t.second.second, t.second.first, false);
      e.close();
    }
    e.close();
    e.close();
  }
  e.close();
  e.close();
  std::string o = e.text();
  if (!cfg.out.empty()) {
    FILE *f = fopen(cfg.out.c_str(), "w");
    if (f && fputs(o.c_str(), f) >= 0 && fclose(f) == 0) return;
    fprintf(stderr, "rvvcount: cannot write %s\n", cfg.out.c_str());
  }
  qemu_plugin_outs(o.c_str());
}

bool parse_cache(const char *v, uint64_t *size, unsigned *ways, unsigned *line) {
  unsigned long long s;
  unsigned w, l;
  if (sscanf(v, "%llu:%u:%u", &s, &w, &l) != 3) return false;
  if (!s || !w || !l || (l & (l - 1)) || s % (uint64_t(w) * l)) return false;
  *size = s;
  *ways = w;
  *line = l;
  return true;
}

}  // namespace

extern "C" QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                                      char **argv) {
  g_api_cur = info->version.cur;
  if (strcmp(info->target_name, "riscv64") != 0) {
    fprintf(stderr, "rvvcount: target is %s, only riscv64 is supported\n", info->target_name);
    return -1;
  }
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char *eq = strchr(a, '=');
    if (!eq) {
      fprintf(stderr, "rvvcount: argument '%s' is not key=value\n", a);
      return -1;
    }
    std::string k(a, eq - a);
    const char *v = eq + 1;
    bool ok = true;
    if (k == "out") cfg.out = v;
    else if (k == "vlen") cfg.vlen = unsigned(atoi(v));
    else if (k == "dlen") cfg.dlen = unsigned(atoi(v));
    else if (k == "l1") ok = parse_cache(v, &cfg.l1_size, &cfg.l1_ways, &cfg.l1_line);
    else if (k == "l2") ok = parse_cache(v, &cfg.l2_size, &cfg.l2_ways, &cfg.l2_line);
    else if (k == "cache") ok = qemu_plugin_bool_parse(a, v, &cfg.cache);
    else if (k == "hist") ok = qemu_plugin_bool_parse(a, v, &cfg.hist);
    else if (k == "profile") ok = *v != 0, cfg.profile = v;
    else if (k == "format") {
      if (!strcmp(v, "kv")) cfg.kv = true;
      else if (!strcmp(v, "json")) cfg.kv = false;
      else ok = false;
    } else if (k == "vtype") {
      if (!strcmp(v, "read")) cfg.read_vtype = true;
      else if (!strcmp(v, "track")) cfg.read_vtype = false;
      else ok = false;
    } else {
      fprintf(stderr, "rvvcount: unknown argument '%s'\n", a);
      return -1;
    }
    if (!ok) {
      fprintf(stderr, "rvvcount: bad value in '%s'\n", a);
      return -1;
    }
  }
  if (cfg.vlen == 0) {
    fprintf(stderr, "rvvcount: vlen=BITS is required (the VLEN given to QEMU_CPU)\n");
    return -1;
  }
#if QEMU_PLUGIN_VERSION < 3
  if (cfg.read_vtype) {
    fprintf(stderr, "rvvcount: vtype=read needs plugin API >= 3 (QEMU >= 9)\n");
    return -1;
  }
#endif
  if (cfg.l1_line != cfg.l2_line) {
    fprintf(stderr, "rvvcount: l1 and l2 line sizes must match\n");
    return -1;
  }
  qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
  qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
  qemu_plugin_register_atexit_cb(id, on_exit, nullptr);
  return 0;
}
