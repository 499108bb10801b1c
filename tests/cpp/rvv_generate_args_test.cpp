// rvv-generate's argument parsing and the checks it makes before loading a package
// (tools/rvv_generate/args.cpp): every bad input is a one-line error, never a crash.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "args.h"

using namespace rvv_generate;

namespace {

std::string parse(std::vector<const char*> args, Options* o) {
  args.insert(args.begin(), "rvv-generate");
  return parse_args(static_cast<int>(args.size()), args.data(), o);
}

std::string temp_file(const std::string& name, const std::string& bytes) {
  std::string path = ::testing::TempDir() + "/rvvgen_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

rvv_cpu_features cpu(int v, int vlen, int zvfh = 0) {
  rvv_cpu_features f{};
  f.is_riscv64 = 1;
  f.has_v = v;
  f.vlenb = v ? vlen / 8 : 0;
  f.has_zvfh = zvfh;
  return f;
}

std::map<std::string, std::string> good_meta() {
  return {{"rvv_format", "rvv-inductor-aoti/1"}, {"rvv_march", "rv64gcv"}, {"rvv_vlen", "256"},
          {"rvv_max_cache_len", "32"}, {"rvv_vocab_size", "256"}, {"rvv_eos_token_ids", "2,7"}};
}

}  // namespace

TEST(RvvGenerateArgs, ParsesEverything) {
  Options o;
  ASSERT_EQ(parse({"m.pt2", "--prompt-ids", "1,2,30", "--max-new-tokens=5", "--threads", "2",
                   "--dump-logits", "l.bin", "--ignore-eos", "--region", "3"}, &o), "");
  EXPECT_EQ(o.package, "m.pt2");
  EXPECT_EQ(o.prompt_ids, (std::vector<int64_t>{1, 2, 30}));
  EXPECT_EQ(o.max_new_tokens, 5);
  EXPECT_EQ(o.threads, 2);
  EXPECT_EQ(o.dump_logits, "l.bin");
  EXPECT_TRUE(o.ignore_eos);
  EXPECT_EQ(o.region, 3);
  EXPECT_TRUE(o.feed_ids.empty());
  EXPECT_FALSE(o.tokenwise_prefill);
  ASSERT_EQ(parse({"m.pt2", "--prompt-ids", "1", "--region", "1", "--prefill-region", "3"}, &o), "");
  EXPECT_EQ(o.region, 1);
  EXPECT_EQ(o.prefill_region, 3);
  EXPECT_NE(parse({"m.pt2", "--prompt-ids", "1", "--region", "2", "--prefill-region", "2"}, &o).find("must differ"),
            std::string::npos);
  EXPECT_NE(parse({"m.pt2", "--prompt-ids", "1", "--prefill-region", "5"}, &o).find("--prefill-region"), std::string::npos);
  ASSERT_EQ(parse({"m.pt2", "--prompt-ids", "1", "--tokenwise-prefill"}, &o), "");
  EXPECT_TRUE(o.tokenwise_prefill);
  EXPECT_NE(parse({"m.pt2", "--prompt-ids", "1", "--tokenwise-prefill=1"}, &o).find("takes no value"), std::string::npos);
  ASSERT_EQ(parse({"--help"}, &o), "");
  EXPECT_TRUE(o.help);
}

TEST(RvvGenerateArgs, FeedIdsFixTheDecodeSteps) {
  Options o;
  // Three fed ids: three decode steps, four new tokens (the first comes from the prompt).
  ASSERT_EQ(parse({"m.pt2", "--prompt-ids", "1,2", "--feed-ids", "7,0,9"}, &o), "");
  EXPECT_EQ(o.feed_ids, (std::vector<int64_t>{7, 0, 9}));
  EXPECT_EQ(o.max_new_tokens, 4);
  ASSERT_EQ(parse({"m.pt2", "--feed-ids=5", "--max-new-tokens", "2", "--prompt-ids", "1"}, &o), "");
  EXPECT_EQ(o.max_new_tokens, 2);
  std::string err = parse({"m.pt2", "--prompt-ids", "1", "--feed-ids", "5,6", "--max-new-tokens", "5"}, &o);
  EXPECT_NE(err.find("--max-new-tokens must be 3, not 5"), std::string::npos) << err;
  err = parse({"m.pt2", "--prompt-ids", "1", "--feed-ids", "5,x"}, &o);
  EXPECT_NE(err.find("--feed-ids: 'x' is not a token id"), std::string::npos) << err;
  err = parse({"m.pt2", "--prompt-ids", "1", "--feed-ids", ""}, &o);
  EXPECT_NE(err.find("--feed-ids: no token ids"), std::string::npos) << err;
}

TEST(RvvGenerateArgs, BadArgumentsAreOneLineErrors) {
  const std::vector<std::pair<std::vector<const char*>, std::string>> cases = {
      {{}, "no package given"},
      {{"m.pt2"}, "--prompt-ids is required"},
      {{"m.pt2", "--prompt-ids"}, "--prompt-ids needs a value"},
      {{"m.pt2", "--prompt-ids", "1,x"}, "'x' is not a token id"},
      {{"m.pt2", "--prompt-ids", "1,,2"}, "'' is not a token id"},
      {{"m.pt2", "--prompt-ids", "-3"}, "'-3' is not a token id"},
      {{"m.pt2", "--prompt-ids", ""}, "no token ids"},
      {{"m.pt2", "--prompt-ids", "1", "--max-new-tokens", "0"}, "--max-new-tokens: '0'"},
      {{"m.pt2", "--prompt-ids", "1", "--threads", "two"}, "--threads: 'two'"},
      {{"m.pt2", "--prompt-ids", "1", "--bogus"}, "unknown option --bogus"},
      {{"m.pt2", "--prompt-ids", "1", "--region", "5"}, "--region: '5'"},
      {{"a.pt2", "b.pt2", "--prompt-ids", "1"}, "more than one package"},
  };
  for (const auto& [args, want] : cases) {
    Options o;
    const std::string err = parse(args, &o);
    EXPECT_NE(err.find(want), std::string::npos) << "got '" << err << "', want '" << want << "'";
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
}

TEST(RvvGenerateArgs, FileErrors) {
  EXPECT_NE(check_package_file("/nonexistent/m.pt2").find("No such file"), std::string::npos);
  EXPECT_NE(check_package_file(::testing::TempDir()).find("is a directory"), std::string::npos);
  const std::string text = temp_file("text.pt2", "hello, not a zip");
  EXPECT_NE(check_package_file(text).find("not a .pt2 package"), std::string::npos);
  const std::string empty = temp_file("empty.pt2", "");
  EXPECT_NE(check_package_file(empty).find("not a .pt2 package"), std::string::npos);
  const std::string zip = temp_file("zip.pt2", std::string("PK\x03\x04rest", 8));
  EXPECT_EQ(check_package_file(zip), "");
  std::remove(text.c_str());
  std::remove(empty.c_str());
  std::remove(zip.c_str());
}

TEST(RvvGenerateArgs, Metadata) {
  PackageNeeds n;
  ASSERT_EQ(read_needs(good_meta(), &n), "");
  EXPECT_EQ(n.march, "rv64gcv");
  EXPECT_EQ(n.vlen, 256);
  EXPECT_EQ(n.max_cache_len, 32);
  EXPECT_EQ(n.vocab_size, 256);
  EXPECT_EQ(n.eos_ids, (std::vector<int64_t>{2, 7}));
  auto m = good_meta();
  m.erase("rvv_format");
  EXPECT_NE(read_needs(m, &n).find("not a package made by"), std::string::npos);
  m = good_meta();
  m["rvv_format"] = "rvv-inductor-aoti/0";
  EXPECT_NE(read_needs(m, &n).find("export it again"), std::string::npos);
  m = good_meta();
  m["rvv_max_cache_len"] = "lots";
  EXPECT_NE(read_needs(m, &n).find("rvv_max_cache_len"), std::string::npos);
  // rvv_prefill_chunk: absent (a package without a prefill model) is 0; 1 and more than the
  // cache are not chunks.
  ASSERT_EQ(read_needs(good_meta(), &n), "");
  EXPECT_EQ(n.prefill_chunk, 0);
  m = good_meta();
  m["rvv_prefill_chunk"] = "16";
  ASSERT_EQ(read_needs(m, &n), "");
  EXPECT_EQ(n.prefill_chunk, 16);
  for (const char* bad : {"1", "33", "-4", "x"}) {
    m["rvv_prefill_chunk"] = bad;
    EXPECT_NE(read_needs(m, &n).find("rvv_prefill_chunk"), std::string::npos) << bad;
  }
  // rvv_prefill_pads: absent (older packages) is false; only 0 and 1.
  m = good_meta();
  ASSERT_EQ(read_needs(m, &n), "");
  EXPECT_FALSE(n.prefill_pads);
  m["rvv_prefill_pads"] = "1";
  ASSERT_EQ(read_needs(m, &n), "");
  EXPECT_TRUE(n.prefill_pads);
  m["rvv_prefill_pads"] = "yes";
  EXPECT_NE(read_needs(m, &n).find("rvv_prefill_pads"), std::string::npos);
}

// A package whose prefill model pads runs a prompt shorter than a chunk as one call of the
// prompt's rows (when the chunk fits the cache); otherwise the calls are the chunk starts.
TEST(RvvGenerateArgs, PrefillCallsPadShortPrompts) {
  for (size_t P = 1; P <= 40; ++P)
    for (int C : {4, 16}) {
      const auto with = prefill_calls(P, C, true, 32), without = prefill_calls(P, C, false, 32);
      const auto starts = prefill_chunk_starts(P, C);
      ASSERT_EQ(without.size(), starts.size());
      for (size_t i = 0; i < starts.size(); ++i) EXPECT_TRUE(without[i].start == starts[i] && without[i].rows == C);
      if (P < static_cast<size_t>(C)) {
        ASSERT_EQ(with.size(), 1u) << P << " " << C;
        EXPECT_EQ(with[0].start, 0);
        EXPECT_EQ(with[0].rows, static_cast<int64_t>(P));
      } else {
        ASSERT_EQ(with.size(), starts.size());
        for (size_t i = 0; i < starts.size(); ++i) EXPECT_TRUE(with[i].start == starts[i] && with[i].rows == C);
      }
    }
  EXPECT_TRUE(prefill_calls(3, 64, true, 32).empty());  // the chunk does not fit the cache
  EXPECT_TRUE(prefill_calls(3, 0, true, 32).empty());
}

TEST(RvvGenerateArgs, PrefillChunks) {
  using V = std::vector<int64_t>;
  // Every prompt position is covered, each chunk lies inside the prompt, the calls are as
  // few as ceil(P / C), and a prompt shorter than a chunk (or no prefill model) has none.
  EXPECT_EQ(prefill_chunk_starts(8, 4), (V{0, 4}));
  EXPECT_EQ(prefill_chunk_starts(5, 4), (V{0, 1}));
  EXPECT_EQ(prefill_chunk_starts(4, 4), (V{0}));
  EXPECT_EQ(prefill_chunk_starts(3, 4), V{});
  EXPECT_EQ(prefill_chunk_starts(100, 0), V{});
  EXPECT_EQ(prefill_chunk_starts(100, 1), V{});
  for (size_t P = 1; P <= 70; ++P)
    for (int C : {2, 3, 16}) {
      const V s = prefill_chunk_starts(P, C);
      if (P < static_cast<size_t>(C)) { EXPECT_TRUE(s.empty()); continue; }
      EXPECT_EQ(s.size(), (P + C - 1) / C) << P << " " << C;
      std::vector<int> covered(P, 0);
      for (int64_t st : s) {
        ASSERT_GE(st, 0);
        ASSERT_LE(st + C, static_cast<int64_t>(P));
        for (int i = 0; i < C; ++i) covered[st + i] = 1;
      }
      for (size_t i = 0; i < P; ++i) EXPECT_EQ(covered[i], 1) << P << " " << C << " " << i;
      EXPECT_EQ(s.back() + C, static_cast<int64_t>(P));  // the last chunk ends the prompt
    }
}

TEST(RvvGenerateArgs, IsaRefusals) {
  PackageNeeds n;
  ASSERT_EQ(read_needs(good_meta(), &n), "");
  EXPECT_EQ(check_isa(n, cpu(1, 256)), "");
  EXPECT_NE(check_isa(n, cpu(0, 0)).find("no V extension"), std::string::npos);
  EXPECT_NE(check_isa(n, cpu(1, 128)).find("VLEN 128"), std::string::npos);
  rvv_cpu_features x86{};
  EXPECT_NE(check_isa(n, x86).find("not a riscv64 CPU"), std::string::npos);
  n.march = "rv64gcv_zvfh";
  EXPECT_NE(check_isa(n, cpu(1, 256, 0)).find("lacks zvfh"), std::string::npos);
  EXPECT_EQ(check_isa(n, cpu(1, 256, 1)), "");
}

TEST(RvvGenerateArgs, Lengths) {
  int n = 10;
  std::string note;
  EXPECT_NE(check_lengths(33, 32, &n, &note).find("longer than the package's KV cache (32"), std::string::npos);
  EXPECT_NE(check_lengths(0, 32, &n, &note).find("empty prompt"), std::string::npos);
  n = 10;
  EXPECT_EQ(check_lengths(4, 32, &n, &note), "");
  EXPECT_EQ(n, 10);
  EXPECT_EQ(note, "");
  n = 10;
  EXPECT_EQ(check_lengths(30, 32, &n, &note), "");
  EXPECT_EQ(n, 3);  // positions 30 and 31 for tokens 2 and 3
  EXPECT_NE(note.find("generating 3 tokens"), std::string::npos);
  n = 5;
  EXPECT_EQ(check_lengths(32, 32, &n, &note), "");
  EXPECT_EQ(n, 1);
}
