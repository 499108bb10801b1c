// Packed weight layout for the packed-W kernels.
//
// A Linear weight W[N, K] (row-major, row stride ldw) is stored as
//   packed[b][k][j] = W[b * nb + j][k]     b < ceil(N / nb), k < K, j < nb
// i.e. ceil(N/nb) blocks, each K rows of nb contiguous elements, the last block padded
// with zeros. A kernel walking k streams one block front to back, and every row of a
// block is one unit-stride vector load along N: the GEMV multiplies it by the scalar x[k]
// (vfmacc.vf), the GEMM by one scalar per row of X. Each weight byte is read once.
//
// Block width nb: the kernels strip-mine every block with vsetvl, so they are correct for
// any nb >= 1 at any VLEN. nb is a performance choice: preferred_nb_for_vlenb() returns
// 2 * vlenb, the VLMAX of e32 at LMUL 8 (64 at VLEN 256), so the GEMV covers a block row
// with one vfmacc.vf and the 6 x m4 GEMM tile (VLMAX = vlenb) with exactly two. A weight
// packed on one machine stays valid on another VLEN; only speed changes. The layout
// descriptor records nb, N, K and dtype, which a kernel checks, and the vlenb/LMUL the nb
// was chosen for, which is informational.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include "rvv_inductor/bf16.h"
#include "rvv_inductor/config.h"
#include "rvv_inductor/error.h"
#include "rvv_inductor/types.h"
#include "rvv_inductor/weight_format.h"

RVV_INDUCTOR_BEGIN_NAMESPACE

// Sizes above this are rejected so that element counts and byte offsets cannot overflow.
constexpr int64_t kMaxDim = int64_t(1) << 31;
// Packed buffers start on a cache line (64 B on the K1's X60 cores).
constexpr size_t kPackedAlignment = 64;

// 2 * vlenb elements = VLMAX for e32 at LMUL 8. Without a vector unit: 64, the K1's value,
// so a weight packed on a host is already in the K1's preferred layout.
inline int64_t preferred_nb_for_vlenb(int vlenb) { return vlenb > 0 ? 2 * int64_t(vlenb) : 64; }

inline int64_t num_blocks(int64_t N, int64_t nb) { return nb > 0 && N >= 0 ? (N + nb - 1) / nb : -1; }

// Elements (uint16_t) of the packed form, or -1 for an invalid shape.
inline int64_t packed_size(int64_t N, int64_t K, int64_t nb) {
  if (N < 0 || K < 0 || nb <= 0 || N > kMaxDim || K > kMaxDim || nb > kMaxDim) return -1;
  const int64_t nblk = num_blocks(N, nb);
  if (nblk > 0 && K > 0 && nblk * nb > (INT64_MAX / 2) / K) return -1;  // keep bytes in range
  return nblk * K * nb;
}

inline PackedLayout make_packed_layout(int64_t N, int64_t K, int64_t nb, int vlenb) {
  PackedLayout l{};
  l.magic = RVV_PACKED_MAGIC;
  l.version = RVV_PACKED_VERSION;
  l.n = N;
  l.k = K;
  l.nb = nb;
  l.num_blocks = num_blocks(N, nb);
  l.elements = packed_size(N, K, nb);
  l.dtype = RVV_DTYPE_BF16;
  l.bytes = l.elements >= 0 ? l.elements * int64_t(sizeof(uint16_t)) : -1;
  l.vlenb = vlenb > 0 ? vlenb : 0;
  // LMUL with VLMAX(e32) == nb at this vlenb, when there is one.
  l.lmul = 0;
  for (int lmul = 1; lmul <= 8 && vlenb > 0; lmul *= 2)
    if (int64_t(lmul) * vlenb / 4 == nb) l.lmul = lmul;
  return l;
}

// Checks that `l` describes a weight of shape [N, K] packed with block width `expected_nb`
// (0: any nb). Rejects anything else with kLayoutMismatch and a message. For the quantized
// formats this checks the fields they share with bf16; validate_layout (quant_packing.h)
// checks everything.
inline Status validate_packed_layout(const PackedLayout& l, int64_t N, int64_t K, int64_t expected_nb,
                                     char* err = nullptr, size_t err_len = 0) {
  const Status bad = Status::kLayoutMismatch;
  if (l.magic != RVV_PACKED_MAGIC)
    return fail(bad, err, err_len, "packed layout: magic 0x%08x is not 0x%08x; not a packed weight descriptor",
                unsigned(l.magic), unsigned(RVV_PACKED_MAGIC));
  if (l.version != RVV_PACKED_VERSION)
    return fail(bad, err, err_len, "packed layout: version %u, this library reads version %u; repack the weight",
                unsigned(l.version), unsigned(RVV_PACKED_VERSION));
  if (!weight_format(DType(l.dtype)))
    return fail(bad, err, err_len, "packed layout: weight format code %d is not one of weight_formats.inl", int(l.dtype));
  if (l.n != N || l.k != K)
    return fail(bad, err, err_len, "packed layout: weight is [N=%lld, K=%lld], the call expects [N=%lld, K=%lld]",
                (long long)l.n, (long long)l.k, (long long)N, (long long)K);
  if (expected_nb > 0 && l.nb != expected_nb)
    return fail(bad, err, err_len,
                "packed layout: block width nb=%lld, the kernel expects nb=%lld; repack the weight with that nb",
                (long long)l.nb, (long long)expected_nb);
  const int64_t elements = packed_size(l.n, l.k, l.nb);
  if (elements < 0 || l.num_blocks != num_blocks(l.n, l.nb) || l.elements != elements ||
      (l.dtype == RVV_DTYPE_BF16 && l.bytes != elements * int64_t(sizeof(uint16_t))))
    return fail(bad, err, err_len,
                "packed layout: inconsistent fields (N=%lld K=%lld nb=%lld num_blocks=%lld elements=%lld)",
                (long long)l.n, (long long)l.k, (long long)l.nb, (long long)l.num_blocks, (long long)l.elements);
  return Status::kOk;
}

// Packs W[N, K] (row stride ldw >= K) into `out`, which holds packed_size(N, K, nb)
// elements. Caller-owned memory, so PyTorch tensors can hold the result.
inline Status pack_bf16(const uint16_t* W, int64_t ldw, int64_t N, int64_t K, int64_t nb, uint16_t* out,
                        char* err = nullptr, size_t err_len = 0) {
  if (packed_size(N, K, nb) < 0)
    return fail(Status::kBadShape, err, err_len, "pack_bf16: invalid N=%lld K=%lld nb=%lld", (long long)N,
                (long long)K, (long long)nb);
  if (ldw < K) return fail(Status::kBadShape, err, err_len, "pack_bf16: ldw=%lld < K=%lld", (long long)ldw, (long long)K);
  if (N * K > 0 && (!W || !out)) return fail(Status::kNullPointer, err, err_len, "pack_bf16: null W or out");
  const int64_t nblk = num_blocks(N, nb);
  for (int64_t b = 0; b < nblk; ++b) {
    uint16_t* blk = out + b * K * nb;
    const int64_t n0 = b * nb;
    const int64_t cols = N - n0 < nb ? N - n0 : nb;
    // Reads W row by row (unit stride) and scatters into the block with stride nb.
    for (int64_t j = 0; j < cols; ++j) {
      const uint16_t* src = W + (n0 + j) * ldw;
      for (int64_t k = 0; k < K; ++k) blk[k * nb + j] = src[k];
    }
    if (cols < nb)
      for (int64_t k = 0; k < K; ++k) std::memset(blk + k * nb + cols, 0, size_t(nb - cols) * sizeof(uint16_t));
  }
  return Status::kOk;
}

template <class T>
inline Status pack_bf16(const T* W, int64_t ldw, int64_t N, int64_t K, int64_t nb, T* out, char* err = nullptr,
                        size_t err_len = 0) {
  return pack_bf16(as_bf16_bits(W), ldw, N, K, nb, as_bf16_bits(out), err, err_len);
}

// Inverse of pack_bf16: writes W[N, K] with row stride ldw.
inline Status unpack_bf16(const uint16_t* packed, const PackedLayout& l, uint16_t* W, int64_t ldw, char* err = nullptr,
                          size_t err_len = 0) {
  const Status s = validate_packed_layout(l, l.n, l.k, 0, err, err_len);
  if (s != Status::kOk) return s;
  if (l.dtype != RVV_DTYPE_BF16)
    return fail(Status::kLayoutMismatch, err, err_len, "unpack_bf16: the layout holds a quantized weight (format %d)",
                int(l.dtype));
  if (ldw < l.k)
    return fail(Status::kBadShape, err, err_len, "unpack_bf16: ldw=%lld < K=%lld", (long long)ldw, (long long)l.k);
  if (l.elements > 0 && (!packed || !W)) return fail(Status::kNullPointer, err, err_len, "unpack_bf16: null pointer");
  for (int64_t n = 0; n < l.n; ++n) {
    const uint16_t* src = packed + (n / l.nb) * l.k * l.nb + n % l.nb;
    for (int64_t k = 0; k < l.k; ++k) W[n * ldw + k] = src[k * l.nb];
  }
  return Status::kOk;
}

// Contiguous, balanced share of `nblocks` blocks for thread `t` of `nthreads`: the first
// nblocks % nthreads threads get one block more. Empty when there are fewer blocks than
// threads. No state, so every thread can compute its own range.
inline BlockRange partition_blocks(int64_t nblocks, int nthreads, int t) {
  if (nblocks <= 0 || nthreads <= 0 || t < 0 || t >= nthreads) return BlockRange{0, 0};
  const int64_t base = nblocks / nthreads, extra = nblocks % nthreads;
  const int64_t begin = t * base + (t < extra ? t : extra);
  return BlockRange{begin, begin + base + (t < extra ? 1 : 0)};
}

// Owning form: a 64-byte aligned packed buffer plus its descriptor.
class PackedWeight {
 public:
  PackedWeight() : layout_() {}

  static Status pack(const uint16_t* W, int64_t ldw, int64_t N, int64_t K, int64_t nb, int vlenb, PackedWeight* out,
                     char* err = nullptr, size_t err_len = 0) {
    if (!out) return fail(Status::kNullPointer, err, err_len, "PackedWeight::pack: null out");
    const int64_t elements = packed_size(N, K, nb);
    if (elements < 0)
      return fail(Status::kBadShape, err, err_len, "PackedWeight::pack: invalid N=%lld K=%lld nb=%lld",
                  (long long)N, (long long)K, (long long)nb);
    // Round up so that an empty weight still has a valid, distinct pointer.
    const size_t bytes = (size_t(elements) * sizeof(uint16_t) + kPackedAlignment - 1) / kPackedAlignment *
                             kPackedAlignment + kPackedAlignment;
    uint16_t* p = static_cast<uint16_t*>(::operator new(bytes, std::align_val_t(kPackedAlignment), std::nothrow));
    if (!p) return fail(Status::kNoMemory, err, err_len, "PackedWeight::pack: cannot allocate %zu bytes", bytes);
    std::unique_ptr<uint16_t[], AlignedDelete> buf(p);
    const Status s = pack_bf16(W, ldw, N, K, nb, p, err, err_len);
    if (s != Status::kOk) return s;
    out->data_ = std::move(buf);
    out->layout_ = make_packed_layout(N, K, nb, vlenb);
    return Status::kOk;
  }

  const uint16_t* data() const { return data_.get(); }
  const PackedLayout& layout() const { return layout_; }
  bool empty() const { return !data_; }
  Status unpack(uint16_t* W, int64_t ldw, char* err = nullptr, size_t err_len = 0) const {
    return unpack_bf16(data_.get(), layout_, W, ldw, err, err_len);
  }

 private:
  struct AlignedDelete {
    void operator()(uint16_t* p) const { ::operator delete(p, std::align_val_t(kPackedAlignment)); }
  };
  std::unique_ptr<uint16_t[], AlignedDelete> data_;
  PackedLayout layout_;
};

RVV_INDUCTOR_END_NAMESPACE
