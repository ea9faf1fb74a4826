// End to end with real processes: profctl-agent children on loopback ports chosen by the kernel,
// captured through the real CLI code path, gRPC and disk.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/executor.h"
#include "common/file_util.h"
#include "common/gzip.h"
#include "coordinator/cli/cli.h"
#include "coordinator/cli/local_agents.h"
#include "coordinator/clients/grpc_agent_client.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "profctl/v1/session.pb.h"
#include "report/perfetto_trace_check.h"
#include "synthetic/synthetic_job.h"
#include "tests/build_paths.h"
#include "tests/loopback.h"
#include "tests/session_window.h"
#include "tests/status_matchers.h"
#include "tests/tcp_proxy.h"
#include "tests/temp_dir.h"
#include "tests/test_certs.h"
#include "tests/xprof_conformance.h"
#include "xspace/xspace.h"

using ::profctl::test_paths::AgentBinary;
using ::profctl::test_paths::CliBinary;
using ::profctl::testkit::IsOk;

extern char** environ;

namespace profctl {
namespace {

using ::testing::HasSubstr;

struct ProcessResult {
  int exit_code = -1;
  std::string out, err;
};

// Starts a program with stdout and stderr going to <scratch>/proc.{out,err}; with `own_group`, in
// a new process group, as a shell starts a foreground job.
pid_t SpawnProcess(std::vector<std::string> argv, const std::string& scratch,
                   bool own_group = false) {
  const std::string out = scratch + "/proc.out", err = scratch + "/proc.err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (own_group) {
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  }
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ) != 0) pid = -1;
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

ProcessResult WaitProcess(pid_t pid, const std::string& scratch) {
  ProcessResult r;
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid) {
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  r.out = ReadFile(scratch + "/proc.out").value_or("");
  r.err = ReadFile(scratch + "/proc.err").value_or("");
  return r;
}

// Runs a program to completion with its output captured.
ProcessResult RunProcess(std::vector<std::string> argv, const std::string& scratch) {
  return WaitProcess(SpawnProcess(std::move(argv), scratch), scratch);
}

sockaddr_in LoopbackAddress(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

// A loopback port with nothing listening: bound by the kernel's choice, then closed.
int ClosedPort() { return testkit::ClosedLoopbackPort(); }

// True when something accepts TCP connections on 127.0.0.1:port.
bool Listening(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in addr = LoopbackAddress(port);
  const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

class EndToEndTest : public ::testing::Test {
 protected:
  // Polls (every 20 ms, at most 20 s) until `done` holds; returns whether it did.
  bool PollUntil(const std::function<bool()>& done) {
    const int64_t deadline = clock_.MonoNs() + 20 * kNanosPerSecond;
    StopSignal never;
    while (!done()) {
      if (clock_.MonoNs() >= deadline) return false;
      clock_.WaitUntil(clock_.MonoNs() + 20 * kNanosPerMilli, never);
    }
    return true;
  }

  // Waits until profctl `pid` (started by SpawnProcess) has recorded session `session` under
  // `logdir` for 100 ms: its session.json has the window (start_at_ns), and the wall clock is past
  // its start by that much, so every agent holds a few steps. Fails, saying what did not happen
  // and with profctl's output, when profctl exits first or sets no window within 20 s; then
  // profctl is killed and reaped (its agents follow it), so nothing is left recording.
  ::testing::AssertionResult WaitUntilRecording(pid_t pid, const std::string& logdir,
                                                const std::string& session) {
    absl::StatusOr<int64_t> start_at =
        testkit::WaitIntoWindow(clock_, absl::StrCat(logdir, "/plugins/profile/", session),
                                100 * kNanosPerMilli, [pid] { return Running(pid); });
    if (start_at.ok()) return ::testing::AssertionSuccess();
    kill(pid, SIGKILL);
    const ProcessResult r = WaitProcess(pid, scratch_);
    return ::testing::AssertionFailure()
           << "profctl did not record session " << session << ": " << start_at.status()
           << " (exit code " << r.exit_code << ", 137 if killed here)\n"
           << r.out << r.err;
  }

  // Whether process `pid`, a child of this one, has not exited yet (it is left to be reaped).
  static bool Running(pid_t pid) {
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == 0;
  }

  // Sends SIGINT to `target` (profctl's pid, or minus its process group), expects profctl `pid`
  // to cancel, save and exit 3, and returns the manifest of its session "int" under `logdir`.
  profctl::v1::SessionManifest InterruptAndReadManifest(pid_t pid, pid_t target,
                                                        const std::string& logdir) {
    kill(target, SIGINT);
    ProcessResult r = WaitProcess(pid, scratch_);
    EXPECT_EQ(r.exit_code, coordinator::kExitPartial) << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr("interrupted: cancelling the capture"));
    profctl::v1::SessionManifest m;
    EXPECT_THAT(google::protobuf::util::JsonStringToMessage(
                    ReadFile(logdir + "/plugins/profile/int/session.json").value_or(""), &m),
                IsOk());
    return m;
  }

  static constexpr int kDemoWorkers = 3;

  // Starts `profctl demo` in its own process group with kDemoWorkers agents and a long window,
  // waits until it records, and returns its pid and the folder holding its agents' ports and logs
  // (its --work-dir); an empty folder when it did not start recording (the failure said why).
  std::pair<pid_t, std::string> StartLongDemo(const std::string& logdir) {
    const std::string work_dir = scratch_ + "/demo-agents";
    const pid_t pid = SpawnProcess(
        {CliBinary(), "demo", absl::StrCat("--workers=", kDemoWorkers), "--duration=30000",
         "--step-ms=20", "--session=int", "--logdir=" + logdir, "--work-dir=" + work_dir},
        scratch_, /*own_group=*/true);
    EXPECT_GT(pid, 0);
    if (pid <= 0) return {pid, ""};
    const ::testing::AssertionResult recording = WaitUntilRecording(pid, logdir, "int");
    EXPECT_TRUE(recording);
    return {pid, recording ? work_dir : ""};
  }

  // The demo agents' ports, from their port files.
  static std::vector<int> DemoPorts(const std::string& demo_agents) {
    std::vector<int> ports;
    for (int r = 0; r < kDemoWorkers; ++r) {
      absl::StatusOr<int> port =
          coordinator::ReadPortFile(absl::StrCat(demo_agents, "/agent-", r, ".port"));
      EXPECT_THAT(port, IsOk());
      ports.push_back(port.value_or(0));
    }
    return ports;
  }

  // Starts agent `rank` of the job; returns its address.
  std::string StartAgent(coordinator::LocalAgents& agents, int rank, const std::string& knobs,
                         int64_t skew_ms) {
    const std::string port_file = absl::StrCat(scratch_, "/agent-", rank, ".port");
    EXPECT_THAT(agents.Spawn(AgentBinary(),
                             {"--port=0", "--bind=127.0.0.1", "--port-file=" + port_file,
                              absl::StrCat("--name=worker-", rank), "--synthetic=" + knobs,
                              absl::StrCat("--clock-skew-ms=", skew_ms), "--log-level=warn"}),
                IsOk());
    absl::StatusOr<int> port = agents.WaitForPort(static_cast<size_t>(rank), port_file, clock_);
    EXPECT_THAT(port, IsOk());
    return absl::StrCat("127.0.0.1:", port.value_or(1));
  }

  RealClock clock_;
  const testkit::TempDir tmp_;
  const std::string scratch_ = tmp_.path();
};

constexpr char kJob[] =
    "world=3,seed=5,step_ms=40,gpus=2,kernels_per_step=4,straggler_rank=1,"
    "straggler_factor=1.5,input_stall_rank=2,input_stall_ms=10";
constexpr int64_t kSkewMs[] = {0, 30, -20};

TEST_F(EndToEndTest, CapturesRealAgentsAlignsThemAndKeepsPartialResults) {
  coordinator::LocalAgents agents(scratch_);
  std::vector<std::string> workers;
  for (int r = 0; r < 3; ++r) {
    workers.push_back(StartAgent(agents, r, absl::StrCat(kJob, ",rank=", r), kSkewMs[r]));
  }
  const std::string unreachable = absl::StrCat("127.0.0.1:", ClosedPort());
  workers.push_back(unreachable);

  coordinator::GrpcAgentClientFactory clients({.clock = &clock_});
  AsioExecutor executor(&clock_);
  std::ostringstream out, err;
  const std::string logdir = scratch_ + "/logs";
  const int rc =
      // --tolerance: three agents share 2 loaded cores; lateness is not what this test checks.
      coordinator::RunCli(
          {"capture", "--workers=" + absl::StrJoin(workers, ","), "--duration=800", "--session=e2e",
           "--logdir=" + logdir, "--tolerance=500", "--pod-trace-json"},
          {&out, &err, &clock_, &clients, &executor, "", nullptr, nullptr});
  EXPECT_EQ(rc, coordinator::kExitPartial) << out.str() << err.str();
  EXPECT_THAT(out.str(), HasSubstr("session e2e: partial, 3/4 hosts captured"));

  const std::string dir = logdir + "/plugins/profile/e2e";
  absl::StatusOr<std::string> json = ReadFile(dir + "/session.json");
  ASSERT_THAT(json, IsOk());
  profctl::v1::SessionManifest m;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(*json, &m), IsOk());
  ASSERT_EQ(m.hosts_size(), 4);
  EXPECT_EQ(m.status(), profctl::v1::SESSION_STATUS_PARTIAL);
  EXPECT_EQ(m.hosts(3).status(), profctl::v1::HOST_STATUS_FAILED);
  EXPECT_EQ(m.hosts(3).error().code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(PathExists(dir + "/" + m.hosts(3).host() + ".xplane.pb"));

  std::map<int, std::vector<int64_t>> nccl_ends;  // rank -> aligned all-reduce ends on GPU:0
  for (int r = 0; r < 3; ++r) {
    const auto& h = m.hosts(r);
    ASSERT_EQ(h.status(), profctl::v1::HOST_STATUS_OK) << h.error().message();
    EXPECT_EQ(h.host(), absl::StrCat("worker-", r));
    // Cristian's bound: the true offset lies within +-rtt/2 of the estimate.
    EXPECT_LE(std::abs(h.clock().rtt_offset_ns() - kSkewMs[r] * kNanosPerMilli),
              h.clock().rtt_ns() / 2 + 50 * kNanosPerMicro)
        << "rank " << r << " rtt " << h.clock().rtt_ns();

    absl::StatusOr<std::string> bytes =
        ReadFile(dir + "/worker-" + std::to_string(r) + ".xplane.pb");
    ASSERT_THAT(bytes, IsOk());
    tensorflow::profiler::XSpace space;
    ASSERT_TRUE(space.ParseFromString(*bytes));
    std::vector<std::string> planes;
    for (const auto& p : space.planes()) planes.push_back(p.name());
    EXPECT_THAT(planes, ::testing::ElementsAre("/host:CPU", "/device:GPU:0", "/device:GPU:1",
                                               "Task Environment"));
    EXPECT_THAT(space.hostnames(), ::testing::ElementsAre(absl::StrCat("worker-", r)));
    // Every XProf tool can read the saved file (docs/xprof-compatibility.md).
    EXPECT_THAT(testkit::CheckXProfConformance(space, absl::StrCat("worker-", r)),
                ::testing::IsEmpty());

    // The trace holds exactly what the job model says for the recorded window.
    synthetic::SyntheticJobConfig cfg =
        *synthetic::ParseSyntheticJobConfig(absl::StrCat(kJob, ",rank=", r));
    cfg.clock_skew_ns = kSkewMs[r] * kNanosPerMilli;
    synthetic::SyntheticJob job(cfg);
    tensorflow::profiler::XSpace expected;
    job.Generate(h.agent_start_ns() - cfg.clock_skew_ns, h.agent_stop_ns() - cfg.clock_skew_ns,
                 &expected);
    // A stop timer that fired late (a loaded machine) is trimmed back to the window: work begun
    // inside it and still running at its end is kept, clipped and marked cut, where the model
    // (which lists device work once it completes) has none. Each such event is marked.
    int64_t cut = 0;
    for (const auto& plane : space.planes()) {
      const xspace::XPlaneReader reader(plane);
      reader.ForEachEvent([&](const auto&, const auto& e) {
        if (reader.IntStat(e, xspace::kStatStepCut) == 1) ++cut;
      });
    }
    EXPECT_GE(xspace::CountEvents(space), xspace::CountEvents(expected));
    EXPECT_LE(xspace::CountEvents(space), xspace::CountEvents(expected) + cut);
    EXPECT_EQ(h.events(), static_cast<uint64_t>(xspace::CountEvents(space)));
    EXPECT_GE(h.steps(), 800u / (job.period_ns() / kNanosPerMilli) - 2);

    const int64_t profile_start = xspace::ProfileStartNs(space);
    EXPECT_EQ(profile_start, h.agent_start_ns());  // lines are relative to it, as XProf expects
    const xspace::XPlaneReader gpu(*xspace::FindPlane(space, "/device:GPU:0"));
    gpu.ForEachEvent([&](const xspace::XLine& line, const xspace::XEvent& e) {
      // An all-reduce clipped at the window's end (marked cut) ends at that host's window end,
      // not at the collective's one instant: not an end to compare (nor to align on).
      if (absl::StartsWith(gpu.EventName(e), "ncclDevKernel") &&
          gpu.IntStat(e, xspace::kStatStepCut).value_or(0) == 0) {
        nccl_ends[r].push_back(xspace::EventEndNs(profile_start, line, e) - h.clock().offset_ns());
      }
    });
    EXPECT_EQ(h.clock().method(), "collectives");
  }

  // After alignment (refined from the collectives) every rank's all-reduce ends at the same
  // instant within 100 us (the synthetic job ends them at one true instant).
  int matched = 0;
  for (int r = 1; r < 3; ++r) {
    const int64_t bound = 100 * kNanosPerMicro;
    for (int64_t end : nccl_ends[r]) {
      for (int64_t end0 : nccl_ends[0]) {
        if (std::abs(end - end0) < 10 * kNanosPerMilli) {
          EXPECT_LE(std::abs(end - end0), bound);
          ++matched;
        }
      }
    }
  }
  EXPECT_GE(matched, 20);

  // The pod trace in Perfetto's format, and as JSON (--pod-trace-json): the same slices.
  EXPECT_EQ(m.pod_trace_file(), "pod.perfetto-trace.gz");
  EXPECT_EQ(m.pod_trace_json_file(), "pod.trace.json.gz");
  absl::StatusOr<std::string> perfetto = ReadFile(dir + "/pod.perfetto-trace.gz");
  ASSERT_THAT(perfetto, IsOk());
  absl::StatusOr<std::string> bytes = GzipDecompress(*perfetto);
  ASSERT_THAT(bytes, IsOk());
  absl::StatusOr<report::PerfettoTraceModel> model = report::ReadPerfettoTrace(*bytes);
  ASSERT_THAT(model, IsOk());
  absl::StatusOr<std::string> gz = ReadFile(dir + "/pod.trace.json.gz");
  ASSERT_THAT(gz, IsOk());
  absl::StatusOr<std::string> trace = GzipDecompress(*gz);
  ASSERT_THAT(trace, IsOk());
  google::protobuf::Struct doc;
  EXPECT_THAT(google::protobuf::util::JsonStringToMessage(*trace, &doc), IsOk());
  int64_t complete = 0;
  for (const google::protobuf::Value& e : doc.fields().at("traceEvents").list_value().values()) {
    complete += e.struct_value().fields().at("ph").string_value() == "X";
  }
  EXPECT_GT(complete, 300);
  EXPECT_EQ(static_cast<int64_t>(model->slices.size()), complete);
  EXPECT_THAT(out.str(), HasSubstr("/pod.perfetto-trace.gz in ui.perfetto.dev"));
  EXPECT_THAT(out.str(), HasSubstr("chrome://tracing:  load "));
}

TEST_F(EndToEndTest, BinariesAnswerBadInputWithExitCode2) {
  ProcessResult r = RunProcess({AgentBinary(), "--port=-1"}, scratch_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("profctl-agent: --port=-1 is not in 0..65535"));
  r = RunProcess({AgentBinary(), "--synthetic=world=2,rank=9"}, scratch_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("rank=9 is out of range"));
  r = RunProcess({CliBinary(), "capture", "--workers=h:0"}, scratch_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("profctl capture: worker 'h:0': port '0'"));
}

TEST_F(EndToEndTest, AgentRefusesAPortThatIsTaken) {
  coordinator::LocalAgents agents(scratch_);
  const std::string address = StartAgent(agents, 0, "", 0);
  const std::string port = address.substr(address.find(':') + 1);
  ProcessResult r = RunProcess({AgentBinary(), "--bind=127.0.0.1", "--port=" + port}, scratch_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot listen on 127.0.0.1:" + port));
}

TEST_F(EndToEndTest, CtrlCCancelsTheCaptureAndSavesWhatWasRecorded) {
  coordinator::LocalAgents agents(scratch_);
  const std::string worker = StartAgent(agents, 0, "step_ms=20", 0);
  const std::string logdir = scratch_ + "/logs";
  const pid_t pid = SpawnProcess({CliBinary(), "capture", "--workers=" + worker, "--duration=30000",
                                  "--session=int", "--logdir=" + logdir},
                                 scratch_);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitUntilRecording(pid, logdir, "int"));
  const profctl::v1::SessionManifest m = InterruptAndReadManifest(pid, pid, logdir);
  ASSERT_EQ(m.hosts_size(), 1);
  // Saved, and honestly not the window asked for: cut short here, by the interrupt.
  EXPECT_EQ(m.hosts(0).status(), profctl::v1::HOST_STATUS_INCOMPLETE)
      << m.hosts(0).error().message();
  EXPECT_EQ(m.hosts(0).recording(), profctl::v1::RECORDING_TRUNCATED);
  EXPECT_EQ(m.hosts(0).truncated_by(), profctl::v1::TRUNCATED_BY_COORDINATOR);
  EXPECT_TRUE(m.hosts(0).cancelled());
  EXPECT_LT(m.hosts(0).agent_stop_ns() - m.hosts(0).agent_start_ns(), 25 * kNanosPerSecond);
  EXPECT_GT(m.hosts(0).events(), 0u);
  EXPECT_TRUE(PathExists(logdir + "/plugins/profile/int/worker-0.xplane.pb"));
}

// Ctrl-C while a trace is still on its way (the second agent is reached through a proxy stalled
// once the window is open, so its trace cannot arrive) and the first one is saved: profctl stops
// within the interrupt's grace with the saved trace kept, writes no pod output and says which it
// left out and how to build them. The Ctrl-C is sent once the first trace is saved, and the
// proxy stays stalled until profctl has exited (events, no sleep).
TEST_F(EndToEndTest, CtrlCWhileATraceIsOnItsWayKeepsTheSavedOnesAndWritesNoPodOutput) {
  coordinator::LocalAgents agents(scratch_);
  const std::string fast = StartAgent(agents, 0, "world=2,rank=0,step_ms=20", 0);
  const std::string slow = StartAgent(agents, 1, "world=2,rank=1,step_ms=20", 0);
  absl::StatusOr<std::unique_ptr<testkit::TcpProxy>> proxy =
      testkit::TcpProxy::Start("127.0.0.1", std::stoi(slow.substr(slow.rfind(':') + 1)));
  ASSERT_THAT(proxy, IsOk());
  const std::string logdir = scratch_ + "/logs";
  const std::string dir = logdir + "/plugins/profile/int";
  // --tolerance: lateness on 2 loaded cores is not what this test checks (a 20-run campaign
  // beside two busy loops once saw the fast host start over 5 ms late: `incomplete`, late).
  const pid_t pid =
      SpawnProcess({CliBinary(), "capture", "--workers=" + fast + "," + (*proxy)->address(),
                    "--duration=1500", "--tolerance=500", "--session=int", "--logdir=" + logdir},
                   scratch_);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitUntilRecording(pid, logdir, "int"));
  (*proxy)->Stall(true);
  ASSERT_TRUE(PollUntil([&] { return !Running(pid) || PathExists(dir + "/worker-0.xplane.pb"); }));
  ASSERT_TRUE(Running(pid)) << "profctl exited with a trace still on its way";
  const int64_t interrupted = clock_.MonoNs();
  const profctl::v1::SessionManifest m = InterruptAndReadManifest(pid, pid, logdir);
  const int64_t took = clock_.MonoNs() - interrupted;
  RecordProperty("ms_from_ctrl_c_to_exit", static_cast<int>(took / kNanosPerMilli));
  // Promptly: the grace (1.5 s) and a saved trace's session.json, not the pod outputs; a
  // generous bound for a loaded machine (it took 28.7 s with 16 big hosts when it wrote them).
  EXPECT_LT(took, 10 * kNanosPerSecond);
  ASSERT_EQ(m.hosts_size(), 2);
  EXPECT_EQ(m.hosts(0).status(), profctl::v1::HOST_STATUS_OK)
      << m.hosts(0).error().message() << " recording "
      << profctl::v1::Recording_Name(m.hosts(0).recording()) << " lateness "
      << m.hosts(0).lateness_ns() << " ns";
  EXPECT_EQ(m.hosts(0).xplane_file(), "worker-0.xplane.pb");
  EXPECT_EQ(m.hosts(1).status(), profctl::v1::HOST_STATUS_FAILED);
  EXPECT_EQ(m.hosts(1).error().step(), profctl::v1::FAILURE_STEP_INTERRUPTED);
  EXPECT_TRUE(m.pod_trace_file().empty());
  EXPECT_FALSE(PathExists(dir + "/pod.perfetto-trace.gz"));
  EXPECT_FALSE(PathExists(dir + "/report.html"));
  EXPECT_THAT(absl::StrJoin(m.errors(), "\n"),
              HasSubstr(absl::StrCat("interrupted: not written: pod.perfetto-trace.gz, "
                                     "pod_step_breakdown.json, pod_step_breakdown.csv, "
                                     "report.html; every saved host's trace is kept; build them "
                                     "with: profctl analyze ",
                                     dir, " --pod-trace")));
  (*proxy)->Stall(false);
}

// A second Ctrl-C during the first one's graceful stop quits at once, exit 130 (128 + SIGINT),
// instead of waiting out the interrupt's grace. The agent is reached through a proxy stalled once
// the window is open, so the first Ctrl-C's Cancel and the rest of the trace cannot arrive: without
// the second, profctl would wait the whole grace and exit 3. The second is sent once stderr says
// the first was taken (no sleep: an event).
TEST_F(EndToEndTest, ASecondCtrlCDuringTheGracefulStopQuitsAtOnce) {
  coordinator::LocalAgents agents(scratch_);
  const std::string worker = StartAgent(agents, 0, "step_ms=20", 0);
  absl::StatusOr<std::unique_ptr<testkit::TcpProxy>> proxy =
      testkit::TcpProxy::Start("127.0.0.1", std::stoi(worker.substr(worker.rfind(':') + 1)));
  ASSERT_THAT(proxy, IsOk());
  const std::string logdir = scratch_ + "/logs";
  const pid_t pid = SpawnProcess({CliBinary(), "capture", "--workers=" + (*proxy)->address(),
                                  "--duration=30000", "--session=int", "--logdir=" + logdir},
                                 scratch_);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitUntilRecording(pid, logdir, "int"));
  (*proxy)->Stall(true);
  kill(pid, SIGINT);
  const bool taken = PollUntil([&] {
    return !Running(pid) || absl::StrContains(ReadFile(scratch_ + "/proc.err").value_or(""),
                                              "interrupted: cancelling the capture");
  });
  ASSERT_TRUE(taken);
  ASSERT_TRUE(Running(pid)) << "profctl exited before the second Ctrl-C; its grace is 1.5 s";
  const int64_t second = clock_.MonoNs();
  kill(pid, SIGINT);
  const ProcessResult r = WaitProcess(pid, scratch_);
  const int64_t took = clock_.MonoNs() - second;
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << r.out << r.err;
  // At once (the exit code says the grace was not waited out: that would exit 3).
  EXPECT_LT(took, 3 * kNanosPerSecond);
  EXPECT_THAT(r.err, HasSubstr("interrupt again to quit at once"));
  // The folder still says what it holds: a session that did not finish, which the next capture
  // into this log dir marks ABANDONED.
  profctl::v1::SessionManifest m;
  EXPECT_THAT(google::protobuf::util::JsonStringToMessage(
                  ReadFile(logdir + "/plugins/profile/int/session.json").value_or(""), &m),
              IsOk());
  EXPECT_EQ(m.status(), profctl::v1::SESSION_STATUS_RUNNING);
}

// A coordinator killed outright mid-capture: its folder already says RUNNING with its hosts, and
// the next capture into the same log dir marks it ABANDONED instead of leaving it ambiguous.
TEST_F(EndToEndTest, KilledCoordinatorLeavesAFolderThatSaysWhatItHolds) {
  coordinator::LocalAgents agents(scratch_);
  const std::string worker = StartAgent(agents, 0, "step_ms=20", 0);
  const std::string logdir = scratch_ + "/logs";
  const pid_t pid = SpawnProcess({CliBinary(), "capture", "--workers=" + worker, "--duration=30000",
                                  "--session=killed", "--logdir=" + logdir},
                                 scratch_);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitUntilRecording(pid, logdir, "killed"));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  WaitProcess(pid, scratch_);
  const std::string manifest = logdir + "/plugins/profile/killed/session.json";
  profctl::v1::SessionManifest m;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(ReadFile(manifest).value_or(""), &m),
              IsOk());
  EXPECT_EQ(m.status(), profctl::v1::SESSION_STATUS_RUNNING);
  EXPECT_EQ(m.coordinator_pid(), pid);
  ASSERT_EQ(m.hosts_size(), 1);
  EXPECT_EQ(m.hosts(0).address(), worker);

  // The next capture into the log dir (here of an unreachable worker: it only needs to start).
  ProcessResult next =
      RunProcess({CliBinary(), "capture", "--workers=127.0.0.1:" + std::to_string(ClosedPort()),
                  "--duration=10", "--session=next", "--logdir=" + logdir},
                 scratch_);
  EXPECT_THAT(next.err, HasSubstr("killed: abandoned by coordinator pid"));
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(ReadFile(manifest).value_or(""), &m),
              IsOk());
  EXPECT_EQ(m.status(), profctl::v1::SESSION_STATUS_ABANDONED);
  // The SIGKILL dropped its lock: the host, killed mid-window with no
  // trace saved, is rebuilt as failed, and nothing temporary or the marker is left.
  ASSERT_EQ(m.hosts_size(), 1);
  EXPECT_EQ(m.hosts(0).status(), profctl::v1::HOST_STATUS_FAILED);
  EXPECT_EQ(m.hosts(0).error().step(), profctl::v1::FAILURE_STEP_INTERRUPTED);
  for (const auto& e : std::filesystem::directory_iterator(logdir + "/plugins/profile/killed")) {
    EXPECT_THAT(e.path().filename().string(), ::testing::Not(HasSubstr(".tmp.")));
    EXPECT_NE(e.path().filename().string(), ".profctl_running");
  }
}

TEST_F(EndToEndTest, DemoRunsTheEmbeddedDefault) {
  ProcessResult r = RunProcess({CliBinary(), "demo", "--workers=3", "--duration=1200",
                                "--logdir=" + scratch_ + "/demo", "--session=d"},
                               scratch_);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("session d: ok, 3/3 hosts captured"));
  EXPECT_THAT(r.err, HasSubstr("capturing 3 of 3 workers"));  // progress for a > 1 s capture
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(
        PathExists(absl::StrCat(scratch_, "/demo/plugins/profile/d/worker-", i, ".xplane.pb")));
  }
  EXPECT_TRUE(PathExists(scratch_ + "/demo/plugins/profile/d/pod.perfetto-trace.gz"));
  // The demo answers the question: who straggles and why, who is input-bound and by how much.
  EXPECT_THAT(r.out, HasSubstr("pod step breakdown of d: 3 hosts"));
  EXPECT_THAT(r.out, HasSubstr("straggler: worker-1"));
  EXPECT_THAT(r.out, HasSubstr("typical cause compute"));
  EXPECT_THAT(r.out, HasSubstr("input-bound: worker-2"));
  EXPECT_THAT(r.out, HasSubstr("report: "));
  for (const char* f : {"pod_step_breakdown.json", "pod_step_breakdown.csv", "report.html"}) {
    EXPECT_TRUE(PathExists(absl::StrCat(scratch_, "/demo/plugins/profile/d/", f))) << f;
  }
}

TEST_F(EndToEndTest, LocalAgentsReportABadBinaryAndAnInterruptedStart) {
  coordinator::LocalAgents agents(scratch_);
  absl::Status s = agents.Spawn(scratch_ + "/no-such-agent", {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("no-such-agent: No such file or directory"));
  // A child that never writes its port file: an interrupt ends the wait at once.
  ASSERT_THAT(agents.Spawn("/bin/sleep", {"30"}), IsOk());
  StopSignal interrupt;
  interrupt.Stop();
  absl::StatusOr<int> port = agents.WaitForPort(0, scratch_ + "/never.port", clock_, &interrupt);
  EXPECT_EQ(port.status().code(), absl::StatusCode::kCancelled) << port.status();
  EXPECT_THAT(std::string(port.status().message()), HasSubstr("interrupted"));
}

TEST_F(EndToEndTest, DemoCtrlCCancelsInOrderAndStopsItsAgents) {
  const std::string logdir = scratch_ + "/demo";
  auto [pid, demo_agents] = StartLongDemo(logdir);
  ASSERT_FALSE(demo_agents.empty());
  const std::vector<int> ports = DemoPorts(demo_agents);
  for (int port : ports) EXPECT_TRUE(Listening(port)) << port;
  // What a terminal's Ctrl-C does: SIGINT to the whole foreground process group.
  const profctl::v1::SessionManifest m = InterruptAndReadManifest(pid, -pid, logdir);
  ASSERT_EQ(m.hosts_size(), kDemoWorkers);
  for (const auto& h : m.hosts()) {
    // Only profctl got the SIGINT: each agent was cancelled by profctl and sent its trace back.
    EXPECT_EQ(h.status(), profctl::v1::HOST_STATUS_INCOMPLETE)
        << h.host() << ": " << h.error().message();
    EXPECT_EQ(h.truncated_by(), profctl::v1::TRUNCATED_BY_COORDINATOR) << h.host();
    EXPECT_TRUE(h.cancelled()) << h.host();
    EXPECT_GT(h.events(), 0u) << h.host();
    EXPECT_TRUE(PathExists(absl::StrCat(logdir, "/plugins/profile/int/", h.host(), ".xplane.pb")));
  }
  // profctl reaped its agents before exiting: none listens any more.
  for (int port : ports) EXPECT_FALSE(Listening(port)) << port;
}

TEST_F(EndToEndTest, DemoKilledOutrightTakesItsAgentsWithIt) {
  auto [pid, demo_agents] = StartLongDemo(scratch_ + "/demo");
  ASSERT_FALSE(demo_agents.empty());
  const std::vector<int> ports = DemoPorts(demo_agents);
  kill(pid, SIGKILL);
  WaitProcess(pid, scratch_);
  // PR_SET_PDEATHSIG: every agent gets SIGTERM when profctl dies, however it dies.
  EXPECT_TRUE(PollUntil([&] {
    return std::none_of(ports.begin(), ports.end(), [](int port) { return Listening(port); });
  }));
}

TEST_F(EndToEndTest, AgentServesBeyondLoopbackOnlyWithClientAuthenticationOrInsecure) {
  const std::string port_file = scratch_ + "/insecure.port";
  ProcessResult r = RunProcess(
      {AgentBinary(), "--bind=0.0.0.0", "--port=0", "--port-file=" + port_file}, scratch_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--bind=0.0.0.0 without client authentication would let anyone"));
  EXPECT_FALSE(PathExists(port_file));
  coordinator::LocalAgents agents(scratch_);
  ASSERT_THAT(agents.Spawn(AgentBinary(), {"--insecure", "--port=0", "--port-file=" + port_file,
                                           "--log-level=warn"}),
              IsOk());
  absl::StatusOr<int> port = agents.WaitForPort(0, port_file, clock_);
  ASSERT_THAT(port, IsOk());
  EXPECT_TRUE(Listening(*port));
  EXPECT_THAT(ReadFile(agents.log(0)).value_or(""),
              HasSubstr("--insecure: serving on 0.0.0.0 with no client authentication"));
}

TEST_F(EndToEndTest, CaptureOverTlsWithATokenAndAWrongTokenFailsOnlyThatHost) {
  ASSERT_TRUE(testkit::HaveOpenssl()) << "scripts/bootstrap.sh --test installs openssl";
  const testkit::TestCerts certs = testkit::MakeTestCerts(scratch_);
  ASSERT_FALSE(certs.ca_cert.empty());
  coordinator::LocalAgents agents(scratch_);
  std::vector<std::string> workers;
  // Agent 0 wants certs.token; agent 1 another token, so profctl's is wrong there.
  for (const std::string& token_file : {certs.token_file, certs.wrong_token_file}) {
    const size_t i = workers.size();
    const std::string port_file = absl::StrCat(scratch_, "/tls-", i, ".port");
    ASSERT_THAT(agents.Spawn(AgentBinary(),
                             {"--bind=127.0.0.1", "--port=0", "--port-file=" + port_file,
                              absl::StrCat("--name=secure-", i), "--tls-cert=" + certs.server_cert,
                              "--tls-key=" + certs.server_key, "--token-file=" + token_file,
                              "--log-level=warn"}),
                IsOk());
    absl::StatusOr<int> port = agents.WaitForPort(i, port_file, clock_);
    ASSERT_THAT(port, IsOk());
    workers.push_back(absl::StrCat("127.0.0.1:", *port));
  }
  // The profctl binary (its main wires the flags to its clients).
  ProcessResult r = RunProcess({CliBinary(), "ping", "--workers=" + workers[0],
                                "--tls-ca=" + certs.ca_cert, "--token-file=" + certs.token_file},
                               scratch_);
  EXPECT_EQ(r.exit_code, coordinator::kExitOk) << r.out << r.err;
  r = RunProcess({CliBinary(), "ping", "--workers=" + workers[0]}, scratch_);
  EXPECT_EQ(r.exit_code, coordinator::kExitFailed) << r.out << r.err;

  coordinator::GrpcAgentClientFactory clients({.clock = &clock_});
  AsioExecutor executor(&clock_);
  std::ostringstream out, err;
  coordinator::CliEnv env{&out, &err, &clock_, &clients, &executor, "", nullptr, nullptr};
  env.secure_clients = [this](std::shared_ptr<const coordinator::AgentCredentials> c)
      -> std::unique_ptr<coordinator::AgentClientFactory> {
    return std::make_unique<coordinator::GrpcAgentClientFactory>(
        coordinator::GrpcAgentClientOptions{.clock = &clock_, .credentials = std::move(c)});
  };
  const std::string logdir = scratch_ + "/logs";
  const int rc =
      coordinator::RunCli({"capture", "--workers=" + absl::StrJoin(workers, ","), "--duration=300",
                           "--session=tls", "--logdir=" + logdir, "--tolerance=500",
                           "--tls-ca=" + certs.ca_cert, "--token-file=" + certs.token_file},
                          env);
  EXPECT_EQ(rc, coordinator::kExitPartial) << out.str() << err.str();
  profctl::v1::SessionManifest m;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(
                  ReadFile(logdir + "/plugins/profile/tls/session.json").value_or(""), &m),
              IsOk());
  ASSERT_EQ(m.hosts_size(), 2);
  EXPECT_EQ(m.hosts(0).status(), profctl::v1::HOST_STATUS_OK) << m.hosts(0).error().message();
  EXPECT_EQ(m.hosts(0).host(), "secure-0");
  EXPECT_GT(m.hosts(0).events(), 0u);
  EXPECT_EQ(m.hosts(1).status(), profctl::v1::HOST_STATUS_FAILED);
  EXPECT_EQ(m.hosts(1).error().code(), static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(m.hosts(1).error().message(), HasSubstr("wrong bearer token"));
  EXPECT_THAT(out.str(), HasSubstr("wrong bearer token"));
}

}  // namespace
}  // namespace profctl
