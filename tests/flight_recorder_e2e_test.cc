// The flight recorder end to end (docs/flight-recorder.md): real agent processes record a
// synthetic job that slows down at a given step, and `profctl capture --last` afterwards holds
// those slow steps, aligned, in every output, with the window stated as the past it covers.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "coordinator/cli/cli.h"
#include "coordinator/cli/local_agents.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "profctl/v1/agent.grpc.pb.h"
#include "profctl/v1/session.pb.h"
#include "synthetic/synthetic_job.h"
#include "tests/build_paths.h"
#include "tests/in_process_capture.h"
#include "tests/loopback.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"

namespace profctl {
namespace {

using ::profctl::test_paths::AgentBinary;
using ::profctl::testkit::IsOk;
using ::testing::HasSubstr;

constexpr int64_t kStepNumModulus = 1'000'000;
// How far ahead of the test's start the synthetic job's event (a slowdown, a hang) is placed:
// 5 s of 20 ms steps: time for three ASan agents, started side by side, on a loaded machine.
constexpr int64_t kLeadSteps = 250;

std::string PortFile(const std::string& scratch, int r) {
  return absl::StrCat(scratch, "/agent-", r, ".port");
}

// The addresses of the `n` agents of `agents` (spawned side by side), once each wrote its
// --port-file; empty (after a test failure) if one did not.
std::vector<std::string> WaitForAgents(coordinator::LocalAgents& agents, const std::string& scratch,
                                       int n, const RealClock& clock) {
  std::vector<std::string> workers;
  for (int r = 0; r < n; ++r) {
    absl::StatusOr<int> port =
        agents.WaitForPort(static_cast<size_t>(r), PortFile(scratch, r), clock);
    EXPECT_THAT(port, IsOk());
    if (!port.ok()) return {};
    workers.push_back(testkit::LoopbackAddress(*port));
  }
  return workers;
}

TEST(FlightRecorderE2eTest, ASnapshotAfterASlowdownHoldsTheSlowStepsOfEveryHost) {
  RealClock clock;
  const testkit::TempDir tmp;
  const std::string scratch = tmp.path(), logdir = scratch + "/logs";
  // The job slows down kLeadSteps steps from now (the agents start meanwhile), by 3x.
  const std::string base = "world=2,seed=3,step_ms=20,gpus=1,kernels_per_step=4,jitter=0.02";
  synthetic::SyntheticJobConfig config = *synthetic::ParseSyntheticJobConfig(base);
  const int64_t k_slow = synthetic::SyntheticJob(config).StepIndexAt(clock.WallNs()) + kLeadSteps;
  const std::string job = absl::StrCat(base, ",slowdown_at_step=", k_slow, ",slowdown_factor=3");
  config = *synthetic::ParseSyntheticJobConfig(job);
  const synthetic::SyntheticJob model(config);
  ASSERT_GT(model.PeriodNs(k_slow), 2 * model.PeriodNs(k_slow - 1));

  coordinator::LocalAgents agents(scratch);
  constexpr int64_t kSkewMs[] = {0, 730};
  for (int r = 0; r < 3; ++r) {
    std::vector<std::string> args = {"--port=0", "--bind=127.0.0.1",
                                     "--port-file=" + PortFile(scratch, r),
                                     absl::StrCat("--name=worker-", r), "--log-level=warn"};
    if (r < 2) {  // the job's two ranks record; a third agent keeps no past
      args.push_back(absl::StrCat("--synthetic=", job, ",rank=", r));
      args.push_back(absl::StrCat("--clock-skew-ms=", kSkewMs[r]));
      args.push_back("--flight-recorder=30");
      args.push_back("--flight-recorder-mb=16");
    }
    ASSERT_THAT(agents.Spawn(AgentBinary(), args), IsOk());
  }
  const std::vector<std::string> workers = WaitForAgents(agents, scratch, 3, clock);
  ASSERT_EQ(workers.size(), 3u);
  // The ranks started recording before the slowdown (else the past asked for is not all there).
  ASSERT_LT(clock.WallNs(), model.StepStartNs(k_slow) - 500 * kNanosPerMilli)
      << "the agents took too long to start for this test's schedule";
  // The job is a function of true time: the event to wait for is the model's instant at which
  // the 10th slow step has ended.
  const int64_t slow_done = model.StepStartNs(k_slow + 10);
  const StopSignal never;
  clock.WaitUntil(clock.MonoNs() + (slow_done - clock.WallNs()), never);
  ASSERT_GE(clock.WallNs(), slow_done);

  v1::SessionManifest m;
  std::string output;
  const std::string session_dir = logdir + "/plugins/profile/snap";
  const int rc =
      testkit::CaptureInProcess({"capture", "--workers=" + absl::StrJoin(workers, ","), "--last=3s",
                                 "--session=snap", "--logdir=" + logdir, "--tolerance=500"},
                                session_dir, clock, &m, &output);
  // The agent without a recorder fails alone: the session is partial, the ranks are saved.
  EXPECT_EQ(rc, coordinator::kExitPartial) << output;
  EXPECT_EQ(m.request().past_ms(), 3000u);
  EXPECT_EQ(m.request().duration_ms(), 3000u);
  EXPECT_THAT(output, HasSubstr("snapshot of the past: the 3.000 s before the common instant"));
  ASSERT_EQ(m.hosts_size(), 3);
  for (int r = 0; r < 2; ++r) {
    const v1::HostResult& h = m.hosts(r);
    EXPECT_EQ(h.status(), v1::HOST_STATUS_OK) << h.ShortDebugString() << "\n" << output;
    // The window is the past: it ends at the common instant, on every host's clock.
    EXPECT_EQ(h.agent_stop_ns() - h.agent_start_ns(), 3 * kNanosPerSecond);
    EXPECT_LT(h.aligned_stop_ns(), m.start_at_ns() + 500 * kNanosPerMilli);
    EXPECT_GT(h.aligned_stop_ns(), m.start_at_ns() - 500 * kNanosPerMilli);
    EXPECT_GT(h.steps(), 50) << h.ShortDebugString();
    EXPECT_TRUE(PathExists(session_dir + "/" + h.xplane_file())) << h.xplane_file();
  }
  EXPECT_EQ(m.hosts(2).status(), v1::HOST_STATUS_FAILED);
  EXPECT_THAT(m.hosts(2).error().message(), HasSubstr("--flight-recorder"));
  EXPECT_FALSE(m.pod_trace_file().empty());

  // The breakdown has the slow steps, on both hosts, at the slow pace, and the fast ones before.
  absl::StatusOr<std::string> json = ReadFile(session_dir + "/pod_step_breakdown.json");
  ASSERT_THAT(json, IsOk());
  google::protobuf::Struct doc;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(*json, &doc), IsOk());
  const double fast_ms = static_cast<double>(model.PeriodNs(k_slow - 1)) / kNanosPerMilli;
  const double slow_ms = static_cast<double>(model.PeriodNs(k_slow)) / kNanosPerMilli;
  int slow = 0, fast = 0;
  for (const auto& v : doc.fields().at("steps").list_value().values()) {
    const auto& f = v.struct_value().fields();
    const auto step = static_cast<int64_t>(f.at("step").number_value());
    const double ms = f.at("pod_step_time_ms").number_value();
    if (f.at("hosts").list_value().values_size() != 2) continue;
    const int64_t k = k_slow - (k_slow % kStepNumModulus) + step;  // no wrap in 3 s of steps
    if (k >= k_slow) {
      ++slow;
      EXPECT_NEAR(ms, slow_ms, slow_ms * 0.1) << "step " << step;
    } else {
      ++fast;
      EXPECT_NEAR(ms, fast_ms, fast_ms * 0.2) << "step " << step;
    }
  }
  EXPECT_GE(slow, 10) << *json;
  EXPECT_GE(fast, 20);
  EXPECT_TRUE(PathExists(session_dir + "/report.html"));
}

// Hang detection (docs/flight-recorder.md, "Hangs"): rank 1 of 3 never enters the all-reduce of a
// given step; every rank's steps stop (the others wait in it), and each agent's GetStepSignal
// reports its source stalled once --hang-factor times the median step passed, not before. Then
// `capture --last` names rank 1 as never entering it, and the 2 waiters ("Hang verdict"); a
// window recorded after the hang says it starts after the hang.
TEST(FlightRecorderE2eTest, EveryAgentReportsTheStallOfAHungJob) {
  RealClock clock;
  const testkit::TempDir tmp;
  const std::string scratch = tmp.path();
  const std::string base = "world=3,seed=5,step_ms=20,gpus=1,kernels_per_step=2,jitter=0";
  const int64_t k_hang = synthetic::SyntheticJob(*synthetic::ParseSyntheticJobConfig(base))
                             .StepIndexAt(clock.WallNs()) +
                         kLeadSteps;  // the agents start meanwhile
  const std::string job = absl::StrCat(base, ",hang_rank=1,hang_at_step=", k_hang);
  const synthetic::SyntheticJob model(*synthetic::ParseSyntheticJobConfig(job));
  constexpr int kFactor = 5;
  coordinator::LocalAgents agents(scratch);
  for (int r = 0; r < 3; ++r) {
    ASSERT_THAT(agents.Spawn(AgentBinary(),
                             {"--port=0", "--bind=127.0.0.1", "--port-file=" + PortFile(scratch, r),
                              absl::StrCat("--name=worker-", r), "--log-level=warn",
                              absl::StrCat("--synthetic=", job, ",rank=", r),
                              absl::StrCat("--hang-factor=", kFactor), "--flight-recorder=5",
                              "--flight-recorder-mb=16"}),
                IsOk());
  }
  const std::vector<std::string> workers = WaitForAgents(agents, scratch, 3, clock);
  ASSERT_EQ(workers.size(), 3u);
  std::vector<std::unique_ptr<v1::AgentService::Stub>> stubs;
  for (const std::string& w : workers) {
    stubs.push_back(
        v1::AgentService::NewStub(grpc::CreateChannel(w, grpc::InsecureChannelCredentials())));
  }
  auto signal = [&](size_t r) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::GetStepSignalResponse response;
    EXPECT_THAT(stubs[r]->GetStepSignal(&ctx, v1::GetStepSignalRequest(), &response), IsOk());
    return response;
  };
  // The last step ended at the hung step's start; the stall is due kFactor periods later.
  const int64_t period = model.PeriodNs(k_hang - 1);
  const int64_t stall_from = model.StepStartNs(k_hang) + kFactor * period;
  // Before the stall is due, no agent reports one. The model's clock says which answers must be
  // silent: one whose call ended before `stall_from` (a loaded machine only makes fewer of them,
  // never a false failure).
  ASSERT_LT(clock.WallNs(), model.StepStartNs(k_hang)) << "the agents took too long to start";
  for (size_t r = 0; r < 3; ++r) {
    const v1::GetStepSignalResponse response = signal(r);
    if (clock.WallNs() < stall_from) {
      EXPECT_EQ(response.stalls_size(), 0) << "rank " << r << ": " << response.ShortDebugString();
    }
  }
  // Wait (on the clock, no polling sleep) until the stall is due plus a period of margin.
  const int64_t due = stall_from + period;
  const StopSignal never;
  clock.WaitUntil(clock.MonoNs() + (due - clock.WallNs()), never);
  for (size_t r = 0; r < 3; ++r) {
    const v1::GetStepSignalResponse response = signal(r);
    ASSERT_EQ(response.stalls_size(), 1) << "rank " << r << ": " << response.ShortDebugString();
    const v1::StepStall& stall = response.stalls(0);
    EXPECT_EQ(stall.source(), "synthetic");
    EXPECT_EQ(stall.last_step_num(), (k_hang - 1) % kStepNumModulus) << "rank " << r;
    EXPECT_NEAR(static_cast<double>(stall.median_step_ns()), static_cast<double>(period),
                0.05 * static_cast<double>(period));
    EXPECT_GT(stall.stalled_for_ns(), kFactor * stall.median_step_ns());
  }

  // The stall says that the job hangs; a snapshot of the past says who (docs/flight-recorder.md,
  // "Hang verdict"): rank 1 never entered the hung step's all-reduce, ranks 0 and 2 wait in it.
  const std::string logdir = scratch + "/logs";
  const std::string session_dir = logdir + "/plugins/profile/hung";
  v1::SessionManifest m;
  std::string output;
  const int rc =
      testkit::CaptureInProcess({"capture", "--workers=" + absl::StrJoin(workers, ","), "--last=2s",
                                 "--session=hung", "--logdir=" + logdir, "--tolerance=500"},
                                session_dir, clock, &m, &output);
  EXPECT_EQ(rc, coordinator::kExitOk) << output;
  const int64_t hung_step = k_hang % kStepNumModulus;
  const std::string collective = absl::StrCat("all-reduce #1 of step ", hung_step);
  EXPECT_THAT(output, HasSubstr(absl::StrCat("hang: worker-1 (rank 1) never entered ", collective,
                                             "; 2 ranks wait in it since ")));
  EXPECT_THAT(output, HasSubstr("  worker-0 (rank 0) waits: last entered " + collective));
  EXPECT_THAT(output, HasSubstr("  worker-2 (rank 2) waits: last entered " + collective));
  absl::StatusOr<std::string> json = ReadFile(session_dir + "/pod_step_breakdown.json");
  ASSERT_THAT(json, IsOk());
  google::protobuf::Struct doc;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(*json, &doc), IsOk());
  ASSERT_TRUE(doc.fields().contains("hang")) << *json;
  const auto& hang = doc.fields().at("hang").struct_value().fields();
  EXPECT_EQ(hang.at("verdict").string_value(), "hung");
  const auto& hung = hang.at("hung_ranks").list_value().values();
  ASSERT_EQ(hung.size(), 1);
  EXPECT_EQ(hung[0].struct_value().fields().at("host").string_value(), "worker-1");
  EXPECT_EQ(hung[0].struct_value().fields().at("rank").number_value(), 1);
  EXPECT_EQ(hang.at("waiting_ranks").number_value(), 2);
  const auto& id = hang.at("collective").struct_value().fields();
  EXPECT_EQ(id.at("step").number_value(), static_cast<double>(hung_step));
  EXPECT_EQ(id.at("kind").string_value(), "all-reduce");
  EXPECT_EQ(id.at("index").number_value(), 1);
  // The waiters entered it when the model launched it: the hung step's start plus its input and
  // compute, well before the stall was reported.
  const auto since = static_cast<int64_t>(hang.at("waiting_since_ns").number_value());
  EXPECT_GT(since, model.StepStartNs(k_hang));
  EXPECT_LT(since, model.StepStartNs(k_hang) + period);
  absl::StatusOr<std::string> html = ReadFile(session_dir + "/report.html");
  ASSERT_THAT(html, IsOk());
  EXPECT_THAT(*html, HasSubstr("<section id=\"hang\">"));

  // `profctl analyze` on the saved session judges it again, from the files alone.
  v1::SessionManifest unused;
  std::string analyzed;
  EXPECT_EQ(
      testkit::CaptureInProcess({"analyze", session_dir}, session_dir, clock, &unused, &analyzed),
      coordinator::kExitOk)
      << analyzed;
  EXPECT_THAT(analyzed, HasSubstr(absl::StrCat("hang: worker-1 (rank 1) never entered ", collective,
                                               "; 2 ranks wait in it since ")));

  // A window recorded now starts after the hang began (the stalls were reported above): it holds
  // no collective and no step end. The agents' step signal, asked as the window closes, says
  // when the steps stopped, and the verdict says the window cannot show the hang; `analyze`
  // says the same from session.json.
  const std::string after_dir = logdir + "/plugins/profile/after";
  v1::SessionManifest after;
  std::string after_output;
  EXPECT_EQ(testkit::CaptureInProcess(
                {"capture", "--workers=" + absl::StrJoin(workers, ","), "--duration=300",
                 "--session=after", "--logdir=" + logdir, "--tolerance=500"},
                after_dir, clock, &after, &after_output),
            coordinator::kExitOk)
      << after_output;
  for (const v1::HostResult& h : after.hosts()) {
    ASSERT_TRUE(h.step_signal().answered()) << h.host() << ": " << h.step_signal().error();
    ASSERT_EQ(h.step_signal().sources_size(), 1) << h.host();
    EXPECT_TRUE(h.step_signal().sources(0).stalled()) << h.host();
    // The agent's own summary of its source (its hang detector keeps the last 16 steps), not 128
    // samples reduced by the coordinator: profctl asks for it, profctl-agent answers it.
    EXPECT_LE(h.step_signal().sources(0).samples(), 16u) << h.host();
  }
  const std::string window_after =
      "; the window starts after the hang: take `capture --last` covering that instant";
  EXPECT_THAT(after_output, HasSubstr("hang: no step ended on any rank since "));
  EXPECT_THAT(after_output, HasSubstr(window_after));
  absl::StatusOr<std::string> after_json = ReadFile(after_dir + "/pod_step_breakdown.json");
  ASSERT_THAT(after_json, IsOk());
  google::protobuf::Struct after_doc;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(*after_json, &after_doc), IsOk());
  const auto& after_hang = after_doc.fields().at("hang").struct_value().fields();
  EXPECT_EQ(after_hang.at("verdict").string_value(), "cannot_tell");
  EXPECT_EQ(after_hang.at("missing").string_value(), "window_after_hang");
  std::string reanalyzed;
  EXPECT_EQ(
      testkit::CaptureInProcess({"analyze", after_dir}, after_dir, clock, &unused, &reanalyzed),
      coordinator::kExitOk)
      << reanalyzed;
  EXPECT_THAT(reanalyzed, HasSubstr(window_after));
}

}  // namespace
}  // namespace profctl
