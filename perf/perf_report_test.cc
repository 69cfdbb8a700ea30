#include "perf/perf_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <tuple>

namespace braid::perf {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(PerfReport, HeaderLine) {
  Expected<PerfOptions> o = parsePerfOptions({"-b", "8", "-e", "64M", "-f", "2", "-t", "2"});
  ASSERT_TRUE(o.ok());
  const std::vector<std::string> h = lines(formatHeader(o.value()));
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0],
            "# nThread 2 nGpus 1 minBytes 8 maxBytes 67108864 step: 2(factor) warmup iters: 5 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0");
  EXPECT_EQ(h[1], "#");
  o = parsePerfOptions({"-i", "4K", "-c", "0", "-z", "1", "--algo", "ring"});
  ASSERT_TRUE(o.ok());
  const std::string text = formatHeader(o.value());
  EXPECT_NE(text.find("step: 4096(bytes)"), std::string::npos);
  EXPECT_NE(text.find("validation: 0"), std::string::npos);
  EXPECT_NE(text.find("# Blocking Enabled"), std::string::npos);
  EXPECT_NE(text.find("# Algorithm: ring"), std::string::npos);
  EXPECT_EQ(text.find("# Device calls"), std::string::npos);  // host buffers
}

TEST(PerfReport, HeaderSaysHowDeviceCallsWereTimed) {
  for (const auto& [args, says, graph] :
       {std::tuple<std::vector<std::string>, const char*, const char*>{
            {"--device"}, "# Device calls: stream", "graph: 0"},
        {{"--device", "-G", "1"}, "# Device calls: graph", "graph: 1"},
        {{"--device", "--sync-each-call"}, "# Device calls: each call", "graph: 0"}}) {
    Expected<PerfOptions> o = parsePerfOptions(args);
    ASSERT_TRUE(o.ok());
    const std::string text = formatHeader(o.value());
    EXPECT_NE(text.find(says), std::string::npos) << text;
    EXPECT_NE(text.find(graph), std::string::npos) << text;
  }
}

TEST(PerfReport, RankBlock) {
  const std::vector<std::string> r = lines(formatRanks({{0, 1234, "node1"}, {1, 1235, "node1"}}));
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], "# Using devices");
  EXPECT_EQ(r[1], "#  Rank  0 Group  0 Pid   1234 on      node1 device -1 [host]");
  EXPECT_EQ(r[2], "#  Rank  1 Group  0 Pid   1235 on      node1 device -1 [host]");
  EXPECT_EQ(r[3], "#");
}

TEST(PerfReport, ColumnsLineUp) {
  const std::vector<std::string> h = lines(formatColumnHeader());
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[1],
            "#       size         count      type   redop    root     time   algbw   busbw #wrong"
            "     time   algbw   busbw #wrong");
  EXPECT_NE(h[0].find("out-of-place"), std::string::npos);
  EXPECT_NE(h[0].find("in-place"), std::string::npos);
  EXPECT_EQ(h[2].substr(0, 26), "#        (B)    (elements)");

  const std::string row = formatRowPrefix(8, 2, "float", "sum", -1) +
                          formatPlacement(11.534, {0.000694, 0.001041}, 0) +
                          formatPlacement(1234.56, {12.5, 18.75}, std::nullopt);
  EXPECT_EQ(row,
            "           8             2     float     sum      -1    11.53    0.00    0.00      0"
            "   1234.6   12.50   18.75    N/A");
  EXPECT_EQ(row.size(), h[1].size());
  // Every column ends where its header ends.
  for (const char* name : {"size", "count", "type", "redop", "root"}) {
    const size_t end = h[1].find(name) + std::string(name).size();
    EXPECT_NE(row[end - 1], ' ') << name;
    EXPECT_EQ(row[end], ' ') << name;
  }
}

TEST(PerfReport, TimeFormat) {
  EXPECT_EQ(formatTime(1.234), "   1.23");
  EXPECT_EQ(formatTime(123.75), "  123.8");
  EXPECT_EQ(formatTime(12345.6), "  12346");
  EXPECT_EQ(formatTime(99.999).size(), 7u);
}

TEST(PerfReport, Summary) {
  EXPECT_EQ(formatSummary(0, 1.5),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.5\n#\n");
  EXPECT_EQ(lines(formatSummary(3, 0.25))[0], "# Out of bounds values : 3 FAILED");
  BusBwAverage avg;
  EXPECT_EQ(avg.value(), 0.0);
  avg.add(1.0);
  avg.add(2.0);
  EXPECT_DOUBLE_EQ(avg.value(), 1.5);
}

TEST(PerfReport, AlgorithmColumns) {
  const std::vector<std::string> algos = {"ring", "recursive_doubling"};
  const std::vector<std::string> h = lines(formatAlgoColumnHeader(algos));
  ASSERT_EQ(h.size(), 3u);
  const std::string row =
      formatRowPrefix(1024, 256, "float", "sum", -1) + formatAlgoCells(algos, {1.25, 3.5}, 0);
  EXPECT_EQ(row.size(), h[1].size());
  EXPECT_EQ(row.size(), h[2].size());
  const size_t ringEnd = h[1].find("ring") + 4;
  EXPECT_EQ(row.substr(ringEnd - 4, 4), "1.25");
  const size_t rdEnd = h[1].find("recursive_doubling") + 18;
  EXPECT_EQ(row.substr(rdEnd - 4, 4), "3.50");
  EXPECT_NE(formatAlgoCells(algos, {1, 2}, std::nullopt).find("N/A"), std::string::npos);
  const std::vector<std::string> s = lines(formatAlgoSummary(0, algos, {1.25, 2.5}));
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[1], "# Avg bus bandwidth    : 1.25 (ring)");
  EXPECT_EQ(s[2], "# Avg bus bandwidth    : 2.5 (recursive_doubling)");
}

TEST(PerfReport, TunerColumnsLineUpWithTheHeader) {
  const std::vector<std::string> algos = {"ring", "rd"};
  const std::vector<std::string> h = lines(formatAlgoColumnHeader(algos, true));
  ASSERT_EQ(h.size(), 3u);
  const std::string row = formatRowPrefix(1024, 256, "float", "sum", -1) +
                          formatAlgoCells(algos, {1.25, 3.5}, 0, TunerCell{"rd", 0.125});
  EXPECT_EQ(row.size(), h[1].size());
  EXPECT_EQ(row.size(), h[2].size());
  EXPECT_EQ(row.substr(h[1].find("tuner") - 3, 8), "      rd");
  EXPECT_EQ(row.substr(row.size() - 4), "12.5");
  // Without the tuner the row is as before.
  EXPECT_EQ(lines(formatAlgoColumnHeader(algos))[1].size(),
            (formatRowPrefix(1, 1, "float", "sum", -1) + formatAlgoCells(algos, {1, 2}, 0)).size());
}

TEST(PerfReport, RegretKeepsTheFastestOfTheCycles) {
  RegretSummary r;
  // Two algorithms; the tuner picks the second. First cycle: 10 vs 12 (20% regret); the second
  // cycle measures the first algorithm slower (15) and the second faster (11): fastest of the
  // cycles are 10 and 11, 10% regret.
  r.add("1024", {10, 12}, 1);
  r.add("4096", {20, 20}, 0);
  r.add("1024", {15, 11}, 1);
  EXPECT_EQ(r.rows(), 2u);
  EXPECT_NEAR(r.regret("1024"), 0.10, 1e-12);
  EXPECT_NEAR(r.regret("4096"), 0.0, 1e-12);
  EXPECT_NEAR(r.max(), 0.10, 1e-12);
  EXPECT_NEAR(r.geometricMean(), std::sqrt(1.1) - 1.0, 1e-12);
  r.setLabels({"ring", "rd"});
  const std::string text = r.format("Tuner regret", 0.05);
  EXPECT_NE(text.find("over 2 sizes"), std::string::npos) << text;
  EXPECT_NE(text.find("geometric mean 4.9%, max 10.0% (size 1024)"), std::string::npos) << text;
  EXPECT_NE(text.find("the choice was the fastest at 1"), std::string::npos) << text;
  EXPECT_NE(text.find("#   size 1024: regret 10.0% (chose rd 11 us, fastest ring 10 us)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("size 4096: regret"), std::string::npos) << text;
  EXPECT_NE(RegretSummary().format().find("no sizes"), std::string::npos);
}

TEST(PerfReport, TuneVariantsAndTheRangesTheyMake) {
  const std::vector<std::string> algorithms = {"ring", "tree", "rd"};
  const std::vector<uint32_t> chunks = {32 << 10, 128 << 10, 512 << 10};
  const std::vector<int> channels = {1, 2, 4};
  const std::vector<TuneVariant> all = tuneVariants(algorithms, chunks, channels, 512 << 10, 4);
  // Every algorithm x 3 chunks x 3 channel counts, in that order.
  ASSERT_EQ(all.size(), algorithms.size() * 9);
  EXPECT_EQ(all[0].label(), "ring/32K/1");
  EXPECT_EQ(all[1].label(), "ring/32K/2");
  EXPECT_EQ(all[3].label(), "ring/128K/1");
  EXPECT_EQ(all[9].label(), "tree/32K/1");
  EXPECT_EQ(tuneVariants(algorithms, chunks, channels, 128 << 10, 2).size(), algorithms.size() * 4);
  EXPECT_EQ(TuneVariant({"ring", 128 << 10, 2}).label(), "ring/128K/2");
  EXPECT_EQ(TuneVariant({"rd", 1000, 1}).label(), "rd/1000/1");

  const std::vector<TuneVariant> v = {
      {"direct", 32 << 10, 1}, {"ring", 512 << 10, 2}, {"tree", 128 << 10, 4}};
  TuneRecorder rec(v);
  // 8 B and 64 B: direct; 4 KiB: ring (its first measurement was slower, the second not);
  // 1 MiB: ring; 64 MiB: tree.
  for (uint64_t bytes : {uint64_t{8}, uint64_t{64}}) {
    rec.record(bytes, 0, 5);
    rec.record(bytes, 1, 9);
    rec.record(bytes, 2, 12);
  }
  rec.record(4096, 0, 20);
  rec.record(4096, 1, 25);
  rec.record(4096, 1, 18);
  rec.record(1 << 20, 1, 300);
  rec.record(1 << 20, 2, 320);
  rec.record(64 << 20, 1, 9000);
  rec.record(64 << 20, 2, 8000);
  EXPECT_EQ(rec.best(4096).first, 1u);
  EXPECT_DOUBLE_EQ(rec.best(4096).second, 18);
  EXPECT_DOUBLE_EQ(rec.time(4096, 1), 18);
  EXPECT_LT(rec.time(4096, 2), 0);
  const std::vector<TuneRange> e = rec.entries();
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].variant.algorithm, "direct");
  EXPECT_EQ(e[0].minBytes, 0u);
  EXPECT_EQ(e[0].maxBytes, 512u);  // the geometric mean of 64 and 4096
  EXPECT_FALSE(e[0].toInf);
  EXPECT_EQ(e[1].variant.algorithm, "ring");
  EXPECT_EQ(e[1].variant.chunkBytes, 512u << 10);
  EXPECT_EQ(e[1].variant.nchannels, 2);
  EXPECT_EQ(e[1].minBytes, 512u);
  EXPECT_EQ(e[1].maxBytes, 8u << 20);  // between 1 MiB and 64 MiB
  EXPECT_DOUBLE_EQ(e[1].timeUs, 300);
  EXPECT_EQ(e[2].variant.algorithm, "tree");
  EXPECT_EQ(e[2].minBytes, 8u << 20);
  EXPECT_TRUE(e[2].toInf);
}

TEST(PerfReport, TheTableKeepsAVariantWhileItIsWithinTheToleranceOfTheFastest) {
  const std::vector<TuneVariant> v = {
      {"rd", 32 << 10, 1}, {"rd", 512 << 10, 1}, {"tree", 128 << 10, 2}};
  TuneRecorder rec(v);
  // Up to 4 KiB the two rd variants are the same plan and trade places by noise; at 64 KiB rd/32K
  // is 10% slower than rd/512K, at 1 MiB tree is fastest.
  const double ahead = 1 + TuneRecorder::kTolerance / 2;
  for (uint64_t bytes : {uint64_t{8}, uint64_t{64}, uint64_t{4096}}) {
    const bool flip = bytes == 64;
    rec.record(bytes, 0, flip ? 2 * ahead : 2);
    rec.record(bytes, 1, flip ? 2 : 2 * ahead);
    rec.record(bytes, 2, 6);
  }
  rec.record(64 << 10, 0, 11);
  rec.record(64 << 10, 1, 10);
  rec.record(64 << 10, 2, 12);
  rec.record(1 << 20, 1, 200);
  rec.record(1 << 20, 2, 150);
  EXPECT_EQ(rec.best(64).first, 1u);  // the fastest as measured
  const std::vector<TuneRange> e = rec.entries();
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].variant.chunkBytes, 32u << 10);  // 8 B - 4 KiB: one entry, rd/32K
  EXPECT_EQ(e[0].maxBytes, 16u << 10);
  EXPECT_DOUBLE_EQ(e[0].timeUs, 2);
  EXPECT_EQ(e[1].variant.algorithm, "rd");  // 64 KiB: rd/32K is 10% behind, beyond the tolerance
  EXPECT_EQ(e[1].variant.chunkBytes, 512u << 10);
  EXPECT_EQ(e[2].variant.algorithm, "tree");
}

TEST(PerfReport, TuneRowsLineUpWithTheHeader) {
  const std::vector<std::string> h = lines(formatTuneColumnHeader());
  ASSERT_EQ(h.size(), 2u);
  const std::string row = formatRowPrefix(1024, 256, "float", "sum", -1) +
                          formatTuneCells("ring/128K/2", 10.0, "rd/32K/1", 12.5);
  EXPECT_EQ(row.size(), h[0].size());
  EXPECT_EQ(row.substr(row.size() - 4), "25.0");
  EXPECT_NE(formatTuneCells("ring/128K/2", 10.0, "rd/32K/1", -1).find(" -"), std::string::npos);
}

TEST(PerfReport, EnvHelpListsEveryVariable) {
  const std::vector<EnvVariableHelp> vars = {
      {"BRAID_DEBUG", "WARN", "log level"},
      {"BRAID_LONG_VARIABLE_NAME", "", "unset by default"},
      {"BRAID_X", "a-long-default", "a default wider than the column"}};
  const std::string text = formatEnvHelp(vars);
  for (const EnvVariableHelp& v : vars) {
    const size_t at = text.find("  " + v.name + " ");
    ASSERT_NE(at, std::string::npos) << v.name;
    const std::string line = text.substr(at, text.find('\n', at) - at);
    EXPECT_NE(line.find(v.doc), std::string::npos) << v.name;
    EXPECT_NE(line.find(v.defaultText.empty() ? std::string("(unset)") : v.defaultText),
              std::string::npos)
        << v.name;
  }
  // The columns line up: every doc starts where the header's "meaning" does.
  const std::vector<std::string> l = lines(text);
  ASSERT_EQ(l.size(), 6u);  // the title, a blank line, the column header, the variables
  const size_t meaning = l[2].find("meaning");
  EXPECT_EQ(l[3].find("log level"), meaning);
  EXPECT_EQ(l[4].find("unset by default"), meaning);
  EXPECT_EQ(l[5].find("a default wider"), meaning);
}

TEST(PerfReport, JsonEscapes) {
  EXPECT_EQ(jsonString("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST(PerfReport, JsonDocument) {
  Expected<PerfOptions> o = parsePerfOptions({"allgather", "-n", "3"});
  ASSERT_TRUE(o.ok());
  JsonReport report(o.value(), 4, 2);
  EXPECT_NE(report.document().find("\"measurements\": []"), std::string::npos);
  report.add(
      {"allgather", "ring", "float", "none", -1, 1024, 64, 4, 12.5, 0.08192, 0.06144, 0, false});
  report.add(
      {"allgather", "auto", "half", "none", -1, 2048, 256, 4, NAN, 0, 0, std::nullopt, true});
  const std::string doc = report.document();
  EXPECT_NE(doc.find("\"collective\": \"allgather\""), std::string::npos);
  EXPECT_NE(doc.find("\"nranks\": 4"), std::string::npos);
  EXPECT_NE(doc.find("\"nprocs\": 2"), std::string::npos);
  EXPECT_NE(doc.find("\"iters\": 3"), std::string::npos);
  EXPECT_NE(
      doc.find("{\"collective\": \"allgather\", \"algorithm\": \"ring\", \"dtype\": \"float\", "
               "\"op\": \"none\", \"root\": -1, \"size\": 1024, \"count\": 64, \"nranks\": 4, "
               "\"time_us\": 12.5, \"algbw\": 0.08192, \"busbw\": 0.06144, \"wrong\": 0, "
               "\"in_place\": false}"),
      std::string::npos)
      << doc;
  EXPECT_NE(doc.find("\"time_us\": null"), std::string::npos);
  EXPECT_NE(doc.find("\"wrong\": null, \"in_place\": true}"), std::string::npos);
  // Braces and brackets balance, and measurements are comma separated.
  int depth = 0;
  for (char c : doc) {
    depth += (c == '{' || c == '[') ? 1 : (c == '}' || c == ']') ? -1 : 0;
    ASSERT_GE(depth, 0);
  }
  EXPECT_EQ(depth, 0);
  EXPECT_NE(doc.find("},\n    {"), std::string::npos);

  const std::string path = ::testing::TempDir() + "perf_report_test.json";
  ASSERT_TRUE(report.writeFile(path).ok());
  std::ifstream in(path);
  std::stringstream read;
  read << in.rdbuf();
  EXPECT_EQ(read.str(), doc);
  std::remove(path.c_str());
  EXPECT_FALSE(report.writeFile("/nonexistent-dir/x.json").ok());
}

}  // namespace
}  // namespace braid::perf
