// LoadTraces on every layout real trace files come in, and on damaged copies of them: the
// eight real AgentX sample files (testdata/weka-sample) as a folder, as single .json files,
// as a JSONL corpus, gzip-compressed, truncated and corrupted.
#include "trace/trace_loader.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trace/reuse_ceiling.h"
#include "trace/trace_files.h"

namespace kvpool::trace {
namespace {

namespace fs = std::filesystem;

const std::string kSample = std::string(KVPOOL_TRACE_TESTDATA) + "/weka-sample";
const std::string kMooncake = std::string(KVPOOL_TRACE_TESTDATA) + "/mooncake-fast25-synthetic.jsonl";

// A fresh folder, removed with everything in it when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "kvpool-trace-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

void WriteGzip(const std::string& path, const std::string& bytes) {
  gzFile out = gzopen(path.c_str(), "wb");
  ASSERT_NE(out, nullptr) << path;
  ASSERT_EQ(gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(out), Z_OK);
}

std::vector<std::string> SampleFiles() {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(kSample))
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// The eight sample traces as JSONL, one compact line each, in file-name order.
std::string SampleAsJsonLines() {
  std::string jsonl;
  for (const std::string& file : SampleFiles()) {
    std::string text = ReadFile(file);
    text.erase(std::remove(text.begin(), text.end(), '\n'), text.end());
    jsonl += text + "\n";
  }
  return jsonl;
}

Corpus LoadOk(const std::string& path, LoadOptions options = {}) {
  Result<Corpus> corpus = LoadTraces(path, std::nullopt, options);
  EXPECT_TRUE(corpus.ok()) << corpus.status().ToString();
  return corpus.ok() ? std::move(corpus).value() : Corpus();
}

size_t Requests(const Corpus& c) {
  size_t n = 0;
  for (const Trace& t : c.traces) n += t.TotalRequestCount();
  return n;
}

TEST(TraceLoader, LoadsTheRealSampleFolder) {
  const Corpus corpus = LoadOk(kSample);  // its README.md is not a trace file
  EXPECT_EQ(corpus.format, TraceFormat::kAgentX);
  ASSERT_EQ(corpus.traces.size(), 8u);
  EXPECT_TRUE(corpus.skipped_invalid.empty());
  EXPECT_EQ(corpus.traces.front().id, "trace_0001");  // name order
  EXPECT_EQ(corpus.traces.back().id, "trace_0504");
  EXPECT_EQ(Requests(corpus), 247u);
  // Pinned: an independent Python walk over the same files gives 231,579 / 251,555 (92.06%).
  const ReuseCeiling ceiling = CorpusReuseCeiling(corpus);
  EXPECT_EQ(ceiling.hit_blocks, 231579);
  EXPECT_EQ(ceiling.total_blocks, 251555);
}

TEST(TraceLoader, EveryLayoutGivesTheSameCorpus) {
  const Corpus folder = LoadOk(kSample);
  TempDir dir;
  const std::string jsonl = SampleAsJsonLines();
  WriteFile(dir / "corpus.jsonl", jsonl);
  WriteGzip(dir / "corpus.jsonl.gz", jsonl);
  EXPECT_EQ(LoadOk(dir / "corpus.jsonl").traces, folder.traces);
  EXPECT_EQ(LoadOk(dir / "corpus.jsonl.gz").traces, folder.traces);

  // One .json file, as published; pretty-printed; gzip-compressed.
  const std::string one = SampleFiles()[6];  // trace_0291: subagents, partial tail blocks
  const Corpus single = LoadOk(one);
  ASSERT_EQ(single.traces.size(), 1u);
  EXPECT_EQ(single.traces[0], folder.traces[6]);
  WriteFile(dir / "pretty.json", nlohmann::json::parse(ReadFile(one)).dump(2));
  WriteGzip(dir / "trace.json.gz", ReadFile(one));
  EXPECT_EQ(LoadOk(dir / "pretty.json").traces, single.traces);
  EXPECT_EQ(LoadOk(dir / "trace.json.gz").traces, single.traces);
}

TEST(TraceLoader, AFolderOfGzippedFilesAndSubfoldersLoadsItsOwnTraceFiles) {
  TempDir dir;
  const std::vector<std::string> files = SampleFiles();
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string name = fs::path(files[i]).filename().string();
    if (i % 2) WriteGzip(dir / (name + ".gz"), ReadFile(files[i]));
    else WriteFile(dir / name, ReadFile(files[i]));
  }
  fs::create_directory(dir.path() / "more.json");  // a folder, even one named like a trace, is not read
  WriteFile(dir / "notes.txt", "not a trace");
  const Corpus corpus = LoadOk(dir.path().string());
  EXPECT_EQ(corpus.traces, LoadOk(kSample).traces);
}

TEST(TraceLoader, AnInvalidTraceIsSkippedWithOneMessageNamingFileTraceRequestAndField) {
  TempDir dir;
  for (const std::string& file : SampleFiles()) fs::copy_file(file, dir.path() / fs::path(file).filename());
  // trace_0058 request 2: cut a block id off hash_ids.
  const std::string victim = dir / "trace_0058.json";
  nlohmann::json doc = nlohmann::json::parse(ReadFile(victim));
  doc["requests"][2]["hash_ids"].erase(doc["requests"][2]["hash_ids"].size() - 1);
  WriteFile(victim, doc.dump());
  WriteFile(dir / "trace_0999.json", "{\"id\": \"trace_0999\", \"models\": [");  // truncated

  const Corpus corpus = LoadOk(dir.path().string());
  EXPECT_EQ(corpus.traces.size(), 7u);
  ASSERT_EQ(corpus.skipped_invalid.size(), 2u);
  const std::string& bad = corpus.skipped_invalid[0];
  EXPECT_NE(bad.find(victim + ": trace 'trace_0058': request 2: 'hash_ids' has"), std::string::npos) << bad;
  EXPECT_NE(bad.find("but floor('in'"), std::string::npos) << bad;
  EXPECT_EQ(bad.find('\n'), std::string::npos) << "one line: " << bad;
  EXPECT_NE(corpus.skipped_invalid[1].find("trace_0999.json: not valid JSON"), std::string::npos)
      << corpus.skipped_invalid[1];

  LoadOptions strict;
  strict.strict = true;
  Result<Corpus> failed = LoadTraces(dir.path().string(), std::nullopt, strict);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), bad);
}

TEST(TraceLoader, ATruncatedOrCorruptedFileLosesOnlyWhatIsDamaged) {
  TempDir dir;
  const std::string jsonl = SampleAsJsonLines();
  const Corpus whole = LoadOk(kSample);

  // Plain JSONL cut in the middle of trace 5's line: traces 1-4 and the rest after it load.
  const size_t fifth = [&] {
    size_t at = 0;
    for (int i = 0; i < 4; ++i) at = jsonl.find('\n', at) + 1;
    return at;
  }();
  WriteFile(dir / "cut.jsonl", jsonl.substr(0, fifth + 1000));
  Corpus cut = LoadOk(dir / "cut.jsonl");
  EXPECT_EQ(cut.traces.size(), 4u);
  ASSERT_EQ(cut.skipped_invalid.size(), 1u);
  EXPECT_NE(cut.skipped_invalid[0].find("cut.jsonl:5: not valid JSON"), std::string::npos) << cut.skipped_invalid[0];

  // A gzip stream cut short: what decompressed before the cut loads, the rest is one
  // skipped entry that says the stream is truncated. Strict makes it the error.
  WriteGzip(dir / "full.jsonl.gz", jsonl);
  const std::string gz = ReadFile(dir / "full.jsonl.gz");
  WriteFile(dir / "truncated.jsonl.gz", gz.substr(0, gz.size() / 2));
  Corpus truncated = LoadOk(dir / "truncated.jsonl.gz");
  EXPECT_LT(truncated.traces.size(), whole.traces.size());
  ASSERT_FALSE(truncated.skipped_invalid.empty());
  EXPECT_NE(truncated.skipped_invalid.back().find("truncated.jsonl.gz: read failed"), std::string::npos)
      << truncated.skipped_invalid.back();
  EXPECT_NE(truncated.skipped_invalid.back().find("truncated"), std::string::npos);
  for (size_t i = 0; i < truncated.traces.size(); ++i) EXPECT_EQ(truncated.traces[i], whole.traces[i]);
  LoadOptions strict;
  strict.strict = true;
  EXPECT_FALSE(LoadTraces(dir / "truncated.jsonl.gz", std::nullopt, strict).ok());

  // Flipped bytes inside the compressed stream: an error or skipped traces, never a crash,
  // and never a trace that differs from the original.
  for (size_t at : {gz.size() / 3, gz.size() / 2, gz.size() - 6}) {
    std::string corrupt = gz;
    corrupt[at] = static_cast<char>(corrupt[at] ^ 0x5a);
    WriteFile(dir / "corrupt.jsonl.gz", corrupt);
    Result<Corpus> c = LoadTraces(dir / "corrupt.jsonl.gz", TraceFormat::kAgentX);
    if (!c.ok()) continue;
    EXPECT_FALSE(c->skipped_invalid.empty()) << "byte " << at;
    for (const Trace& t : c->traces) {
      const auto same =
          std::find_if(whole.traces.begin(), whole.traces.end(), [&](const Trace& w) { return w.id == t.id; });
      ASSERT_NE(same, whole.traces.end());
      EXPECT_EQ(t, *same);
    }
  }
}

TEST(TraceLoader, UnusableInputsAreClearErrors) {
  TempDir dir;
  Result<Corpus> missing = LoadTraces(dir / "nope.jsonl", std::nullopt);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.jsonl"), std::string::npos);

  Result<Corpus> empty_folder = LoadTraces(dir.path().string(), std::nullopt);
  EXPECT_EQ(empty_folder.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty_folder.status().message().find("holds no trace files"), std::string::npos);

  WriteFile(dir / "empty.jsonl", "\n\n");
  EXPECT_FALSE(LoadTraces(dir / "empty.jsonl", std::nullopt).ok());
  WriteFile(dir / "empty.json", "");
  EXPECT_FALSE(LoadTraces(dir / "empty.json", TraceFormat::kAgentX).ok());

  WriteFile(dir / "bad.jsonl", "{\"id\": 7}\n[1]\n");
  Result<Corpus> nothing = LoadTraces(dir / "bad.jsonl", TraceFormat::kAgentX);
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.status().message().find("no loadable traces: 2 skipped as invalid, the first: "),
            std::string::npos)
      << nothing.status().message();

  WriteFile(dir / "what.jsonl", "{\"x\": 1}\n");
  Result<Corpus> unknown = LoadTraces(dir / "what.jsonl", std::nullopt);
  EXPECT_NE(unknown.status().message().find("cannot tell the trace format"), std::string::npos);
}

TEST(TraceLoader, DetectsMooncakeFilesAndKeepsThemToOneFile) {
  EXPECT_EQ(LoadOk(kMooncake).format, TraceFormat::kMooncake);
  TempDir dir;
  WriteGzip(dir / "mooncake.jsonl.gz", ReadFile(kMooncake));
  EXPECT_EQ(LoadOk(dir / "mooncake.jsonl.gz").traces[0].requests.size(), 3993u);
  fs::copy_file(kMooncake, dir.path() / "second.jsonl");
  Result<Corpus> two = LoadTraces(dir.path().string(), TraceFormat::kMooncake);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("a Mooncake trace is one file"), std::string::npos);
}

TEST(TraceLoader, FormatChoices) {
  EXPECT_FALSE(ParseTraceFormatChoice("weka").ok());
  EXPECT_EQ(ParseTraceFormatChoice("agentx").value(), TraceFormat::kAgentX);
  EXPECT_FALSE(ParseTraceFormatChoice("auto").value().has_value());
}

TEST(TraceFiles, LayoutFollowsTheName) {
  EXPECT_EQ(LayoutOfFileName("trace_0001.json"), RecordLayout::kJsonDocument);
  EXPECT_EQ(LayoutOfFileName("trace_0001.json.gz"), RecordLayout::kJsonDocument);
  EXPECT_EQ(LayoutOfFileName("corpus.jsonl.gz"), RecordLayout::kJsonLines);
  EXPECT_EQ(LayoutOfFileName("corpus.txt"), RecordLayout::kJsonLines);
}

}  // namespace
}  // namespace kvpool::trace
