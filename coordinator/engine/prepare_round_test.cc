#include "coordinator/engine/prepare_round.h"

#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace profctl::coordinator {
namespace {

using ::profctl::testkit::StatusIs;
using State = PrepareRound::State;

AgentInfo Info(const char* name, const char* version) {
  AgentInfo info;
  info.name = name;
  info.version = version;
  return info;
}

// A reading whose round trip is `rtt_ns` (the agent answers at once), agent 1 s ahead.
ClockReading Reading(int64_t rtt_ns) {
  const int64_t t0 = 1'000'000'000'000;
  return {.receive_ns = t0 + 1'000'000'000 + rtt_ns / 2,
          .send_ns = t0 + 1'000'000'000 + rtt_ns / 2,
          .local_send_ns = t0,
          .local_receive_ns = t0 + rtt_ns};
}

TEST(PrepareRoundTest, SamplesAfterGetInfoAndStopsWhenTheBestStopsImproving) {
  PrepareRound round(/*measures_clock=*/true, {.max_samples = 5, .min_samples = 3});
  EXPECT_EQ(round.Decide().state, State::kWaiting);
  const PrepareRound::Step info = round.OnInfo(Info("a", ""));
  EXPECT_TRUE(info.answered);
  EXPECT_TRUE(info.sample_next);
  EXPECT_TRUE(round.OnSample(Reading(100)).sample_next);
  EXPECT_TRUE(round.OnSample(Reading(200)).sample_next);         // no better: one in a row
  const PrepareRound::Step last = round.OnSample(Reading(300));  // two in a row, three taken
  EXPECT_TRUE(last.answered);
  EXPECT_FALSE(last.sample_next);
  const PrepareRound::Verdict v = round.Decide();
  EXPECT_EQ(v.state, State::kReady);
  EXPECT_EQ(round.best().rtt_ns, 100);
  EXPECT_EQ(round.best().samples, 3);
  EXPECT_EQ(round.best().offset_ns, 1'000'000'000);
}

TEST(PrepareRoundTest, ANoisyPathGetsEverySample) {
  PrepareRound round(true, {.max_samples = 4, .min_samples = 3});
  round.OnInfo(AgentInfo{});
  EXPECT_TRUE(round.OnSample(Reading(400)).sample_next);
  EXPECT_TRUE(round.OnSample(Reading(300)).sample_next);
  EXPECT_TRUE(round.OnSample(Reading(200)).sample_next);
  EXPECT_FALSE(round.OnSample(Reading(100)).sample_next);  // the last allowed
  EXPECT_EQ(round.Decide().state, State::kReady);
  EXPECT_EQ(round.best().rtt_ns, 100);
}

TEST(PrepareRoundTest, GetInfoRefusedFailsAtOnce) {
  PrepareRound round(true, {});
  const PrepareRound::Step step = round.OnInfo(absl::UnavailableError("connection refused"));
  EXPECT_FALSE(step.answered);
  EXPECT_FALSE(step.sample_next);
  const PrepareRound::Verdict v = round.Decide();
  EXPECT_EQ(v.state, State::kFailed);
  EXPECT_EQ(v.step, profctl::v1::FAILURE_STEP_GET_INFO);
  EXPECT_THAT(v.status, StatusIs(absl::StatusCode::kUnavailable));
}

TEST(PrepareRoundTest, AnAgentThatRefusesSamplesIsNotAskedAgain) {
  PrepareRound round(true, {.max_samples = 5});
  round.OnInfo(AgentInfo{});
  EXPECT_FALSE(round.OnSample(absl::UnavailableError("gone")).sample_next);
  const PrepareRound::Verdict v = round.Decide();
  EXPECT_EQ(v.state, State::kFailed);
  EXPECT_EQ(v.step, profctl::v1::FAILURE_STEP_CLOCK_SYNC);
}

TEST(PrepareRoundTest, AnImpossibleReadingIsAFailedSampleNotAnAnswer) {
  PrepareRound round(true, {.max_samples = 2});
  round.OnInfo(AgentInfo{});
  ClockReading bad = Reading(100);
  bad.send_ns = bad.receive_ns - 1;  // sent before it received
  const PrepareRound::Step step = round.OnSample(bad);
  EXPECT_FALSE(step.answered);
  EXPECT_TRUE(step.sample_next);  // not hopeless: only refusals are
  EXPECT_FALSE(round.OnSample(bad).sample_next);
  EXPECT_THAT(round.Decide().status, StatusIs(absl::StatusCode::kDataLoss));
}

TEST(PrepareRoundTest, APeerWhoseClockCannotBeAskedIsReadyAtGetInfo) {
  PrepareRound round(/*measures_clock=*/false, {});
  EXPECT_FALSE(round.OnInfo(Info("", "tsl")).sample_next);
  EXPECT_EQ(round.Decide().state, State::kReady);
  EXPECT_EQ(round.info().version, "tsl");
}

}  // namespace
}  // namespace profctl::coordinator
