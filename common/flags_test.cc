#include "common/flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::profctl::testkit::IsOk;

namespace profctl {
namespace {

using ::testing::HasSubstr;

struct Fixture {
  std::string workers;
  int64_t duration = 2000;
  bool json = false;
  FlagSet fs{"profctl capture", "[flags]"};
  Fixture() {
    fs.String("workers", &workers, "workers");
    fs.Int64("duration", &duration, "ms");
    fs.Bool("json", &json, "json");
  }
};

TEST(FlagSetTest, ParsesEqualsSpaceAndBoolForms) {
  Fixture f;
  ASSERT_THAT(f.fs.Parse({"--workers=a:1", "--duration", "50", "--json", "pos"}), IsOk());
  EXPECT_EQ(f.workers, "a:1");
  EXPECT_EQ(f.duration, 50);
  EXPECT_TRUE(f.json);
  EXPECT_THAT(f.fs.positional(), ::testing::ElementsAre("pos"));
  EXPECT_TRUE(f.fs.WasSet("duration"));
}

TEST(FlagSetTest, UnknownFlagSuggestsTheClosestKnownOne) {
  {
    Fixture f;
    EXPECT_THAT(f.fs.Parse({"--worker=a:1"}).message(),
                HasSubstr("unknown flag --worker (did you mean --workers?)"));
  }
  {
    Fixture f;  // a swap of neighbours is one edit
    EXPECT_THAT(f.fs.Parse({"--duratoin=5"}).message(), HasSubstr("did you mean --duration?"));
  }
  {
    Fixture f;  // nothing close: no guess
    const std::string message(f.fs.Parse({"--frobnicate"}).message());
    EXPECT_THAT(message, HasSubstr("unknown flag --frobnicate (see --help)"));
    EXPECT_THAT(message, ::testing::Not(HasSubstr("did you mean")));
  }
}

TEST(ClosestNameTest, PicksTheNearestWithinTwoEditsAndHalfTheLength) {
  const std::vector<std::string> known = {"capture", "ping", "analyze", "diff"};
  EXPECT_EQ(ClosestName("captur", known), "capture");
  EXPECT_EQ(ClosestName("anlayze", known), "analyze");
  EXPECT_EQ(ClosestName("pign", known), "ping");
  EXPECT_EQ(ClosestName("capturexx", known), "capture");
  EXPECT_EQ(ClosestName("xyz", known), "");       // 3+ edits from everything
  EXPECT_EQ(ClosestName("df", known), "");        // 2 edits, but half of a 2-letter word
  EXPECT_EQ(ClosestName("ping", known), "ping");  // exact
}

TEST(FlagSetTest, ErrorsNameTheFlagAndValue) {
  {
    Fixture f;
    absl::Status s = f.fs.Parse({"--duration=abc"});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("--duration"));
    EXPECT_THAT(s.message(), HasSubstr("'abc'"));
  }
  {
    Fixture f;
    EXPECT_THAT(f.fs.Parse({"--nope=1"}).message(), HasSubstr("unknown flag --nope"));
  }
  {
    Fixture f;
    EXPECT_THAT(f.fs.Parse({"--duration"}).message(), HasSubstr("needs a value"));
  }
  {
    Fixture f;
    EXPECT_THAT(f.fs.Parse({"--json=maybe"}).message(), HasSubstr("true or false"));
  }
  {
    Fixture f;
    EXPECT_THAT(f.fs.Parse({"--duration=1", "--duration=2"}).message(),
                HasSubstr("more than once"));
  }
  {
    Fixture f;
    EXPECT_THAT(f.fs.Parse({"-x"}).message(), HasSubstr("bad flag '-x'"));
  }
  {
    Fixture f;
    EXPECT_THAT(f.fs.Parse({"--duration=99999999999999999999"}).message(),
                HasSubstr("whole number"));
  }
}

// What careless command lines did before: `--logdir --session=x` took the flag as the log dir,
// and `--session=` silently meant the default.
TEST(FlagSetTest, FlagLikeAndExplicitlyEmptyValuesAreRefused) {
  {
    Fixture f;
    absl::Status s = f.fs.Parse({"--workers", "--duration=5"});
    EXPECT_THAT(s.message(), HasSubstr("--workers needs a value, got the flag '--duration=5'"));
    EXPECT_THAT(s.message(), HasSubstr("--workers=VALUE"));
  }
  {
    Fixture f;
    EXPECT_THAT(f.fs.Parse({"--workers="}), IsOk());  // empty can mean something (--synthetic=)
    Fixture g;
    g.fs.RejectEmpty("workers");
    EXPECT_THAT(g.fs.Parse({"--workers="}).message(),
                HasSubstr("--workers is empty; leave the flag out"));
  }
  {
    Fixture f;  // negative numbers and "-" stay values
    EXPECT_THAT(f.fs.Parse({"--duration", "-5", "--workers", "-"}), IsOk());
    EXPECT_EQ(f.duration, -5);
    EXPECT_EQ(f.workers, "-");
  }
}

TEST(FlagSetTest, RequiredAndHelp) {
  Fixture f;
  f.fs.Require("workers");
  EXPECT_THAT(f.fs.Parse({}).message(), HasSubstr("--workers is required"));
  Fixture g;
  g.fs.Require("workers");
  ASSERT_THAT(g.fs.Parse({"--help"}), IsOk());
  EXPECT_TRUE(g.fs.help_requested());
  EXPECT_THAT(g.fs.Help(), HasSubstr("--duration"));
  EXPECT_THAT(g.fs.Help(), HasSubstr("(default 2000)"));
  EXPECT_THAT(g.fs.Help(), HasSubstr("(required)"));
}

TEST(FlagSetTest, DoubleDashEndsFlags) {
  Fixture f;
  ASSERT_THAT(f.fs.Parse({"--", "--json"}), IsOk());
  EXPECT_FALSE(f.json);
  EXPECT_THAT(f.fs.positional(), ::testing::ElementsAre("--json"));
}

}  // namespace
}  // namespace profctl
