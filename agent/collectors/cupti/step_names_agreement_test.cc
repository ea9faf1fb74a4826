// The injection library's hand-written step matcher (inject/step_names.h: no RE2 inside CUDA
// processes) against RE2 with the agent's default pattern (kDefaultNvtxStepPattern), searched as
// BuildCuptiXSpace searches it (RE2::PartialMatch, group 1 as int64): the step signal and the
// captured XSpace must agree on what a step is.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "agent/collectors/cupti/cupti_xspace.h"
#include "inject/step_names.h"
#include "re2/re2.h"
#include "tests/status_matchers.h"

using ::profctl::testkit::IsOk;

namespace profctl::agent::cupti {
namespace {

struct Case {
  std::string name;
  bool step;         // what we expect (RE2 is the judge; this documents it)
  int64_t step_num;  // when step
};

std::vector<Case> Table() {
  const std::string digits19 = "9223372036854775807";
  return {
      {"step 5", true, 5},
      {"step5", true, 5},
      {"Step 5", true, 5},
      {"STEP_7", true, 7},
      {"step#3", true, 3},
      {"step:3", true, 3},
      {"step=3", true, 3},
      {"step-3", true, 3},
      {"step : 3  ", true, 3},
      {"step \t#\t 4\n", true, 4},
      {"step\r\n8\f", true, 8},
      {"train_step 5", true, 5},
      {"train step 12", true, 12},
      {"ProfilerStep#5", true, 5},
      {"profilerstep 5", true, 5},
      {"PROFILERSTEPMARKER 9", true, 9},
      {"StepMarker 12", true, 12},
      {"x.StepMarker=12", true, 12},
      {"1step 2", true, 2},
      {"[step] 3", false, 0},
      {"epoch 2 step 0007", true, 7},
      {"step 0", true, 0},
      {"step " + digits19, true, INT64_MAX},
      {"step 00000000000000000000000000000000000000001", true, 1},
      {"step 9223372036854775808", false, 0},  // over int64: no step (skipped)
      {"step 123456789012345678901234567890", false, 0},
      {"mystep 3", false, 0},
      {"xprofilerstep 3", false, 0},
      {"markerstep 3", false, 0},
      {"stepmark 3", false, 0},
      {"stepmarkers 3", false, 0},
      {"step", false, 0},
      {"step ", false, 0},
      {"step 5 x", false, 0},
      {"step 5.0", false, 0},
      {"step -5", true, 5},  // '-' is a separator
      {"step --5", false, 0},
      {"step 1 2", false, 0},
      {"step\v5", false, 0},  // \v is not RE2's \s
      {"forward", false, 0},
      {"", false, 0},
      {"5", false, 0},
      {"st ep 5", false, 0},
      {"\xC3\xA9step 5", true, 5},       // é before: not [a-z]
      {"\xE2\x9C\x93 step 5", true, 5},  // ✓
      {"step\xC2\xA0"
       "5",
       false, 0},                    // NBSP is not \s
      {"step \xD9\xA5", false, 0},   // ARABIC-INDIC DIGIT FIVE is not \d
      {"\xC5\xBFtep 5", true, 5},    // U+017F long s folds to s
      {"\xC5\xBFstep 5", false, 0},  // ...and is a letter before "step"
      {"stepmar\xE2\x84\xAA"
       "er 5",
       true, 5},  // U+212A Kelvin sign folds to k
      {"\xE2\x84\xAAstep 5", false, 0},
      {"a\xE2\x84\xAA"
       "step 5",
       false, 0},
      {std::string("step\0 5", 7), false, 0},  // NUL is neither \s nor a separator
      {std::string("\0step 5", 7), true, 5},
      {std::string(10000, 'a') + " step 3", true, 3},
      {"step " + std::string(5000, '0') + "42", true, 42},
  };
}

TEST(StepNamesAgreementTest, HandWrittenMatcherAgreesWithRe2) {
  const RE2 re(std::string(kDefaultNvtxStepPattern), RE2::Quiet);
  ASSERT_THAT(re, IsOk()) << re.error();
  for (const Case& c : Table()) {
    int64_t re2_step = -1;
    const bool re2_match = RE2::PartialMatch(c.name, re, &re2_step);
    int64_t ours_step = -1;
    const bool ours = inject::MatchStepName(c.name, &ours_step);
    SCOPED_TRACE(c.name.size() > 80 ? c.name.substr(0, 40) + "..." : c.name);
    EXPECT_EQ(ours, re2_match);
    if (ours && re2_match) {
      EXPECT_EQ(ours_step, re2_step);
    }
    EXPECT_EQ(ours, c.step);
    if (ours && c.step) {
      EXPECT_EQ(ours_step, c.step_num);
    }
  }
}

}  // namespace
}  // namespace profctl::agent::cupti
