#include "coordinator/plan/capture_plan.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::profctl::testkit::IsOk;

namespace profctl::coordinator {
namespace {

using ::profctl::testkit::StatusIs;
using ::testing::HasSubstr;

CapturePlan TwoWorkers() {
  CapturePlan plan;
  plan.workers = *ParseWorkerList("h1:6000,grpc://h2:9999");
  plan.duration_ms = 2000;
  return plan;
}

struct BadOption {
  const char* what;
  void (*spoil)(CapturePlan*);
  // What every front door's message holds, after the option's name.
  const char* says;
  const char* PlanFieldNames::*field;
};

const BadOption kBadOptions[] = {
    {"duration 0", [](CapturePlan* p) { p->duration_ms = 0; }, "=0 is not in 1..3600000 ms",
     &PlanFieldNames::duration},
    {"duration past an hour", [](CapturePlan* p) { p->duration_ms = 3'600'001; },
     "=3600001 is not in 1..3600000 ms", &PlanFieldNames::duration},
    {"negative prepare timeout", [](CapturePlan* p) { p->prepare_timeout_ms = -1; },
     "=-1 is not in 0..600000 ms", &PlanFieldNames::prepare_timeout},
    {"tolerance past a minute", [](CapturePlan* p) { p->tolerance_ms = 60'001; },
     "=60001 is not in 0..60000 ms", &PlanFieldNames::tolerance},
    {"negative tolerance", [](CapturePlan* p) { p->tolerance_ms = -1; },
     "=-1 is not in 0..60000 ms", &PlanFieldNames::tolerance},
    {"21 retries", [](CapturePlan* p) { p->retries = 21; }, "=21 is not in 0..20",
     &PlanFieldNames::retries},
    {"a deadline no longer than the window", [](CapturePlan* p) { p->deadline_ms = 2000; },
     "=2000 ms cannot hold the 2000 ms window", &PlanFieldNames::deadline},
    {"a deadline past a day", [](CapturePlan* p) { p->deadline_ms = 86'400'001; },
     "=86400001 ms cannot hold the 2000 ms window", &PlanFieldNames::deadline},
    {"a step pattern that does not compile", [](CapturePlan* p) { p->reader.step_pattern = "("; },
     ": ", &PlanFieldNames::step_pattern},
    {"more hosts required than workers", [](CapturePlan* p) { p->min_hosts = 3; },
     "=3 is not in 0..2 (the number of ", &PlanFieldNames::min_hosts},
    {"a past other than the window", [](CapturePlan* p) { p->past_ms = 1000; }, "=1000 ms and ",
     &PlanFieldNames::past},
    {"a negative past", [](CapturePlan* p) { p->past_ms = -1; }, "=-1 is not in 0..3600000 ms",
     &PlanFieldNames::past},
    {"a snapshot of a framework server", [](CapturePlan* p) { p->past_ms = p->duration_ms; },
     ": grpc://h2:9999 is a framework's profiler server, which keeps no past",
     &PlanFieldNames::past},
    {"a host tracer level past verbose", [](CapturePlan* p) { p->host_tracer_level = 4; },
     "=4 is not in 0..3 (0 off, 1 user annotations", &PlanFieldNames::host_tracer_level},
    {"a negative host tracer level", [](CapturePlan* p) { p->host_tracer_level = -1; },
     "=-1 is not in 0..3", &PlanFieldNames::host_tracer_level},
    {"a device tracer level of 2", [](CapturePlan* p) { p->device_tracer_level = 2; },
     "=2 is not in 0..1 (0 off, 1 on)", &PlanFieldNames::device_tracer_level},
    {"a python tracer level of 2", [](CapturePlan* p) { p->python_tracer_level = 2; },
     "=2 is not in 0..1 (0 off, 1 on)", &PlanFieldNames::python_tracer_level},
};

// One set of bounds: every front door refuses the same values, each in its own words.
TEST(CapturePlanTest, EveryFrontDoorRefusesTheSameValuesNamingItsOwnField) {
  ASSERT_THAT(ValidatePlan(TwoWorkers(), kFlagNames), IsOk());
  for (const BadOption& bad : kBadOptions) {
    CapturePlan plan = TwoWorkers();
    bad.spoil(&plan);
    for (const PlanFieldNames* names : {&kFlagNames, &kRequestNames, &kScheduleNames}) {
      EXPECT_THAT(ValidatePlan(plan, *names),
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           HasSubstr(absl::StrCat(names->*bad.field, bad.says))))
          << bad.what;
    }
  }
}

TEST(CapturePlanTest, ZeroMeansTheDefaultForTheOptionalBudgets) {
  CapturePlan plan = TwoWorkers();
  plan.prepare_timeout_ms = 0;
  plan.tolerance_ms = 0;
  plan.deadline_ms = 0;
  plan.retries = 0;
  EXPECT_THAT(ValidatePlan(plan, kFlagNames), IsOk());
  plan.deadline_ms = 2001;  // the least deadline that holds the window
  plan.tolerance_ms = 60'000;
  plan.retries = 20;
  plan.min_hosts = 2;
  EXPECT_THAT(ValidatePlan(plan, kFlagNames), IsOk());
}

TEST(CapturePlanTest, OptionsAloneLeaveTheWorkersToTheCaller) {
  CapturePlan plan;  // a schedule's: targets are resolved when it runs
  EXPECT_THAT(ValidatePlanOptions(plan, kScheduleNames), IsOk());
  EXPECT_THAT(ValidatePlan(plan, kScheduleNames).message(), HasSubstr("targets: no workers"));
}

TEST(CapturePlanTest, ASnapshotsPastIsAWholeDurationWithAUnitAndItsWindow) {
  EXPECT_EQ(*ParsePastMs("30s"), 30'000);
  EXPECT_EQ(*ParsePastMs("500ms"), 500);
  EXPECT_EQ(*ParsePastMs("1m30s"), 90'000);
  for (const char* bad : {"30", "0s", "-5s", "1.5ms", "2h", "soon", ""}) {
    EXPECT_THAT(ParsePastMs(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(e.g. 30s, 500ms, 2m)")))
        << bad;
  }
  CapturePlan plan;
  plan.workers = *ParseWorkerList("h1:6000,h2:6000");
  plan.duration_ms = plan.past_ms = 30'000;
  EXPECT_THAT(ValidatePlan(plan, kFlagNames), IsOk());
  plan.session = "snap";
  absl::StatusOr<CapturePlan> back = PlanFromRequest(RequestFromPlan(plan));
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->past_ms, 30'000);
  EXPECT_EQ(SessionRequestFromPlan(plan).past_ms(), 30'000u);
}

TEST(CapturePlanTest, EnumNamesRoundTripAndUnknownNamesAreListed) {
  for (const auto late : {v1::LATE_POLICY_CAPTURE, v1::LATE_POLICY_FAIL}) {
    EXPECT_EQ(*ParseLatePolicy(LatePolicyName(late)), late);
  }
  for (const auto align : {v1::ALIGN_MODE_COLLECTIVES, v1::ALIGN_MODE_NTP}) {
    EXPECT_EQ(*ParseAlignMode(AlignModeName(align)), align);
  }
  EXPECT_EQ(ParseLatePolicy("maybe").status().message(), "is not one of: capture, fail");
  EXPECT_EQ(ParseAlignMode("gps").status().message(), "is not one of: collectives, ntp");
  // An out-of-range enum from the wire is refused, not run.
  CapturePlan plan = TwoWorkers();
  plan.late = static_cast<v1::LatePolicy>(7);
  EXPECT_THAT(ValidatePlan(plan, kRequestNames).message(), HasSubstr("late policy 7"));
}

TEST(CapturePlanTest, RequestRoundTripKeepsEveryOptionButTheLogDir) {
  CapturePlan plan = TwoWorkers();
  plan.session = "run1";
  plan.logdir = "/var/log/profctl";
  plan.prepare_timeout_ms = 700;
  plan.late = v1::LATE_POLICY_FAIL;
  plan.align = v1::ALIGN_MODE_NTP;
  plan.tolerance_ms = 40;
  plan.retries = 5;
  plan.deadline_ms = 9000;
  plan.min_hosts = 2;
  plan.reader.step_pattern = R"(iter (\d+))";
  plan.host_tracer_level = 3;
  plan.device_tracer_level = 0;
  plan.python_tracer_level = 1;
  const v1::StartCaptureRequest request = RequestFromPlan(plan);
  EXPECT_TRUE(request.request().logdir().empty());  // the daemon's own
  absl::StatusOr<CapturePlan> back = PlanFromRequest(request);
  ASSERT_THAT(back, IsOk());
  ASSERT_EQ(back->workers.size(), 2u);
  EXPECT_EQ(back->workers[1].protocol, WorkerAddress::Protocol::kTsl);
  EXPECT_EQ(back->session, "run1");
  EXPECT_EQ(back->prepare_timeout_ms, 700);
  EXPECT_EQ(back->late, v1::LATE_POLICY_FAIL);
  EXPECT_EQ(back->align, v1::ALIGN_MODE_NTP);
  EXPECT_EQ(back->tolerance_ms, 40);
  EXPECT_EQ(back->retries, 5);
  EXPECT_EQ(back->deadline_ms, 9000);
  EXPECT_EQ(back->min_hosts, 2u);
  EXPECT_EQ(back->reader.step_pattern, R"(iter (\d+))");
  EXPECT_EQ(back->host_tracer_level, 3);
  EXPECT_EQ(back->device_tracer_level, 0);
  EXPECT_EQ(back->python_tracer_level, 1);
  // session.json's request is the same, with the log dir.
  const v1::SessionRequest recorded = SessionRequestFromPlan(plan);
  EXPECT_EQ(recorded.logdir(), "/var/log/profctl");
  v1::SessionRequest sent = request.request();
  sent.set_logdir(recorded.logdir());
  EXPECT_EQ(sent.SerializeAsString(), recorded.SerializeAsString());
}

TEST(CapturePlanTest, RequestsAreReadWithTheirDefaultsAndRefusedWithTheirOwnValues) {
  v1::StartCaptureRequest r;
  EXPECT_THAT(PlanFromRequest(r).status().message(), HasSubstr("request.workers: empty"));
  r.mutable_request()->add_workers("h1:6000");
  r.mutable_request()->add_workers("h1:6000");
  r.mutable_request()->set_duration_ms(1000);
  EXPECT_THAT(PlanFromRequest(r).status().message(),
              HasSubstr("request.workers: worker 'h1:6000' is listed twice"));
  r.mutable_request()->set_workers(1, "");
  EXPECT_THAT(PlanFromRequest(r).status().message(), HasSubstr("worker #2 is empty"));
  r.mutable_request()->mutable_workers()->RemoveLast();
  absl::StatusOr<CapturePlan> plan = PlanFromRequest(r);
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->late, v1::LATE_POLICY_CAPTURE);  // unspecified: the defaults
  EXPECT_EQ(plan->align, v1::ALIGN_MODE_COLLECTIVES);
  EXPECT_EQ(plan->reader.step_pattern, analysis::kDefaultStepPattern);
  EXPECT_EQ(plan->host_tracer_level, 2);  // absent: TensorBoard's defaults
  EXPECT_EQ(plan->device_tracer_level, 1);
  EXPECT_EQ(plan->python_tracer_level, 0);
  // A value past every bound is named as sent, not as narrowed.
  r.mutable_request()->set_duration_ms(std::numeric_limits<uint64_t>::max());
  EXPECT_THAT(PlanFromRequest(r).status().message(),
              HasSubstr(absl::StrCat("request.duration_ms=", std::numeric_limits<int64_t>::max())));
  r.mutable_request()->set_duration_ms(1000);
  r.mutable_request()->set_retries(4'000'000'000u);
  EXPECT_THAT(PlanFromRequest(r).status().message(),
              HasSubstr(absl::StrCat("request.retries=", std::numeric_limits<int>::max())));
  r.mutable_request()->set_retries(0);
  r.set_tolerance_ms(60'001);
  EXPECT_THAT(PlanFromRequest(r).status().message(), HasSubstr("tolerance_ms=60001 is not in"));
  r.set_tolerance_ms(0);
  r.mutable_request()->set_device_tracer_level(7);
  EXPECT_THAT(PlanFromRequest(r).status().message(),
              HasSubstr("request.device_tracer_level=7 is not in 0..1"));
}

}  // namespace
}  // namespace profctl::coordinator
