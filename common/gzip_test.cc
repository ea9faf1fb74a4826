#include "common/gzip.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"

using ::profctl::testkit::IsOk;

namespace profctl {
namespace {

using ::testing::HasSubstr;

// Names in `dir`, without "." and "..".
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  return names;
}

int64_t FileSize(absl::string_view path) {
  struct stat st {};
  return stat(std::string(path).c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// Deterministic bytes that deflate cannot shrink (splitmix64).
std::string Incompressible(size_t n, uint64_t seed) {
  std::string out(n, '\0');
  uint64_t x = seed;
  for (char& c : out) {
    x += 0x9e3779b97f4a7c15ULL;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    c = static_cast<char>((z ^ (z >> 31)) >> 56);
  }
  return out;
}

// A gzip bomb: 1 MiB of zeros is ~1 KB compressed; with a 64 KiB limit it is refused, naming it,
// before more than the limit is held.
TEST(GzipDecompressTest, RefusesToInflatePastItsLimit) {
  const std::string zeros(1 << 20, '\0');
  absl::StatusOr<std::string> gz = GzipCompress(zeros);
  ASSERT_THAT(gz, IsOk());
  EXPECT_LT(gz->size(), 8u << 10);
  absl::StatusOr<std::string> small = GzipDecompress(*gz, 64 << 10);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(small.status().message(), ::testing::HasSubstr("more than 65536 bytes"));
  absl::StatusOr<std::string> exact = GzipDecompress(*gz, zeros.size());
  ASSERT_THAT(exact, IsOk());
  EXPECT_EQ(*exact, zeros);
}

// The ratio cap: 1 MiB of zeros (~1 KB of gzip, a ratio near 1000) is refused at 10x its
// compressed size, the message naming the ratio; a generous ratio takes it whole.
TEST(GzipDecompressTest, RefusesToInflatePastTheRatioCap) {
  const std::string zeros(1 << 20, '\0');
  absl::StatusOr<std::string> gz = GzipCompress(zeros);
  ASSERT_THAT(gz, IsOk());
  absl::StatusOr<std::string> bomb = GzipDecompress(*gz, /*max_output_bytes=*/1 << 30,
                                                    /*max_ratio=*/10);
  EXPECT_EQ(bomb.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(bomb.status().message(),
              ::testing::HasSubstr(absl::StrCat("more than 10 times its ", gz->size())));
  EXPECT_THAT(bomb.status().message(), ::testing::HasSubstr("inflate ratio cap"));
  // The absolute cap still binds when it is the tighter one.
  absl::StatusOr<std::string> abs = GzipDecompress(*gz, /*max_output_bytes=*/4096,
                                                   /*max_ratio=*/10);
  EXPECT_THAT(abs.status().message(), ::testing::HasSubstr("more than 4096 bytes"));
  absl::StatusOr<std::string> whole = GzipDecompress(*gz, /*max_output_bytes=*/1 << 30,
                                                     /*max_ratio=*/100000);
  ASSERT_THAT(whole, IsOk());
  EXPECT_EQ(whole->size(), zeros.size());
}

// Fed a byte at a time or whole, the inflater hands over the same text in chunks of at most
// kGzipInflateChunkBytes; two concatenated members (`cat a.gz b.gz`) give both texts, and bytes
// after the last member that start no other are ignored, as gzip(1) does.
TEST(GzipInflaterTest, InflatesPiecesAndMembersInChunks) {
  std::string text;
  for (int i = 0; i < 40000; ++i) absl::StrAppend(&text, "{\"event\": ", i, "},\n");
  absl::StatusOr<std::string> a = GzipCompress(text);
  absl::StatusOr<std::string> b = GzipCompress("second member");
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  const std::string stream = *a + *b + "trailing junk";
  for (const size_t piece : {size_t{1}, size_t{4093}, stream.size()}) {
    GzipInflater inflater;
    std::string out;
    size_t largest = 0;
    const auto sink = [&](absl::string_view chunk) {
      largest = std::max(largest, chunk.size());
      out.append(chunk.data(), chunk.size());
      return absl::OkStatus();
    };
    for (size_t at = 0; at < stream.size(); at += piece) {
      ASSERT_THAT(inflater.Feed(absl::string_view(stream).substr(at, piece), sink), IsOk());
    }
    ASSERT_THAT(inflater.Finish(), IsOk());
    EXPECT_EQ(out, text + "second member") << "pieces of " << piece;
    EXPECT_EQ(inflater.bytes_out(), out.size());
    EXPECT_LE(largest, kGzipInflateChunkBytes);
  }
  EXPECT_EQ(*GzipDecompress(stream), text + "second member");
}

// The sink's error stops inflating at once (a cap is enforced by the sink); a stream cut inside
// a member is DATA_LOSS at Finish; bytes that are not gzip are DATA_LOSS at Feed.
TEST(GzipInflaterTest, StopsAtTheSinksErrorAndReportsTruncation) {
  absl::StatusOr<std::string> gz = GzipCompress(std::string(64 << 20, 'a'));  // ~64 KB
  ASSERT_THAT(gz, IsOk());
  GzipInflater inflater;
  int calls = 0;
  const absl::Status s = inflater.Feed(*gz, [&](absl::string_view) {
    return ++calls == 3 ? absl::ResourceExhaustedError("enough") : absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(calls, 3);
  EXPECT_LE(inflater.bytes_out(), 3 * kGzipInflateChunkBytes);
  EXPECT_EQ(inflater.Feed("more", [](absl::string_view) { return absl::OkStatus(); }).code(),
            absl::StatusCode::kResourceExhausted);  // sticky

  GzipInflater cut;
  const auto ok = [](absl::string_view) { return absl::OkStatus(); };
  ASSERT_THAT(cut.Feed(absl::string_view(*gz).substr(0, gz->size() / 2), ok), IsOk());
  EXPECT_EQ(cut.Finish().code(), absl::StatusCode::kDataLoss);

  GzipInflater junk;
  EXPECT_EQ(junk.Feed("\x1f\x8b not gzip at all", ok).code(), absl::StatusCode::kDataLoss);
}

// A file's first bytes of gzip give the start of its text, whatever follows; bytes that are not
// gzip are DATA_LOSS.
TEST(GzipInflatePrefixTest, GivesTheStartOfTheTextFromTheStartOfTheStream) {
  std::string text;
  for (int i = 0; i < 20000; ++i) absl::StrAppend(&text, "{\"event\": ", i, "},\n");
  absl::StatusOr<std::string> gz = GzipCompress(text);
  ASSERT_THAT(gz, IsOk());
  ASSERT_GT(gz->size(), 8192u);
  absl::StatusOr<std::string> head = GzipInflatePrefix(gz->substr(0, 4096), 1000);
  ASSERT_THAT(head, IsOk());
  EXPECT_EQ(*head, text.substr(0, 1000));
  EXPECT_EQ(GzipInflatePrefix("\x1f\x8b not gzip at all", 100).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(Crc32Test, IsZlibsCrc32AndContinues) {
  EXPECT_EQ(Crc32(0, "123456789"), 0xCBF43926u);  // the CRC-32/ISO-HDLC check value
  EXPECT_EQ(Crc32(Crc32(0, "1234"), "56789"), 0xCBF43926u);
  EXPECT_EQ(Crc32(0, ""), 0u);
}

TEST(GzipFileWriterTest, RoundTripsManyAppendsAndLeavesNoTemporaries) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.trace.json.gz");
  absl::StatusOr<GzipFileWriter> w = GzipFileWriter::Open(path);
  ASSERT_THAT(w, IsOk());
  std::string all;
  for (int i = 0; i < 5000; ++i) {
    const std::string piece = absl::StrCat("{\"event\":", i, "}\n");
    ASSERT_THAT(w->Append(piece), IsOk());
    all += piece;
  }
  ASSERT_THAT(w->Append(""), IsOk());
  EXPECT_FALSE(PathExists(path));  // nothing visible before Finish
  ASSERT_THAT(w->Finish(), IsOk());
  EXPECT_EQ(w->bytes_in(), static_cast<int64_t>(all.size()));
  EXPECT_EQ(w->bytes_out(), FileSize(path));

  absl::StatusOr<std::string> gz = ReadFile(path);
  ASSERT_THAT(gz, IsOk());
  EXPECT_EQ(*GzipDecompress(*gz), all);
  EXPECT_THAT(Entries(tmp.path()), ::testing::ElementsAre("pod.trace.json.gz"));
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);

  EXPECT_EQ(w->Append("x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(w->Finish().code(), absl::StatusCode::kFailedPrecondition);
}

// Pieces deflated on other threads and text appended here interleave into one gzip member
// (a reader that stops at the first member's end, as zlib's inflate does, would lose anything after
// a second header). The same text in every part: back-references must not cross a part's start.
TEST(GzipFileWriterTest, PiecesDeflatedElsewhereJoinTheOneMember) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "joined.gz");
  std::string text;
  for (int i = 0; i < 20000; ++i) absl::StrAppend(&text, "{\"name\":\"kernel_", i % 7, "\"},\n");
  std::vector<absl::StatusOr<DeflatedPiece>> pieces(3, absl::UnknownError("not yet"));
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      PieceDeflater d(t == 0 ? kGzipFastLevel : kGzipDefaultLevel);
      d.Append(text.substr(0, 1000));
      d.Append(text.substr(1000));  // in parts, as a renderer's buffer flushes
      pieces[t] = d.Take();
    });
  }
  for (std::thread& t : threads) t.join();
  PieceDeflater reused;
  EXPECT_EQ(reused.Take()->size, 0u);  // nothing appended: an empty piece
  reused.Append("tail");
  absl::StatusOr<DeflatedPiece> tail = reused.Take();
  ASSERT_THAT(tail, IsOk());
  EXPECT_EQ(tail->size, 4u);
  EXPECT_EQ(tail->crc, Crc32(0, "tail"));

  absl::StatusOr<GzipFileWriter> w = GzipFileWriter::Open(path, kGzipFastLevel);
  ASSERT_THAT(w, IsOk());
  std::string want;
  for (int t = 0; t < 3; ++t) {
    ASSERT_THAT(pieces[t], IsOk()) << pieces[t].status();
    EXPECT_EQ(pieces[t]->size, text.size());
    EXPECT_LT(pieces[t]->bytes.size(), text.size() / 10);
    ASSERT_THAT(w->Append(text), IsOk());
    ASSERT_THAT(w->AppendDeflated(*pieces[t]), IsOk());
    want += text + text;
  }
  ASSERT_THAT(w->AppendDeflated(DeflatedPiece{}), IsOk());
  ASSERT_THAT(w->AppendDeflated(*tail), IsOk());
  ASSERT_THAT(w->Append("end"), IsOk());
  want += "tailend";
  ASSERT_THAT(w->Finish(), IsOk());
  EXPECT_EQ(w->bytes_in(), static_cast<int64_t>(want.size()));
  absl::StatusOr<std::string> back = GzipDecompress(*ReadFile(path));
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->size(), want.size());
  EXPECT_TRUE(*back == want);
  EXPECT_EQ(GzipFileWriter::Open(path + ".bad", /*level=*/42).status().code(),
            absl::StatusCode::kInvalidArgument);
  PieceDeflater bad(42);
  bad.Append("x");
  EXPECT_EQ(bad.Take().status().code(), absl::StatusCode::kInternal);
}

// Deflaters one after another on a thread share one zlib state (a deflater per saved host must
// not allocate and free zlib's 256 KiB each time), and a reused state makes exactly the bytes a
// new one makes, even after a deflater was dropped halfway through a piece.
TEST(GzipFileWriterTest, DeflatersOnAThreadReuseOneStateAndMakeTheSameBytes) {
  std::string text;
  for (int i = 0; i < 5000; ++i) absl::StrAppend(&text, "{\"ts\":", i * 37, ",\"k\":", i % 5, "}");
  std::thread([&] {
    const auto piece = [&](int level) {
      PieceDeflater d(level);
      d.Append(text);
      return *d.Take();
    };
    const DeflatedPiece first = piece(kGzipDefaultLevel);
    EXPECT_EQ(PieceDeflater::StatesCreatedOnThisThread(), 1);
    {
      PieceDeflater dropped(kGzipDefaultLevel);
      dropped.Append(text.substr(0, text.size() / 2));  // never taken
    }
    for (int i = 0; i < 5; ++i) {
      const DeflatedPiece again = piece(kGzipDefaultLevel);
      EXPECT_EQ(again.bytes, first.bytes);
      EXPECT_EQ(again.crc, first.crc);
    }
    EXPECT_EQ(PieceDeflater::StatesCreatedOnThisThread(), 1);
    // Another level gets a state of its own; one that zlib refuses is not cached.
    const DeflatedPiece fast = piece(kGzipFastLevel);
    EXPECT_NE(fast.bytes, first.bytes);
    EXPECT_EQ(PieceDeflater::StatesCreatedOnThisThread(), 2);
    {
      PieceDeflater bad(42);
      bad.Append("x");
      EXPECT_FALSE(bad.Take().ok());
    }
    EXPECT_EQ(piece(kGzipDefaultLevel).bytes, first.bytes);
    EXPECT_EQ(piece(kGzipFastLevel).bytes, fast.bytes);
    EXPECT_EQ(PieceDeflater::StatesCreatedOnThisThread(), 2);
    // Two alive at once on one thread: the second makes a state of its own.
    PieceDeflater a(kGzipDefaultLevel), b(kGzipDefaultLevel);
    EXPECT_EQ(PieceDeflater::StatesCreatedOnThisThread(), 3);
  }).join();
  // And a reused state's piece is a valid part of a gzip file.
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "reused.gz");
  absl::StatusOr<GzipFileWriter> w = GzipFileWriter::Open(path);
  ASSERT_THAT(w, IsOk());
  for (int i = 0; i < 3; ++i) {
    PieceDeflater d;
    d.Append(text);
    absl::StatusOr<DeflatedPiece> p = d.Take();
    ASSERT_THAT(p, IsOk());
    ASSERT_THAT(w->AppendDeflated(*p), IsOk());
  }
  ASSERT_THAT(w->Finish(), IsOk());
  EXPECT_TRUE(*GzipDecompress(*ReadFile(path)) == text + text + text);
}

TEST(GzipFileWriterTest, EmptyFileIsAValidGzipStream) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "empty.gz");
  absl::StatusOr<GzipFileWriter> w = GzipFileWriter::Open(path);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(w->Finish(), IsOk());
  EXPECT_EQ(*GzipDecompress(*ReadFile(path)), "");
}

TEST(GzipFileWriterTest, LargeInputStreamsToDiskWithBoundedMemory) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "big.gz");
  absl::StatusOr<GzipFileWriter> w = GzipFileWriter::Open(path);
  ASSERT_THAT(w, IsOk());
  constexpr size_t kChunk = 16 << 10;
  constexpr int kChunks = 2048;  // 32 MiB
  std::string expected;
  expected.reserve(kChunk * kChunks);
  for (int i = 0; i < kChunks; ++i) {
    const std::string chunk = Incompressible(kChunk, static_cast<uint64_t>(i) + 1);
    ASSERT_THAT(w->Append(chunk), IsOk());
    expected += chunk;
    if (i == kChunks / 2) {
      // Half the input is already on disk in the temporary file, not held in memory: what is
      // not written yet is bounded by zlib's window and the output buffer.
      const int64_t on_disk = FileSize(w->temp_path());
      EXPECT_GE(on_disk, static_cast<int64_t>(expected.size()) - (512 << 10));
      EXPECT_FALSE(PathExists(path));
    }
  }
  ASSERT_THAT(w->Finish(), IsOk());
  absl::StatusOr<std::string> gz = ReadFile(path);
  ASSERT_THAT(gz, IsOk());
  absl::StatusOr<std::string> back = GzipDecompress(*gz);
  ASSERT_THAT(back, IsOk());
  EXPECT_TRUE(*back == expected);  // not EXPECT_EQ: no 32 MiB diff on failure
  EXPECT_EQ(Entries(tmp.path()).size(), 1u);
}

TEST(GzipFileWriterTest, OpenInAMissingFolderNamesThePath) {
  absl::StatusOr<GzipFileWriter> w = GzipFileWriter::Open("/nonexistent/dir/pod.trace.json.gz");
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(w.status().message(), HasSubstr("/nonexistent/dir/pod.trace.json.gz"));
}

TEST(GzipFileWriterTest, UnfinishedWriterLeavesNothingAndKeepsTheOldFile) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "t.gz");
  ASSERT_THAT(WriteFileAtomically(path, "old contents"), IsOk());
  {
    absl::StatusOr<GzipFileWriter> w = GzipFileWriter::Open(path);
    ASSERT_THAT(w, IsOk());
    ASSERT_THAT(w->Append(Incompressible(1 << 20, 3)), IsOk());
    // Moving keeps one owner of the temporary file.
    GzipFileWriter moved = *std::move(w);
    EXPECT_TRUE(PathExists(std::string(moved.temp_path())));
    EXPECT_EQ(Entries(tmp.path()).size(), 2u);
  }  // destroyed without Finish
  EXPECT_THAT(Entries(tmp.path()), ::testing::ElementsAre("t.gz"));
  EXPECT_EQ(*ReadFile(path), "old contents");
}

// Makes write() fail with EFBIG past `limit` bytes for this process while in scope.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t limit) {
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // else the kernel kills the process
    getrlimit(RLIMIT_FSIZE, &old_);
    rlimit lower = old_;
    lower.rlim_cur = limit;
    ok_ = setrlimit(RLIMIT_FSIZE, &lower) == 0;
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  bool ok() const { return ok_; }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
  bool ok_ = false;
};

TEST(GzipFileWriterTest, FailedWriteLeavesNoFileAndTheErrorSticks) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "full.gz");
  absl::StatusOr<GzipFileWriter> w = GzipFileWriter::Open(path);
  ASSERT_THAT(w, IsOk());
  const std::string temp(w->temp_path());
  absl::Status failed;
  {
    FileSizeLimit limit(/*limit=*/256 << 10);  // as a full disk would, after 256 KiB
    ASSERT_THAT(limit, IsOk());
    for (int i = 0; i < 64 && failed.ok(); ++i) failed = w->Append(Incompressible(64 << 10, i + 1));
  }
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  EXPECT_THAT(failed.message(), HasSubstr(path));
  EXPECT_THAT(failed.message(), HasSubstr("cannot write"));
  EXPECT_FALSE(PathExists(temp));  // removed at once
  EXPECT_EQ(w->Append("more"), failed);
  EXPECT_EQ(w->Finish(), failed);
  EXPECT_FALSE(PathExists(path));
  EXPECT_TRUE(Entries(tmp.path()).empty());
}

TEST(GzipFileWriterTest, FailedRenameLeavesTheTargetUntouched) {
  const testkit::TempDir tmp;
  // The target is a folder: refused when opened, and when it appears while the file is written.
  const std::string path = JoinPath(tmp.path(), "taken");
  ASSERT_THAT(MakeDirs(JoinPath(path, "inside")), IsOk());
  EXPECT_THAT(GzipFileWriter::Open(path).status().message(),
              HasSubstr(path + ": a directory, not a regular file: not replaced"));
  ASSERT_EQ(rename(path.c_str(), (path + ".aside").c_str()), 0);
  absl::StatusOr<GzipFileWriter> w = GzipFileWriter::Open(path);
  ASSERT_THAT(w, IsOk());
  ASSERT_EQ(rename((path + ".aside").c_str(), path.c_str()), 0);
  ASSERT_THAT(w->Append("data"), IsOk());
  const absl::Status s = w->Finish();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(path + ": a directory, not a regular file: not replaced"));
  EXPECT_THAT(Entries(tmp.path()), ::testing::ElementsAre("taken"));  // temporary removed
  EXPECT_THAT(Entries(path), ::testing::ElementsAre("inside"));
  EXPECT_EQ(w->Finish(), s);
}

}  // namespace
}  // namespace profctl
