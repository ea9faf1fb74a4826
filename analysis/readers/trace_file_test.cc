// The caps that hold before memory is spent: the limits scan in pieces (kineto_json.h), gzip
// checked as it inflates (GunzipIfCompressed) and files read under the caps (trace_file.h).
#include "analysis/readers/trace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/readers/kineto_json.h"
#include "analysis/readers/kineto_reader.h"
#include "common/file_util.h"
#include "common/gzip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"
#include "tests/trace_data.h"

namespace profctl::analysis {
namespace {

using kineto_json::LimitBreach;
using kineto_json::LimitScanner;
using ::profctl::testkit::IsOk;
using ::profctl::testkit::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

using ::profctl::test_data::DataPath;

bool operator==(const LimitBreach& a, const LimitBreach& b) {
  return a.kind == b.kind && a.offset == b.offset && a.line == b.line && a.column == b.column;
}

// A document's breach is the same whether it is scanned whole, in two pieces split anywhere, or
// a byte at a time: escapes, quotes and brackets that straddle a piece's end included.
TEST(LimitScannerTest, PiecesGiveTheBreachOfTheWhole) {
  const std::vector<std::string> docs = {
      absl::StrCat(R"({"a": ")", std::string(40, 'x'), R"("})"),             // long string
      absl::StrCat(R"({"a": ")", std::string(20, 'x'), R"(\"\"\\"} ["])"),   // escapes, ok
      absl::StrCat(R"({"a": ")", std::string(30, 'x'), R"(\\\"\\)", "\"}"),  // 36 bytes
      "{\"a\": [[[[[[\"]]]]]]]]\"]]]]]]}",  // brackets in a string are text
      absl::StrCat(R"({"a": )", std::string(12, '['), std::string(12, ']'), "}"),  // too deep
      absl::StrCat("{\n \"a\":\n  [", std::string(10, '['), "]]"),                 // line 3
      absl::StrCat("{\"b\": \"x\",\n\n  \"a\": \"", std::string(40, 'x'), "\"}"),  // line 3
      absl::StrCat(R"({"k": "\\", "b": ")", std::string(33, 'y')),                 // unterminated
      R"({"traceEvents": [{"name": "\\\\\\\""}]})",
  };
  for (const std::string& doc : docs) {
    const LimitBreach whole = kineto_json::ScanLimits(doc, /*max_depth=*/8,
                                                      /*max_string_bytes=*/32);
    if (whole.kind != LimitBreach::Kind::kNone) {  // its line and column are Position's
      EXPECT_EQ(kineto_json::Position(doc, whole.offset),
                kineto_json::Position(whole.offset, whole.line, whole.column))
          << doc;
    }
    for (size_t split = 0; split <= doc.size(); ++split) {
      LimitScanner two(8, 32);
      two.Feed(absl::string_view(doc).substr(0, split));
      EXPECT_TRUE(two.Feed(absl::string_view(doc).substr(split)) == whole)
          << doc << " split at " << split;
    }
    LimitScanner bytes(8, 32);
    LimitBreach last;
    for (const char c : doc) last = bytes.Feed(absl::string_view(&c, 1));
    EXPECT_TRUE(last == whole) << doc;
  }
  EXPECT_EQ(kineto_json::ScanLimits(docs[0], 8, 32).kind, LimitBreach::Kind::kString);
  EXPECT_EQ(kineto_json::ScanLimits(docs[1], 8, 32).kind, LimitBreach::Kind::kNone);
  EXPECT_EQ(kineto_json::ScanLimits(docs[2], 8, 32).kind, LimitBreach::Kind::kString);
  EXPECT_EQ(kineto_json::ScanLimits(docs[3], 8, 32).kind, LimitBreach::Kind::kNone);
  EXPECT_EQ(kineto_json::ScanLimits(docs[4], 8, 32).kind, LimitBreach::Kind::kDepth);
  EXPECT_EQ(kineto_json::ScanLimits(docs[5], 8, 32).line, 3u);
  EXPECT_EQ(kineto_json::ScanLimits(docs[6], 8, 32).line, 3u);
  EXPECT_EQ(kineto_json::ScanLimits(docs[7], 8, 32).kind, LimitBreach::Kind::kString);
}

// A string is refused once more than the cap of it has been fed, before its end is seen.
TEST(LimitScannerTest, AnOpenStringIsRefusedBeforeItEnds) {
  LimitScanner scanner(/*max_depth=*/8, /*max_string_bytes=*/64);
  EXPECT_EQ(scanner.Feed(R"({"name": ")").kind, LimitBreach::Kind::kNone);
  EXPECT_EQ(scanner.Feed(std::string(64, 'n')).kind, LimitBreach::Kind::kNone);
  const LimitBreach b = scanner.Feed("n");
  EXPECT_EQ(b.kind, LimitBreach::Kind::kString);
  EXPECT_EQ(b.offset, 9u);
}

// `{"traceEvents":[{"name":"` and `n` bytes of one string, gzipped: a bomb of one string.
std::string StringBomb(size_t n) {
  absl::StatusOr<std::string> gz =
      GzipCompress(absl::StrCat(R"({"traceEvents":[{"name":")", std::string(n, 'a')));
  return gz.value_or("");
}

// A gzipped string longer than the string cap is refused by the string cap as it inflates: with
// an inflate cap of 4 MiB, 16 MiB of one string is refused naming the string cap, not the
// inflate cap (the text was checked only after it was all inflated, so the inflate cap hit
// first and a bigger one cost all of it).
TEST(GunzipIfCompressedTest, AStringBombIsRefusedByTheStringCapWhileItInflates) {
  const std::string gz = StringBomb(16 << 20);
  ASSERT_GT(gz.size(), 1000u);
  ReaderOptions options;
  options.max_inflated_bytes = 4 << 20;
  options.max_inflate_ratio = 0;
  options.max_string_bytes = 1024;
  std::string storage;
  absl::StatusOr<absl::string_view> text =
      GunzipIfCompressed(gz, "/logs/bomb.pt.trace.json.gz", &storage, options);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(),
              AllOf(HasSubstr("/logs/bomb.pt.trace.json.gz: Kineto trace of bomb: a string longer "
                              "than 1024 bytes at offset 24 (line 1, column 25)"),
                    HasSubstr("--max-string-kb")));
  // Within every cap, the same bytes inflate whole.
  options.max_string_bytes = 32 << 20;
  options.max_inflated_bytes = 64 << 20;
  text = GunzipIfCompressed(gz, "/logs/bomb.pt.trace.json.gz", &storage, options);
  ASSERT_THAT(text, IsOk());
  EXPECT_EQ(text->size(), (16u << 20) + 25);
}

std::string WriteTemp(const testkit::TempDir& dir, absl::string_view name,
                      absl::string_view bytes) {
  const std::string path = JoinPath(dir.path(), name);
  EXPECT_THAT(WriteFileAtomically(path, bytes), IsOk());
  return path;
}

// A file over the size cap is refused naming it, its size and the flag, before a byte is read:
// a sparse 64 GiB file (no disk, no memory) is refused at once by every reader.
TEST(TraceFileTest, AFileOverTheSizeCapIsRefusedBeforeItIsRead) {
  const testkit::TempDir dir;
  const std::string huge = JoinPath(dir.path(), "huge.pt.trace.json");
  const int fd = open(huge.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, off_t{64} << 30), 0);
  close(fd);
  const ReaderOptions options;  // the default cap, 2 GiB
  const auto refused = [&](const absl::Status& s) {
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(s.message(), AllOf(HasSubstr(huge), HasSubstr("68719476736 bytes (65536.0 MiB)"),
                                   HasSubstr("(2048.0 MiB, --max-file-mb)")));
  };
  refused(ReadKinetoTraceText(huge, options).status());
  refused(ReadTraceFile(huge, options).status());
  refused(CheckTraceFileSize(huge, options));

  // Just over a small cap, and at it.
  const std::string small = WriteTemp(dir, "small.xplane.pb", std::string(4097, 'x'));
  ReaderOptions tight;
  tight.max_file_bytes = 4096;
  EXPECT_EQ(ReadTraceFile(small, tight).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CheckTraceFileSize(small, tight).code(), absl::StatusCode::kResourceExhausted);
  tight.max_file_bytes = 4097;
  EXPECT_THAT(ReadTraceFile(small, tight), IsOk());
  EXPECT_THAT(CheckTraceFileSize(small, tight), IsOk());
  EXPECT_EQ(ReadTraceFile(JoinPath(dir.path(), "none"), tight).status().code(),
            absl::StatusCode::kNotFound);
}

// What is not a regular file is refused by every reader before a byte is read, named with what
// it is: a FIFO named like a trace (a blocking open would wait for a writer forever), a link to
// /dev/zero (it reports 0 bytes and never ends) and a directory. A link to a real trace reads.
TEST(TraceFileTest, OnlyRegularFilesAreReadAndTheRestAreNamed) {
  const testkit::TempDir dir;
  const std::string fifo = JoinPath(dir.path(), "rank0.pt.trace.json");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const std::string zero = JoinPath(dir.path(), "rank1.xplane.pb");
  ASSERT_EQ(symlink("/dev/zero", zero.c_str()), 0);
  const std::string folder = JoinPath(dir.path(), "rank2.xplane.pb");
  ASSERT_THAT(MakeDirs(folder), IsOk());
  const ReaderOptions options;
  for (const auto& [path, what] : std::vector<std::pair<std::string, std::string>>{
           {fifo, ": a FIFO, not a regular file"},
           {zero, ": a character device (/dev/zero, through a symbolic link), not a regular file"},
           {folder, ": a directory, not a regular file"}}) {
    const std::string message = path + what;
    EXPECT_THAT(ReadTraceFile(path, options),
                StatusIs(absl::StatusCode::kInvalidArgument, message));
    EXPECT_THAT(ReadKinetoTraceText(path, options),
                StatusIs(absl::StatusCode::kInvalidArgument, message));
    EXPECT_THAT(CheckTraceFileSize(path, options),
                StatusIs(absl::StatusCode::kInvalidArgument, message));
  }
  const std::string link = JoinPath(dir.path(), "rank3.pt.trace.json");
  ASSERT_EQ(symlink(DataPath("rank3.pt.trace.json").c_str(), link.c_str()), 0);
  EXPECT_THAT(ReadKinetoTraceText(link, options), IsOk());
  EXPECT_THAT(ReadTraceFile(link, options), IsOk());
}

// A trace's text is the same from the plain file and the gzipped one, and reads as a trace.
TEST(TraceFileTest, ReadsPlainAndGzippedTracesAlike) {
  absl::StatusOr<std::string> plain = ReadKinetoTraceText(DataPath("rank3.pt.trace.json"), {});
  absl::StatusOr<std::string> gz = ReadKinetoTraceText(DataPath("rank3.pt.trace.json.gz"), {});
  ASSERT_THAT(plain, IsOk());
  ASSERT_THAT(gz, IsOk());
  EXPECT_EQ(*gz, *plain);
  EXPECT_EQ(*plain, ReadFile(DataPath("rank3.pt.trace.json")).value_or(""));
  EXPECT_THAT(ReadKinetoTraceFile(*gz, DataPath("rank3.pt.trace.json.gz"), 0), IsOk());
}

// Hostile files are refused by the first cap they pass, as they are read: a gzipped string
// bomb of several members by the string cap (its inflate cap, 64 MiB here, is never reached), a
// long string in a plain file by the string cap, zeros by the ratio cap, bad gzip by name.
TEST(TraceFileTest, HostileFilesAreRefusedByTheFirstCapTheyPass) {
  const testkit::TempDir dir;
  const std::string member = StringBomb(16 << 20);
  const std::string bomb =
      WriteTemp(dir, "bomb.pt.trace.json.gz", absl::StrCat(member, member, member));
  ReaderOptions options;
  options.max_inflated_bytes = 64 << 20;
  options.max_inflate_ratio = 0;
  absl::StatusOr<std::string> text = ReadKinetoTraceText(bomb, options);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(),
              AllOf(HasSubstr(absl::StrCat(bomb,
                                           ": Kineto trace of bomb: a string longer than "
                                           "1048576 bytes at offset 24")),
                    HasSubstr("--max-string-kb")));

  const std::string long_string =
      WriteTemp(dir, "long.pt.trace.json",
                absl::StrCat(R"({"traceEvents":[{"name":")", std::string(3 << 20, 'a'), "\"}]}"));
  EXPECT_THAT(ReadKinetoTraceText(long_string, {}).status().message(),
              HasSubstr("long.pt.trace.json: Kineto trace of long: a string longer than 1048576"));

  absl::StatusOr<std::string> zeros = GzipCompress(std::string(1 << 20, '\0'));
  ASSERT_THAT(zeros, IsOk());
  const std::string zeros_file = WriteTemp(dir, "zeros.pt.trace.json.gz", *zeros);
  text = ReadKinetoTraceText(zeros_file, {});  // ratio cap 100
  EXPECT_EQ(text.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(text.status().message(),
              AllOf(HasSubstr(zeros_file), HasSubstr("more than 100 times its"),
                    HasSubstr("--max-inflate-ratio")));

  const std::string bad = WriteTemp(dir, "bad.pt.trace.json.gz", "\x1f\x8bnot really gzip");
  text = ReadKinetoTraceText(bad, {});
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr(absl::StrCat(bad, ": cannot decompress gzip")));
  absl::StatusOr<std::string> rank3 = ReadFile(DataPath("rank3.pt.trace.json.gz"));
  ASSERT_THAT(rank3, IsOk());
  const std::string cut = WriteTemp(dir, "cut.pt.trace.json.gz", rank3->substr(0, 100));
  EXPECT_THAT(std::string(ReadKinetoTraceText(cut, {}).status().message()),
              AllOf(HasSubstr(cut), HasSubstr("truncated")));
}

// A source handing out a text in pieces of 1, 2, 3, ... `max_piece` bytes, round and round.
class Pieces : public KinetoTextSource {
 public:
  Pieces(absl::string_view text, size_t max_piece) : text_(text), max_piece_(max_piece) {}
  absl::StatusOr<absl::string_view> Next() override {
    const size_t n = std::min(text_.size(), next_);
    next_ = next_ % max_piece_ + 1;
    const absl::string_view piece = text_.substr(0, n);
    text_.remove_prefix(n);
    return piece;
  }

 private:
  absl::string_view text_;
  size_t max_piece_;
  size_t next_ = 1;
};

std::string Describe(const absl::StatusOr<HostTrace>& t) {
  if (!t.ok()) return t.status().ToString();
  std::string out = absl::StrCat(t->host, " window ", t->window_start_ns, "-", t->window_end_ns,
                                 " steps ", t->steps.size(), " host ops ", t->host_ops.size());
  for (const StepMarker& s : t->steps) absl::StrAppend(&out, " s", s.step, "@", s.start_ns);
  for (const DeviceTrace& d : t->devices) {
    absl::StrAppend(&out, " ", d.name, ":", d.ops.size());
    for (const Op& op : d.ops) {
      absl::StrAppend(&out, ",", op.start_ns, "+", op.end_ns - op.start_ns, "k",
                      static_cast<int>(op.kind));
    }
  }
  for (const Op& op : t->host_ops) {
    absl::StrAppend(&out, ",", op.start_ns, "k", static_cast<int>(op.kind));
  }
  for (const std::string& w : t->warnings) absl::StrAppend(&out, " | ", w);
  return out;
}

// Text read in pieces, however small and wherever they split it (inside a number, a string, an
// escape), gives what the whole text gives: the trace, its warnings, and a bad document's error
// with its position.
TEST(ReadKinetoTraceFromTest, AnyPiecesReadAsTheWholeText) {
  absl::StatusOr<std::string> real =
      GzipDecompress(ReadFile(DataPath("h100_torch_profiler.pt.trace.json.gz")).value_or(""));
  ASSERT_THAT(real, IsOk());
  absl::StatusOr<std::string> rank3 = ReadFile(DataPath("rank3.pt.trace.json"));
  ASSERT_THAT(rank3, IsOk());
  const std::vector<std::string> docs = {
      *real,
      *rank3,
      rank3->substr(0, rank3->size() / 2),                                     // cut short
      absl::StrCat(rank3->substr(0, 700), "\n  } nope ", rank3->substr(700)),  // bad
      absl::StrCat("{\"traceEvents\": [\n{\"name\": \"", std::string(40, 'x'), "\"}]}"),
      absl::StrCat("{\"traceEvents\":\n", std::string(20, '['), std::string(20, ']'), "}"),
  };
  ReaderOptions options;
  options.max_string_bytes = 32;  // the real trace's longest names are longer: a breach
  for (const ReaderOptions& o : {ReaderOptions{}, options}) {
    for (const std::string& doc : docs) {
      const std::string whole = Describe(ReadKinetoTrace(doc, "h", 0, o));
      for (const size_t max_piece : {size_t{1}, size_t{7}, size_t{4096}}) {
        if (max_piece == 1 && doc.size() > 100'000) continue;  // slow under the sanitizers
        Pieces pieces(doc, max_piece);
        EXPECT_EQ(Describe(ReadKinetoTraceFrom(pieces, "h", 0, o)), whole)
            << "pieces of up to " << max_piece << " bytes of " << doc.substr(0, 60);
      }
    }
  }
  EXPECT_THAT(Describe(ReadKinetoTrace(docs[3], "h", 0, {})), HasSubstr("invalid JSON at offset"));
  EXPECT_THAT(Describe(ReadKinetoTrace(docs[4], "h", 0, options)),
              HasSubstr("a string longer than 32 bytes at offset 27 (line 2, column 10)"));
}

// The file, plain or gzipped, read as it inflates on one thread or two, gives what its bytes
// read whole give.
TEST(ReadKinetoTraceFromPathTest, ReadsAFileAsItsBytesRead) {
  for (const std::string name :
       {"h100_torch_profiler.pt.trace.json.gz", "rank3.pt.trace.json", "rank3.pt.trace.json.gz"}) {
    const std::string path = DataPath(name);
    absl::StatusOr<std::string> bytes = ReadFile(path);
    ASSERT_THAT(bytes, IsOk());
    const std::string whole = Describe(ReadKinetoTraceFile(*bytes, path, 5));
    EXPECT_THAT(whole, Not(HasSubstr("INVALID")));
    for (const int threads : {1, 2}) {
      EXPECT_EQ(Describe(ReadKinetoTraceFromPath(path, 5, {}, threads)), whole) << name;
    }
  }
}

// Hostile files are refused by ReadKinetoTraceFromPath with ReadKinetoTraceText's errors, as
// they inflate, on either thread count; nothing of the text is held.
TEST(ReadKinetoTraceFromPathTest, HostileFilesAreRefusedByTheFirstCapTheyPass) {
  const testkit::TempDir dir;
  const std::string member = StringBomb(16 << 20);
  const std::string bomb =
      WriteTemp(dir, "bomb.pt.trace.json.gz", absl::StrCat(member, member, member));
  absl::StatusOr<std::string> zeros = GzipCompress(std::string(1 << 20, '\0'));
  ASSERT_THAT(zeros, IsOk());
  const std::string zeros_file = WriteTemp(dir, "zeros.pt.trace.json.gz", *zeros);
  const std::string bad = WriteTemp(dir, "bad.pt.trace.json.gz", "\x1f\x8bnot really gzip");
  absl::StatusOr<std::string> rank3 = ReadFile(DataPath("rank3.pt.trace.json.gz"));
  ASSERT_THAT(rank3, IsOk());
  const std::string cut = WriteTemp(dir, "cut.pt.trace.json.gz", rank3->substr(0, 100));
  const std::string huge = JoinPath(dir.path(), "huge.pt.trace.json");
  const int fd = open(huge.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, off_t{64} << 30), 0);
  close(fd);
  ReaderOptions options;
  options.max_inflated_bytes = 64 << 20;
  options.max_inflate_ratio = 0;
  for (const int threads : {1, 2}) {
    absl::Status s = ReadKinetoTraceFromPath(bomb, 0, options, threads).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(),
                AllOf(HasSubstr(absl::StrCat(bomb,
                                             ": Kineto trace of bomb: a string longer than 1048576 "
                                             "bytes at offset 24 (line 1, column 25)")),
                      HasSubstr("--max-string-kb")));
    s = ReadKinetoTraceFromPath(zeros_file, 0, {}, threads).status();  // ratio cap 100
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(s.message(), AllOf(HasSubstr(zeros_file), HasSubstr("more than 100 times its"),
                                   HasSubstr("--max-inflate-ratio")));
    s = ReadKinetoTraceFromPath(bad, 0, {}, threads).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(bad, ": cannot decompress gzip")));
    s = ReadKinetoTraceFromPath(cut, 0, {}, threads).status();
    EXPECT_THAT(s.message(), AllOf(HasSubstr(cut), HasSubstr("truncated")));
    s = ReadKinetoTraceFromPath(huge, 0, {}, threads).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(s.message(), AllOf(HasSubstr(huge), HasSubstr("--max-file-mb")));
  }
}

}  // namespace
}  // namespace profctl::analysis
