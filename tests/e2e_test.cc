// End to end with real processes: profctl-agent children on loopback ports chosen by the kernel,
// captured through the real CLI code path, gRPC and disk.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/collectors/synthetic_job.h"
#include "common/file_util.h"
#include "common/gzip.h"
#include "common/xspace.h"
#include "coordinator/cli.h"
#include "coordinator/grpc_agent_client.h"
#include "coordinator/local_agents.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "profctl/v1/session.pb.h"
#include "tests/temp_dir.h"

extern char** environ;

namespace profctl {
namespace {

using ::testing::HasSubstr;

struct ProcessResult {
  int exit_code = -1;
  std::string out, err;
};

// Starts a program with stdout and stderr going to <scratch>/proc.{out,err}.
pid_t SpawnProcess(std::vector<std::string> argv, const std::string& scratch) {
  const std::string out = scratch + "/proc.out", err = scratch + "/proc.err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) pid = -1;
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

// A loopback port with nothing listening: bound by the kernel's choice, then closed.
int ClosedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

class EndToEndTest : public ::testing::Test {
 protected:
  // Starts agent `rank` of the job; returns its address.
  std::string StartAgent(coordinator::LocalAgents& agents, int rank, const std::string& knobs,
                         int64_t skew_ms) {
    const std::string port_file = absl::StrCat(scratch_, "/agent-", rank, ".port");
    EXPECT_TRUE(agents
                    .Spawn(PROFCTL_AGENT_BINARY,
                           {"--port=0", "--bind=127.0.0.1", "--port-file=" + port_file,
                            absl::StrCat("--name=worker-", rank), "--synthetic=" + knobs,
                            absl::StrCat("--clock-skew-ms=", skew_ms), "--log-level=warn"})
                    .ok());
    absl::StatusOr<int> port = agents.WaitForPort(static_cast<size_t>(rank), port_file, clock_);
    EXPECT_TRUE(port.ok()) << port.status();
    return absl::StrCat("127.0.0.1:", port.value_or(1));
  }

  RealClock clock_;
  const testing::TempDir tmp_;
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

  coordinator::GrpcAgentClientFactory clients;
  std::ostringstream out, err;
  const std::string logdir = scratch_ + "/logs";
  const int rc = coordinator::RunCli({"capture", "--workers=" + absl::StrJoin(workers, ","),
                                      "--duration=800", "--session=e2e", "--logdir=" + logdir},
                                     {&out, &err, &clock_, &clients, ""});
  EXPECT_EQ(rc, coordinator::kExitPartial) << out.str() << err.str();
  EXPECT_THAT(out.str(), HasSubstr("session e2e: partial, 3/4 hosts captured"));

  const std::string dir = logdir + "/plugins/profile/e2e";
  absl::StatusOr<std::string> json = ReadFile(dir + "/session.json");
  ASSERT_TRUE(json.ok());
  profctl::v1::SessionManifest m;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &m).ok());
  ASSERT_EQ(m.hosts_size(), 4);
  EXPECT_EQ(m.status(), "partial");
  EXPECT_EQ(m.hosts(3).status(), "failed");
  EXPECT_THAT(m.hosts(3).error(), HasSubstr("UNAVAILABLE"));
  EXPECT_FALSE(PathExists(dir + "/" + m.hosts(3).host() + ".xplane.pb"));

  std::map<int, std::vector<int64_t>> nccl_ends;  // rank -> aligned all-reduce ends on GPU:0
  for (int r = 0; r < 3; ++r) {
    const auto& h = m.hosts(r);
    ASSERT_EQ(h.status(), "ok") << h.error();
    EXPECT_EQ(h.host(), absl::StrCat("worker-", r));
    // Cristian's bound: the true offset lies within +-rtt/2 of the estimate.
    EXPECT_LE(std::abs(h.clock().offset_ns() - kSkewMs[r] * kNanosPerMilli),
              h.clock().rtt_ns() / 2 + 50 * kNanosPerMicro)
        << "rank " << r << " rtt " << h.clock().rtt_ns();

    absl::StatusOr<std::string> bytes =
        ReadFile(dir + "/worker-" + std::to_string(r) + ".xplane.pb");
    ASSERT_TRUE(bytes.ok());
    tensorflow::profiler::XSpace space;
    ASSERT_TRUE(space.ParseFromString(*bytes));
    std::vector<std::string> planes;
    for (const auto& p : space.planes()) planes.push_back(p.name());
    EXPECT_THAT(planes, ::testing::ElementsAre("/host:CPU", "/device:GPU:0", "/device:GPU:1",
                                               "Task Environment"));
    EXPECT_THAT(space.hostnames(), ::testing::ElementsAre(absl::StrCat("worker-", r)));

    // The trace holds exactly what the job model says for the recorded window.
    agent::SyntheticJobConfig cfg =
        *agent::ParseSyntheticJobConfig(absl::StrCat(kJob, ",rank=", r));
    cfg.clock_skew_ns = kSkewMs[r] * kNanosPerMilli;
    agent::SyntheticJob job(cfg);
    tensorflow::profiler::XSpace expected;
    job.Generate(h.agent_start_ns() - cfg.clock_skew_ns, h.agent_stop_ns() - cfg.clock_skew_ns,
                 &expected);
    EXPECT_EQ(xspace::CountEvents(space), xspace::CountEvents(expected));
    EXPECT_EQ(h.events(), static_cast<uint64_t>(xspace::CountEvents(expected)));
    EXPECT_GE(h.steps(), 800u / (job.period_ns() / kNanosPerMilli) - 2);

    const xspace::XPlaneReader gpu(*xspace::FindPlane(space, "/device:GPU:0"));
    gpu.ForEachEvent([&](const xspace::XLine& line, const xspace::XEvent& e) {
      if (absl::StartsWith(gpu.EventName(e), "ncclDevKernel")) {
        nccl_ends[r].push_back(xspace::EventStartNs(line, e) + xspace::EventDurationNs(e) -
                               h.clock().offset_ns());
      }
    });
  }

  // After alignment every rank's all-reduce ends at the same instant, to within the offsets'
  // uncertainty (the synthetic job ends them at one true instant).
  int matched = 0;
  for (int r = 1; r < 3; ++r) {
    const int64_t bound =
        (m.hosts(0).clock().rtt_ns() + m.hosts(r).clock().rtt_ns()) / 2 + 100 * kNanosPerMicro;
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

  absl::StatusOr<std::string> gz = ReadFile(dir + "/pod.trace.json.gz");
  ASSERT_TRUE(gz.ok());
  absl::StatusOr<std::string> trace = GzipDecompress(*gz);
  ASSERT_TRUE(trace.ok());
  google::protobuf::Struct doc;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(*trace, &doc).ok());
  EXPECT_GT(doc.fields().at("traceEvents").list_value().values_size(), 300);
}

TEST_F(EndToEndTest, BinariesAnswerBadInputWithExitCode2) {
  ProcessResult r = RunProcess({PROFCTL_AGENT_BINARY, "--port=-1"}, scratch_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("profctl-agent: --port=-1 is not in 0..65535"));
  r = RunProcess({PROFCTL_AGENT_BINARY, "--synthetic=world=2,rank=9"}, scratch_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("rank=9 is out of range"));
  r = RunProcess({PROFCTL_CLI_BINARY, "capture", "--workers=h:0"}, scratch_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("profctl capture: worker 'h:0': port '0'"));
}

TEST_F(EndToEndTest, AgentRefusesAPortThatIsTaken) {
  coordinator::LocalAgents agents(scratch_);
  const std::string address = StartAgent(agents, 0, "", 0);
  const std::string port = address.substr(address.find(':') + 1);
  ProcessResult r =
      RunProcess({PROFCTL_AGENT_BINARY, "--bind=127.0.0.1", "--port=" + port}, scratch_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot listen on 127.0.0.1:" + port));
}

TEST_F(EndToEndTest, CtrlCCancelsTheCaptureAndSavesWhatWasRecorded) {
  coordinator::LocalAgents agents(scratch_);
  const std::string worker = StartAgent(agents, 0, "step_ms=20", 0);
  const std::string logdir = scratch_ + "/logs";
  const pid_t pid = SpawnProcess({PROFCTL_CLI_BINARY, "capture", "--workers=" + worker,
                                  "--duration=30000", "--session=int", "--logdir=" + logdir},
                                 scratch_);
  ASSERT_GT(pid, 0);
  // Wait (polling its progress output, at most 20 s) until it is recording, then press Ctrl-C.
  const int64_t deadline = clock_.MonoNs() + 20 * kNanosPerSecond;
  StopSignal never;
  while (clock_.MonoNs() < deadline &&
         !absl::StrContains(ReadFile(scratch_ + "/proc.err").value_or(""), "recording:")) {
    clock_.WaitUntil(clock_.MonoNs() + 20 * kNanosPerMilli, never);
  }
  kill(pid, SIGINT);
  ProcessResult r = WaitProcess(pid, scratch_);
  EXPECT_EQ(r.exit_code, coordinator::kExitPartial) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("interrupted: cancelling the capture"));
  profctl::v1::SessionManifest m;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  ReadFile(logdir + "/plugins/profile/int/session.json").value_or(""), &m)
                  .ok());
  ASSERT_EQ(m.hosts_size(), 1);
  EXPECT_EQ(m.hosts(0).status(), "ok") << m.hosts(0).error();
  EXPECT_TRUE(m.hosts(0).cancelled());
  EXPECT_LT(m.hosts(0).agent_stop_ns() - m.hosts(0).agent_start_ns(), 25 * kNanosPerSecond);
  EXPECT_GT(m.hosts(0).events(), 0u);
  EXPECT_TRUE(PathExists(logdir + "/plugins/profile/int/worker-0.xplane.pb"));
}

TEST_F(EndToEndTest, DemoRunsTheEmbeddedDefault) {
  ProcessResult r = RunProcess({PROFCTL_CLI_BINARY, "demo", "--workers=3", "--duration=1200",
                                "--logdir=" + scratch_ + "/demo", "--session=d"},
                               scratch_);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("session d: ok, 3/3 hosts captured"));
  EXPECT_THAT(r.err, HasSubstr("capturing 3 of 3 workers"));  // progress for a > 1 s capture
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(
        PathExists(absl::StrCat(scratch_, "/demo/plugins/profile/d/worker-", i, ".xplane.pb")));
  }
  EXPECT_TRUE(PathExists(scratch_ + "/demo/plugins/profile/d/pod.trace.json.gz"));
}

}  // namespace
}  // namespace profctl
