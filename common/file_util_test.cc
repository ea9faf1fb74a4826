#include "common/file_util.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/gzip.h"
#include "common/json_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"

using ::profctl::testkit::IsOk;

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
