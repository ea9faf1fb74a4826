#include "common/yaml_config.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"

namespace profctl {
namespace {

using ::profctl::testkit::IsOk;
using ::profctl::testkit::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

YamlConfig MustParse(const std::string& text) {
  absl::StatusOr<YamlConfig> config = YamlConfig::Parse(text, "c.yaml");
  EXPECT_THAT(config, IsOk());
  return *config;
}

TEST(YamlConfigTest, ParseErrorsNameTheSourceLineAndColumn) {
  EXPECT_THAT(YamlConfig::Parse("a: 1\nb: [\n", "c.yaml"),
              StatusIs(kInvalid, HasSubstr("c.yaml:3: not valid YAML at column 1: ")));
  EXPECT_THAT(YamlConfig::Parse("a: 1\n  b: 2\n", "c.yaml"),
              StatusIs(kInvalid, HasSubstr("c.yaml:2: not valid YAML at column")));
  const absl::StatusOr<YamlConfig> missing = YamlConfig::Load("/nonexistent/c.yaml");
  ASSERT_THAT(missing, Not(IsOk()));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/c.yaml"));
}

// A config file over the cap is refused by its size before yaml-cpp sees it (this one is not
// even YAML), naming the file, its size and the cap; at the cap it is read. Load takes the
// default cap (4 MiB).
TEST(YamlConfigTest, AFileOverTheCapIsRefusedBeforeItIsParsed) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "c.yaml");
  ASSERT_THAT(WriteFileAtomically(path, "a: [" + std::string(1000, 'x')), IsOk());  // 1004 bytes
  EXPECT_THAT(YamlConfig::ReadFile(path, /*max_bytes=*/1003),
              StatusIs(kInvalid, HasSubstr(path + ": 1004 bytes, more than a config file may "
                                                  "hold (1003 bytes)")));
  absl::StatusOr<std::string> at_cap = YamlConfig::ReadFile(path, /*max_bytes=*/1004);
  ASSERT_THAT(at_cap, IsOk());
  EXPECT_EQ(at_cap->size(), 1004u);
  EXPECT_THAT(YamlConfig::Load(path), StatusIs(kInvalid, HasSubstr("not valid YAML")));

  ASSERT_THAT(WriteFileAtomically(path, "a: [" + std::string(YamlConfig::kMaxFileBytes, 'x')),
              IsOk());
  EXPECT_THAT(YamlConfig::Load(path),
              StatusIs(kInvalid, HasSubstr(absl::StrCat(path, ": ", YamlConfig::kMaxFileBytes + 4,
                                                        " bytes, more than a config file may "
                                                        "hold (4194304 bytes)"))));
  EXPECT_THAT(YamlConfig::ReadFile(JoinPath(tmp.path(), "none.yaml")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("none.yaml")));
}

TEST(YamlConfigTest, EmptyDocumentIsNullAndNotAMap) {
  const YamlConfig config = MustParse("");
  EXPECT_TRUE(config.root().IsNull());
  EXPECT_EQ(config.source(), "c.yaml");
  EXPECT_THAT(MustParse("a: 1\n").RequireTopLevelMap(), IsOk());
  EXPECT_THAT(MustParse("- 1\n").RequireTopLevelMap(),
              StatusIs(kInvalid, "c.yaml:1: (top level): expected a mapping of settings"));
}

TEST(YamlConfigTest, UnknownKeysListTheKnownOnes) {
  const YamlConfig config = MustParse("a: 1\nb: {x: 1, y: 2}\n");
  const std::vector<absl::string_view> top = {"a", "b"};
  EXPECT_THAT(config.CheckKeys(config.root(), "", top), IsOk());
  EXPECT_THAT(config.CheckKeys(config.root(), "", {"a"}),
              StatusIs(kInvalid, "c.yaml:2: b: unknown key (known: a)"));
  EXPECT_THAT(config.CheckKeys(config.root()["b"], "top[0].b", {"x", "z"}),
              StatusIs(kInvalid, "c.yaml:2: top[0].b.y: unknown key (known: x, z)"));
  EXPECT_THAT(
      config.CheckKeys(config.root(), "", {"a", "c"}, YamlConfig::UnknownKeyWording::kNotASetting),
      StatusIs(kInvalid, "c.yaml:2: 'b' is not a setting (a, c)"));
}

TEST(YamlConfigTest, TypedGettersNameThePath) {
  const YamlConfig config = MustParse(
      "n: 12\nbig: 21\nword: many\ns: text\nempty: ''\nflag: yes\nbad: maybe\n"
      "list: [a, b]\nholes: [a, '']\nmap: {k: v}\n");
  const YAML::Node& r = config.root();
  EXPECT_THAT(config.Int(r["n"], "n", 0, 20), IsOk());
  EXPECT_EQ(*config.Int(r["n"], "n", 0, 20), 12);
  EXPECT_THAT(config.Int(r["big"], "x.big", 0, 20),
              StatusIs(kInvalid, "c.yaml:2: x.big: 21 is not in 0..20"));
  EXPECT_THAT(config.Int(r["word"], "word", 0, 20),
              StatusIs(kInvalid, R"(c.yaml:3: word: "many" is not an integer)"));
  EXPECT_THAT(config.Int(r["map"], "map", 0, 20),
              StatusIs(kInvalid, "c.yaml:10: map: expected an integer"));

  EXPECT_EQ(*config.String(r["s"], "s"), "text");
  EXPECT_THAT(config.String(r["empty"], "empty"),
              StatusIs(kInvalid, "c.yaml:5: empty: expected a non-empty string"));
  EXPECT_THAT(config.String(r["map"], "map"),
              StatusIs(kInvalid, "c.yaml:10: map: expected a non-empty string"));
  EXPECT_EQ(*YamlConfig::AsString(r["empty"], /*allow_empty=*/true), "");

  EXPECT_TRUE(*config.Bool(r["flag"], "flag"));
  EXPECT_THAT(config.Bool(r["bad"], "bad"),
              StatusIs(kInvalid, R"(c.yaml:7: bad: "maybe" is not a boolean (true or false))"));

  EXPECT_THAT(*config.StringList(r["list"], "list"), ElementsAre("a", "b"));
  EXPECT_THAT(config.StringList(r["holes"], "holes"),
              StatusIs(kInvalid, "c.yaml:9: holes[1]: expected a non-empty string"));
  EXPECT_THAT(config.StringList(r["s"], "s"),
              StatusIs(kInvalid, "c.yaml:4: s: expected a list of strings"));
  EXPECT_THAT(YamlConfig::AsStringList(r["map"], /*allow_empty=*/true),
              StatusIs(kInvalid, "expected a list of strings"));
  EXPECT_THAT(*YamlConfig::AsStringList(r["holes"], /*allow_empty=*/true), ElementsAre("a", ""));
}

TEST(YamlConfigTest, ErrorWithoutAPathIsJustTheProblem) {
  const YamlConfig config = MustParse("a: 1\nb: 2\n");
  EXPECT_THAT(config.Error(config.root()["b"], "", "'b' is odd"),
              StatusIs(kInvalid, "c.yaml:2: 'b' is odd"));
  EXPECT_EQ(YamlConfig::Join("", "a"), "a");
  EXPECT_EQ(YamlConfig::Join("s[1]", "a"), "s[1].a");
  EXPECT_EQ(YamlConfig::Index("s", 1), "s[1]");
}

}  // namespace
}  // namespace profctl
