// Packed layout: element placement by the documented formula, zero padding, round trip,
// descriptor validation and the thread partition helper.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "rvv_inductor/packing.h"
#include "test_util.h"

namespace {

using namespace rvv_inductor;

struct Shape {
  int64_t n, k, nb, ldw;
};

TEST(Packing, PlacesEveryElementAndPadsWithZeros) {
  const Shape shapes[] = {{1, 1, 1, 1}, {5, 3, 4, 3}, {64, 7, 64, 9}, {65, 2, 64, 2}, {130, 33, 32, 40}, {3, 5, 7, 5}};
  std::mt19937 rng(1);
  for (const Shape& s : shapes) {
    SCOPED_TRACE("N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) + " nb=" + std::to_string(s.nb));
    std::vector<uint16_t> w(static_cast<size_t>(s.n * s.ldw));
    for (auto& v : w) v = uint16_t(rng() | 1);  // never 0, so padding is recognisable
    const int64_t size = packed_size(s.n, s.k, s.nb);
    ASSERT_EQ(size, (s.n + s.nb - 1) / s.nb * s.k * s.nb);
    std::vector<uint16_t> p(size_t(size), 0xDEAD);
    ASSERT_EQ(pack_bf16(w.data(), s.ldw, s.n, s.k, s.nb, p.data()), Status::kOk);
    for (int64_t b = 0; b * s.nb < s.n; ++b)
      for (int64_t k = 0; k < s.k; ++k)
        for (int64_t j = 0; j < s.nb; ++j) {
          const uint16_t got = p[size_t((b * s.k + k) * s.nb + j)];
          const int64_t n = b * s.nb + j;
          ASSERT_EQ(got, n < s.n ? w[size_t(n * s.ldw + k)] : uint16_t(0)) << "b=" << b << " k=" << k << " j=" << j;
        }
  }
}

TEST(Packing, RoundTripThroughOwningBuffer) {
  std::mt19937 rng(2);
  for (int it = 0; it < 20; ++it) {
    const int64_t n = 1 + rng() % 300, k = 1 + rng() % 200, nb = 1 + rng() % 130, ldw = k + rng() % 5;
    std::vector<uint16_t> w(static_cast<size_t>(n * ldw));
    for (auto& v : w) v = uint16_t(rng());
    PackedWeight pw;
    ASSERT_EQ(PackedWeight::pack(w.data(), ldw, n, k, nb, 32, &pw), Status::kOk);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pw.data()) % kPackedAlignment, 0u);
    const PackedLayout& l = pw.layout();
    EXPECT_EQ(l.magic, RVV_PACKED_MAGIC);
    EXPECT_EQ(l.n, n);
    EXPECT_EQ(l.k, k);
    EXPECT_EQ(l.nb, nb);
    EXPECT_EQ(l.num_blocks, (n + nb - 1) / nb);
    EXPECT_EQ(l.elements, packed_size(n, k, nb));
    EXPECT_EQ(l.dtype, RVV_DTYPE_BF16);
    std::vector<uint16_t> back(size_t(n * ldw), 0);
    ASSERT_EQ(pw.unpack(back.data(), ldw), Status::kOk);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) ASSERT_EQ(back[size_t(r * ldw + c)], w[size_t(r * ldw + c)]);
  }
}

TEST(Packing, LayoutRecordsTheVectorShapeItWasChosenFor) {
  // nb = 2 * vlenb is VLMAX at e32 LMUL 8 (64 elements at VLEN 256).
  EXPECT_EQ(preferred_nb_for_vlenb(32), 64);
  EXPECT_EQ(preferred_nb_for_vlenb(16), 32);
  EXPECT_EQ(preferred_nb_for_vlenb(0), 64);
  EXPECT_EQ(make_packed_layout(10, 10, 64, 32).lmul, 8);
  EXPECT_EQ(make_packed_layout(10, 10, 32, 32).lmul, 4);
  EXPECT_EQ(make_packed_layout(10, 10, 48, 32).lmul, 0);
  EXPECT_EQ(make_packed_layout(10, 10, 64, 32).vlenb, 32);
}

TEST(Packing, ValidationRejectsEveryMismatch) {
  const PackedLayout good = make_packed_layout(100, 50, 64, 32);
  char err[256];
  ASSERT_EQ(validate_packed_layout(good, 100, 50, 64, err, sizeof err), Status::kOk) << err;
  ASSERT_EQ(validate_packed_layout(good, 100, 50, 0, err, sizeof err), Status::kOk) << "nb 0 accepts any nb";
  struct Case {
    const char* what;
    PackedLayout l;
    int64_t n, k, nb;
    const char* in_message;
  };
  std::vector<Case> cases;
  PackedLayout l = good;
  l.magic ^= 1;
  cases.push_back({"magic", l, 100, 50, 64, "magic"});
  l = good;
  l.version = 99;
  cases.push_back({"version", l, 100, 50, 64, "version"});
  l = good;
  l.dtype = RVV_DTYPE_F32;
  cases.push_back({"dtype", l, 100, 50, 64, "weight format"});
  cases.push_back({"N", good, 101, 50, 64, "N=100"});
  cases.push_back({"K", good, 100, 49, 64, "K=50"});
  cases.push_back({"nb", good, 100, 50, 32, "nb=64"});
  l = good;
  l.num_blocks = 1;
  cases.push_back({"num_blocks", l, 100, 50, 64, "inconsistent"});
  l = good;
  l.elements -= 1;
  cases.push_back({"elements", l, 100, 50, 64, "inconsistent"});
  l = good;
  l.nb = 0;
  cases.push_back({"nb 0", l, 100, 50, 0, "inconsistent"});
  for (const Case& c : cases) {
    err[0] = '\0';
    EXPECT_EQ(validate_packed_layout(c.l, c.n, c.k, c.nb, err, sizeof err), Status::kLayoutMismatch) << c.what;
    EXPECT_NE(std::string(err).find(c.in_message), std::string::npos) << c.what << ": " << err;
  }
}

TEST(Packing, RejectsInvalidArguments) {
  uint16_t buf[16] = {};
  EXPECT_EQ(packed_size(-1, 4, 4), -1);
  EXPECT_EQ(packed_size(4, -1, 4), -1);
  EXPECT_EQ(packed_size(4, 4, 0), -1);
  EXPECT_EQ(packed_size(kMaxDim + 1, 4, 4), -1);
  EXPECT_EQ(packed_size(0, 4, 4), 0);
  EXPECT_EQ(pack_bf16(buf, 4, 2, 4, 0, buf), Status::kBadShape);
  EXPECT_EQ(pack_bf16(buf, 3, 2, 4, 2, buf), Status::kBadShape) << "ldw < K";
  EXPECT_EQ(pack_bf16(static_cast<const uint16_t*>(nullptr), 4, 2, 4, 2, buf), Status::kNullPointer);
  PackedWeight pw;
  EXPECT_EQ(PackedWeight::pack(buf, 4, 2, 4, -3, 0, &pw), Status::kBadShape);
  EXPECT_TRUE(pw.empty());
}

TEST(Packing, PartitionCoversEachBlockExactlyOnce) {
  for (int64_t blocks : {0, 1, 5, 64, 2374}) {
    for (int threads : {1, 2, 3, 8, 100}) {
      int64_t next = 0, smallest = blocks, largest = 0;
      for (int t = 0; t < threads; ++t) {
        const BlockRange r = partition_blocks(blocks, threads, t);
        ASSERT_EQ(r.begin, next) << "contiguous, in order";
        ASSERT_LE(r.begin, r.end);
        next = r.end;
        smallest = std::min(smallest, r.end - r.begin);
        largest = std::max(largest, r.end - r.begin);
      }
      EXPECT_EQ(next, blocks);
      EXPECT_LE(largest - smallest, 1) << "balanced";
    }
  }
  EXPECT_EQ(partition_blocks(10, 2, 2).end, 0) << "thread id out of range gets nothing";
}

}  // namespace
