#include "common/file_util.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <string>

#include "common/gzip.h"
#include "common/json_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"

using ::profctl::testkit::IsOk;
using ::profctl::testkit::StatusIs;
using ::testing::HasSubstr;

namespace profctl {
namespace {

int CountEntries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

TEST(FileUtilTest, AtomicWriteReplacesWholeFileAndLeavesNoTemporaries) {
  const testkit::TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string path = JoinPath(dir, "a.pb");
  ASSERT_THAT(WriteFileAtomically(path, "first version"), IsOk());
  ASSERT_THAT(WriteFileAtomically(path, "second"), IsOk());
  EXPECT_EQ(*ReadFile(path), "second");
  EXPECT_EQ(CountEntries(dir), 1);
}

// Inputs: a regular file (also through a symbolic link) is read; a FIFO (no writer: a blocking
// open would hang), a directory and a link to a character device are refused unopened, each
// named with what it is.
TEST(FileUtilTest, ReadsOnlyRegularFilesAndNamesWhatElseIsThere) {
  const testkit::TempDir tmp;
  const std::string file = JoinPath(tmp.path(), "a.xplane.pb");
  ASSERT_THAT(WriteFileAtomically(file, "bytes"), IsOk());
  const std::string to_file = JoinPath(tmp.path(), "link.xplane.pb");
  ASSERT_EQ(symlink(file.c_str(), to_file.c_str()), 0);
  EXPECT_EQ(*ReadFile(file), "bytes");
  EXPECT_EQ(*ReadFile(to_file), "bytes");
  EXPECT_THAT(OpenRegularFile(to_file), IsOk());

  const std::string fifo = JoinPath(tmp.path(), "fifo.xplane.pb");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const std::string to_zero = JoinPath(tmp.path(), "zero.xplane.pb");
  ASSERT_EQ(symlink("/dev/zero", to_zero.c_str()), 0);
  const std::string dir = JoinPath(tmp.path(), "dir.xplane.pb");
  ASSERT_THAT(MakeDirs(dir), IsOk());
  EXPECT_THAT(ReadFile(fifo),
              StatusIs(absl::StatusCode::kInvalidArgument, fifo + ": a FIFO, not a regular file"));
  EXPECT_THAT(
      ReadFile(to_zero, /*max_bytes=*/1 << 20),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          to_zero +
              ": a character device (/dev/zero, through a symbolic link), not a regular file"));
  EXPECT_THAT(ReadFile(dir), StatusIs(absl::StatusCode::kInvalidArgument,
                                      dir + ": a directory, not a regular file"));
  EXPECT_THAT(OpenRegularFile(fifo).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ReadFile(JoinPath(tmp.path(), "none")), StatusIs(absl::StatusCode::kNotFound));
}

// A cap counts the bytes read, not the size a file reports: /proc files report 0 bytes.
TEST(FileUtilTest, ACapCountsTheBytesReadNotTheReportedSize) {
  struct stat st {};
  ASSERT_EQ(stat("/proc/self/status", &st), 0);
  ASSERT_EQ(st.st_size, 0);
  absl::StatusOr<std::string> whole = ReadFile("/proc/self/status");
  ASSERT_THAT(whole, IsOk());
  ASSERT_GT(whole->size(), 64u);
  EXPECT_THAT(ReadFile("/proc/self/status", /*max_bytes=*/64, "a test file may hold"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       ::testing::MatchesRegex("/proc/self/status: at least [0-9]+ bytes, more "
                                               "than a test file may hold \\(64 bytes\\)")));
  // A regular file's reported size refuses it before a byte is read; at the cap it is read.
  const testkit::TempDir tmp;
  const std::string file = JoinPath(tmp.path(), "f");
  ASSERT_THAT(WriteFileAtomically(file, std::string(100, 'x')), IsOk());
  EXPECT_THAT(ReadFile(file, /*max_bytes=*/99, "the cap"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       file + ": 100 bytes, more than the cap (99 bytes)"));
  EXPECT_THAT(ReadFile(file, /*max_bytes=*/100), IsOk());
}

// Outputs: a regular file we may write is replaced; a FIFO, a directory, a symbolic link (to a
// file or to a device) and a read-only file are refused, named, and left exactly as they were,
// with no temporary file beside them.
TEST(FileUtilTest, WritesReplaceOnlyARegularFileWeMayWrite) {
  const testkit::TempDir tmp;
  const std::string file = JoinPath(tmp.path(), "out.html");
  ASSERT_THAT(WriteFileAtomically(file, "old"), IsOk());
  ASSERT_THAT(CheckReplaceable(file), IsOk());
  ASSERT_THAT(WriteFileAtomically(file, "new"), IsOk());
  EXPECT_EQ(*ReadFile(file), "new");
  EXPECT_THAT(CheckReplaceable(JoinPath(tmp.path(), "absent.html")), IsOk());

  const std::string fifo = JoinPath(tmp.path(), "fifo.html");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const std::string dir = JoinPath(tmp.path(), "dir.html");
  ASSERT_THAT(MakeDirs(dir), IsOk());
  const std::string to_file = JoinPath(tmp.path(), "link.html");
  ASSERT_EQ(symlink(file.c_str(), to_file.c_str()), 0);
  const std::string to_null = JoinPath(tmp.path(), "null.html");
  ASSERT_EQ(symlink("/dev/null", to_null.c_str()), 0);
  const std::string read_only = JoinPath(tmp.path(), "ro.html");
  ASSERT_THAT(WriteFileAtomically(read_only, "keep"), IsOk());
  ASSERT_EQ(chmod(read_only.c_str(), 0444), 0);
  const int entries = CountEntries(tmp.path());

  EXPECT_THAT(WriteFileAtomically(fifo, "x"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       fifo + ": a FIFO, not a regular file: not replaced"));
  EXPECT_THAT(WriteFileAtomically(dir, "x"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       dir + ": a directory, not a regular file: not replaced"));
  EXPECT_THAT(
      WriteFileAtomically(to_file, "x"),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               to_file + ": a symbolic link (to " + file + "), not a regular file: not replaced"));
  EXPECT_THAT(WriteFileAtomically(to_null, "x"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(": a symbolic link (to /dev/null), not a regular file")));
  EXPECT_THAT(WriteFileAtomically(read_only, "x"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       read_only + ": a read-only file (mode 0444): not replaced"));

  struct stat st {};
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(lstat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  ASSERT_EQ(lstat(to_file.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  ASSERT_EQ(lstat(to_null.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(*ReadFile(file), "new");
  EXPECT_EQ(*ReadFile(read_only), "keep");
  EXPECT_EQ(CountEntries(tmp.path()), entries);  // no temporary file left

  // A device node itself (made where the test may: as root, on a file system that allows it).
  const std::string device = JoinPath(tmp.path(), "null-device");
  if (mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    EXPECT_THAT(WriteFileAtomically(device, "x"),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         device + ": a character device, not a regular file: not replaced"));
    ASSERT_EQ(lstat(device.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
  }
}

TEST(FileUtilTest, BoundedFileStemKeepsShortStemsAndHashesLongOnes) {
  EXPECT_EQ(BoundedFileStem("worker-1"), "worker-1");
  const std::string exactly(kMaxFileStemChars, 'x');
  EXPECT_EQ(BoundedFileStem(exactly), exactly);
  const std::string long_stem(300, 'x');
  const std::string bounded = BoundedFileStem(long_stem);
  EXPECT_EQ(bounded.size(), kMaxFileStemChars);
  EXPECT_EQ(bounded.substr(0, kMaxFileStemChars - 17), long_stem.substr(0, kMaxFileStemChars - 17));
  EXPECT_EQ(bounded[kMaxFileStemChars - 17], '-');
  EXPECT_EQ(BoundedFileStem(long_stem), bounded);  // stable
  EXPECT_NE(BoundedFileStem(long_stem + "y"), bounded);
  EXPECT_EQ(BoundedFileStem(long_stem, 5).size(), 24u);  // never shorter than prefix + hash
}

TEST(FileUtilTest, ErrorsNameThePath) {
  absl::StatusOr<std::string> r = ReadFile("/nonexistent/x");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("/nonexistent/x"));
  absl::Status w = WriteFileAtomically("/nonexistent/dir/x", "y");
  EXPECT_FALSE(w.ok());
  EXPECT_THAT(w.message(), ::testing::HasSubstr("/nonexistent/dir/x"));
}

TEST(FileUtilTest, MakeDirsCreatesNestedAndRejectsFiles) {
  const testkit::TempDir tmp;
  const std::string& dir = tmp.path();
  ASSERT_THAT(MakeDirs(JoinPath(dir, "a/b/c")), IsOk());
  EXPECT_TRUE(PathExists(JoinPath(dir, "a/b/c")));
  ASSERT_THAT(WriteFileAtomically(JoinPath(dir, "f"), "x"), IsOk());
  EXPECT_FALSE(MakeDirs(JoinPath(dir, "f")).ok());
}

TEST(FileUtilTest, FileStems) {
  EXPECT_THAT(ValidateFileStem("name", "worker-0_a.b"), IsOk());
  for (const char* bad : {"", ".", "..", "a/b", "a b", "x:1"}) {
    EXPECT_FALSE(ValidateFileStem("name", bad).ok()) << bad;
  }
  EXPECT_FALSE(ValidateFileStem("name", std::string(129, 'a')).ok());
  EXPECT_EQ(JoinPath("a/", "/b"), "a/b");
}

// A stem from outside is quoted escaped and clipped: a 100,000-byte name or one with terminal
// escapes makes a short, inert message (the attack at 10x echoed both raw).
TEST(FileUtilTest, ABadStemIsQuotedEscapedAndClipped) {
  const absl::Status escapes = ValidateFileStem("session name", "a\x1b[2Jb\x1b]0;t\a");
  EXPECT_THAT(std::string(escapes.message()), ::testing::StartsWith("session name 'a\\x1b[2Jb"));
  EXPECT_EQ(escapes.message().find('\x1b'), absl::string_view::npos);
  EXPECT_EQ(escapes.message().find('\a'), absl::string_view::npos);
  const absl::Status huge = ValidateFileStem("session name", std::string(100'000, 'x') + "/");
  EXPECT_LT(huge.message().size(), 200u);
  EXPECT_THAT(std::string(huge.message()), ::testing::HasSubstr("... (100001 bytes)"));
}

TEST(GzipTest, RoundTripsAndRejectsCorruptData) {
  std::string data;
  for (int i = 0; i < 10000; ++i) data += "event " + std::to_string(i) + "\n";
  absl::StatusOr<std::string> gz = GzipCompress(data);
  ASSERT_THAT(gz, IsOk());
  EXPECT_LT(gz->size(), data.size() / 3);
  EXPECT_EQ(static_cast<unsigned char>((*gz)[0]), 0x1f);  // gzip magic
  EXPECT_EQ(*GzipDecompress(*gz), data);
  EXPECT_EQ(GzipDecompress(gz->substr(0, gz->size() / 2)).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(JsonUtilTest, EscapesAndKeepsOutputValidUtf8) {
  std::string out;
  AppendJsonString(&out, "a\"b\\c\n\x01 \xc3\xa9 \xff");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u0001 \xc3\xa9 \xef\xbf\xbd\"");
  // Plain runs at either end, around escapes, and none at all.
  out.clear();
  AppendJsonString(&out, "");
  AppendJsonString(&out, "step 12\tname/\x7f");
  AppendJsonString(&out, "\"\"x");
  EXPECT_EQ(out, "\"\"\"step 12\\tname/\x7f\"\"\\\"\\\"x\"");
  out.clear();
  AppendJsonDouble(&out, 1.5);
  out += ",";
  AppendJsonDouble(&out, 0.0 / 0.0);
  EXPECT_EQ(out, "1.5,null");
}

}  // namespace
}  // namespace profctl
