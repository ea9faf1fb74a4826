// `profctl serve` end to end, in-process through the real CLI code, gRPC and disk: an in-process
// agent (two endpoints, synthetic job), the daemon with a bearer token, `profctl capture
// --coordinator`, `profctl sessions --coordinator`, ListSchedules, a wrong token, /metrics over
// HTTP, SIGHUP-style reload and shutdown.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/service/agent_server.h"
#include "common/clock.h"
#include "common/executor.h"
#include "common/file_util.h"
#include "common/port_file.h"
#include "coordinator/cli/cli.h"
#include "coordinator/clients/agent_credentials.h"
#include "coordinator/clients/grpc_agent_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profctl/v1/coordinator.grpc.pb.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"
#include "tests/test_certs.h"

using ::profctl::testkit::IsOk;

namespace profctl {
namespace {

using ::testing::HasSubstr;

// GET `path` from 127.0.0.1:port; the whole response (status line, headers, body).
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string req = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\n\r\n");
  (void)write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testkit::HaveOpenssl());
    certs_ = testkit::MakeTestCerts(tmp_.path());
    agent::AgentOptions o;
    o.port = 0;
    o.bind = "127.0.0.1";
    o.endpoints = 2;
    o.synthetic = "step_ms=20";
    absl::StatusOr<std::unique_ptr<agent::AgentServer>> server = agent::AgentServer::Start(
        o, {.clock = &clock_, .executor = &agent_executor_, .hostname = "machine"});
    ASSERT_THAT(server, IsOk());
    agent_ = *std::move(server);
    workers_ = absl::StrCat("127.0.0.1:", agent_->ports()[0], ",127.0.0.1:", agent_->ports()[1]);
    logdir_ = JoinPath(tmp_.path(), "logs");
    config_ = JoinPath(tmp_.path(), "coordinator.yaml");
    ASSERT_THAT(WriteFileAtomically(config_, absl::StrCat("logdir: ", logdir_, R"(
schedules:
  - name: nightly
    targets: [)",
                                                          workers_, R"(]
    cron: "0 3 * * *"
    duration: 300ms
)")),
                IsOk());
  }

  // Starts `profctl serve` on a thread; returns its CoordinatorService port, or 0 (with a
  // failure that says why) when serve returned without writing its port file, or had not written
  // it within 30 s.
  int StartServe(std::vector<std::string> extra = {}) {
    const std::string port_file = JoinPath(tmp_.path(), "serve.port");
    std::vector<std::string> args = {"serve",
                                     "--config=" + config_,
                                     "--port=0",
                                     "--port-file=" + port_file,
                                     "--metrics-port=0",
                                     "--serve-token-file=" + certs_.token_file,
                                     "--log-level=warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    serve_thread_ = std::thread([this, args] {
      std::ostringstream out, err;
      CliEnvFor(&out, &err, [&](const coordinator::CliEnv& env) {
        serve_rc_ = coordinator::RunCli(args, env);
      });
      serve_err_ = err.str();
      serve_returned_ = true;  // after serve_rc_ and serve_err_: they may be read once it is set
    });
    const int64_t deadline = clock_.MonoNs() + 30 * kNanosPerSecond;
    StopSignal never;
    while (!PathExists(port_file) && !serve_returned_.load() && clock_.MonoNs() < deadline) {
      clock_.WaitUntil(clock_.MonoNs() + 10 * kNanosPerMilli, never);
    }
    absl::StatusOr<std::string> ports = ReadFile(port_file);
    if (!ports.ok()) {
      if (serve_returned_.load()) {
        ADD_FAILURE() << "profctl serve returned " << serve_rc_ << " without writing " << port_file
                      << ":\n"
                      << serve_err_;
      } else {
        ADD_FAILURE() << "profctl serve wrote no " << port_file << " within 30 s";
      }
      return 0;
    }
    // The agent's format: the service port, then metrics=PORT.
    EXPECT_THAT(*ports, ::testing::MatchesRegex("[0-9]+\nmetrics=[0-9]+\n"));
    absl::StatusOr<PortFile> file = ParseServePortFile(*ports);
    EXPECT_THAT(file, IsOk());
    if (!file.ok()) return 0;
    metrics_port_ = file->metrics_port;
    return file->ports.front();
  }
  void StopServe() {
    if (!serve_thread_.joinable()) return;
    interrupt_.Stop();
    serve_thread_.join();
    EXPECT_EQ(serve_rc_, 0) << serve_err_;
  }
  void TearDown() override { StopServe(); }

  // Runs `fn` with a CliEnv like profctl's main (real executor, pool and gRPC clients).
  void CliEnvFor(std::ostream* out, std::ostream* err,
                 const std::function<void(const coordinator::CliEnv&)>& fn) {
    coordinator::GrpcAgentClientFactory clients({.clock = &clock_});
    AsioExecutor executor(&clock_);
    ThreadWorkPool pool(2);
    coordinator::CliEnv env;
    env.out = out;
    env.err = err;
    env.clock = &clock_;
    env.clients = &clients;
    env.executor = &executor;
    env.interrupt = &interrupt_;
    env.pool = &pool;
    env.hup_reloads = &hup_reloads_;
    env.reload_requests = &reload_requests_;
    env.secure_clients = [this](std::shared_ptr<const coordinator::AgentCredentials> c) {
      return std::make_unique<coordinator::GrpcAgentClientFactory>(
          coordinator::GrpcAgentClientOptions{.clock = &clock_, .credentials = std::move(c)});
    };
    fn(env);
  }

  // `profctl <args>` as a client: exit code, stdout + stderr.
  int Cli(std::vector<std::string> args, std::string* output) {
    std::ostringstream out, err;
    StopSignal no_interrupt;
    coordinator::GrpcAgentClientFactory clients({.clock = &clock_});
    AsioExecutor executor(&clock_);
    coordinator::CliEnv env;
    env.out = &out;
    env.err = &err;
    env.clock = &clock_;
    env.clients = &clients;
    env.executor = &executor;
    env.interrupt = &no_interrupt;
    const int rc = coordinator::RunCli(args, env);
    *output = out.str() + err.str();
    return rc;
  }

  std::unique_ptr<v1::CoordinatorService::Stub> Stub(int port) {
    return v1::CoordinatorService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  const testkit::TempDir tmp_;
  testkit::TestCerts certs_;
  RealClock clock_;
  AsioExecutor agent_executor_{&clock_};
  std::unique_ptr<agent::AgentServer> agent_;
  std::string workers_, logdir_, config_;
  StopSignal interrupt_;
  std::atomic<bool> hup_reloads_{false};
  std::atomic<int> reload_requests_{0};
  std::thread serve_thread_;
  std::atomic<bool> serve_returned_{false};
  int serve_rc_ = -1;
  std::string serve_err_;
  int metrics_port_ = 0;
};

TEST_F(ServeTest, CaptureThroughTheDaemonListItAndScrapeItsMetrics) {
  const int port = StartServe();
  ASSERT_GT(port, 0);  // StartServe said why not
  const std::string coordinator = absl::StrCat("--coordinator=127.0.0.1:", port);
  const std::string token = "--token-file=" + certs_.token_file;

  std::string out;
  EXPECT_EQ(Cli({"capture", coordinator, token, "--workers=" + workers_, "--duration=300",
                 "--session=remote1", "--tolerance=500"},
                &out),
            coordinator::kExitOk)
      << out;
  EXPECT_THAT(out, HasSubstr("session remote1: ok, 2/2 hosts captured"));
  EXPECT_THAT(out, HasSubstr(JoinPath(logdir_, "plugins/profile/remote1")));
  // An ordinary session folder, with what started it.
  absl::StatusOr<std::string> json =
      ReadFile(JoinPath(logdir_, "plugins/profile/remote1/session.json"));
  ASSERT_THAT(json, IsOk());
  EXPECT_THAT(*json, HasSubstr("\"kind\": \"api\""));
  EXPECT_TRUE(PathExists(JoinPath(logdir_, "plugins/profile/remote1/report.html")));

  // The same name again: refused as a usage error.
  EXPECT_EQ(Cli({"capture", coordinator, token, "--workers=" + workers_, "--duration=300",
                 "--session=remote1"},
                &out),
            coordinator::kExitUsage);
  EXPECT_THAT(out, HasSubstr("ALREADY_EXISTS"));

  // No token, or the wrong one: refused, nothing started.
  EXPECT_EQ(Cli({"sessions", coordinator}, &out), coordinator::kExitFailed);
  EXPECT_THAT(out, HasSubstr("UNAUTHENTICATED: this coordinator requires a bearer token"));
  EXPECT_EQ(Cli({"sessions", coordinator, "--token-file=" + certs_.wrong_token_file}, &out),
            coordinator::kExitFailed);
  EXPECT_THAT(out, HasSubstr("PERMISSION_DENIED"));

  EXPECT_EQ(Cli({"sessions", coordinator, token}, &out), coordinator::kExitOk) << out;
  EXPECT_THAT(out, HasSubstr("remote1"));
  EXPECT_THAT(out, HasSubstr("ok"));
  EXPECT_THAT(out, HasSubstr("api"));
  // Locally, from the log dir, the same session.
  EXPECT_EQ(Cli({"sessions", "--logdir=" + logdir_}, &out), coordinator::kExitOk);
  EXPECT_THAT(out, HasSubstr("remote1"));

  EXPECT_EQ(Cli({"schedules", coordinator, token}, &out), coordinator::kExitOk) << out;
  EXPECT_THAT(out, HasSubstr("nightly"));
  EXPECT_THAT(out, HasSubstr("cron 0 3 * * *"));
  EXPECT_THAT(out, HasSubstr("03:00:00Z"));  // the next fire time, in UTC
  EXPECT_THAT(out, HasSubstr("config: " + config_));
  EXPECT_EQ(Cli({"schedules", coordinator}, &out), coordinator::kExitFailed);  // no token
  EXPECT_EQ(Cli({"schedules"}, &out), coordinator::kExitUsage);

  // ListSchedules and GetSession with the token.
  auto stub = Stub(port);
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + certs_.token);
    v1::ListSchedulesResponse r;
    ASSERT_THAT(stub->ListSchedules(&ctx, {}, &r), IsOk());
    ASSERT_EQ(r.schedules_size(), 1);
    EXPECT_EQ(r.schedules(0).name(), "nightly");
    EXPECT_EQ(r.schedules(0).timing(), "cron 0 3 * * *");
    EXPECT_GT(r.schedules(0).next_fire_wall_ns(), clock_.WallNs());
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + certs_.token);
    v1::GetSessionRequest req;
    req.set_session("remote1");
    v1::SessionInfo info;
    ASSERT_THAT(stub->GetSession(&ctx, req, &info), IsOk());
    EXPECT_EQ(info.manifest().hosts_size(), 2);
    EXPECT_FALSE(info.running());
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + certs_.token);
    v1::GetSessionRequest req;
    req.set_session("../etc");
    v1::SessionInfo info;
    EXPECT_EQ(stub->GetSession(&ctx, req, &info).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }

  // /metrics over HTTP (Prometheus text), /healthz, and a 404.
  ASSERT_GT(metrics_port_, 0);
  const std::string metrics = HttpGet(metrics_port_, "/metrics");
  EXPECT_THAT(metrics, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(metrics, HasSubstr("text/plain; version=0.0.4"));
  EXPECT_THAT(metrics, HasSubstr("profctl_coordinator_captures_started_total 1\n"));
  EXPECT_THAT(metrics, HasSubstr("profctl_coordinator_captures_finished_total{outcome=\"ok\"} 1"));
  EXPECT_THAT(HttpGet(metrics_port_, "/healthz"), HasSubstr("ok"));
  EXPECT_THAT(HttpGet(metrics_port_, "/nope"), HasSubstr("HTTP/1.1 404"));

  // A reload request (what SIGHUP does) with a broken config is refused; the daemon serves on.
  ASSERT_THAT(WriteFileAtomically(config_, "logdir: x\nbogus: 1\n"), IsOk());
  reload_requests_.fetch_add(1);
  interrupt_.Poke();
  for (int i = 0; i < 500 && !absl::StrContains(HttpGet(metrics_port_, "/metrics"),
                                                "config_reloads_total{result=\"error\"} 1");
       ++i) {
    usleep(10'000);
  }
  EXPECT_THAT(HttpGet(metrics_port_, "/metrics"),
              HasSubstr("profctl_coordinator_config_reloads_total{result=\"error\"} 1"));
  EXPECT_TRUE(hup_reloads_.load());
  StopServe();
}

// A condition-triggered schedule over real gRPC: an agent whose synthetic job slows down 3x a few
// seconds from now (step_ms 20 -> 60). The daemon polls AgentService.GetStepSignal every second
// and captures the pod by itself, recording the trigger in session.json; `profctl schedules`
// shows the watch. The schedule's wide tolerance: the trigger is under test, not start lateness
// (on CI's 2 loaded cores this in-process agent once started its window 7.8 ms late, past the 5 ms
// default, and the session was rightly partial).
// Idle WatchSessions streams of someone else fill the daemon's cap (32): a remote capture's own
// watch is refused, and it follows its session by asking for it instead of losing it (not
// printing "lost session" and exiting 1 while the capture runs on).
TEST_F(ServeTest, ARemoteCaptureFollowsItsSessionWhenIdleWatchersFillTheCap) {
  const int port = StartServe();
  ASSERT_GT(port, 0);  // StartServe said why not
  auto stub = Stub(port);
  struct Watch {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> reader;
  };
  std::vector<std::unique_ptr<Watch>> idle;
  for (int i = 0; i < 40; ++i) {
    auto w = std::make_unique<Watch>();
    w->ctx.AddMetadata("authorization", "Bearer " + certs_.token);
    w->reader = stub->WatchSessions(&w->ctx, v1::WatchSessionsRequest());
    w->reader->WaitForInitialMetadata();  // sent once the watch is registered (or refused)
    idle.push_back(std::move(w));
  }
  // The cap holds: one more is refused at once.
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + certs_.token);
    auto reader = stub->WatchSessions(&ctx, v1::WatchSessionsRequest());
    v1::SessionEvent e;
    EXPECT_FALSE(reader->Read(&e));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  std::string out;
  EXPECT_EQ(Cli({"capture", absl::StrCat("--coordinator=127.0.0.1:", port),
                 "--token-file=" + certs_.token_file, "--workers=" + workers_, "--duration=300",
                 "--session=crowded", "--tolerance=500"},
                &out),
            coordinator::kExitOk)
      << out;
  EXPECT_THAT(out, HasSubstr("following it by asking the coordinator"));
  EXPECT_THAT(out, HasSubstr("session crowded: ok, 2/2 hosts captured"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("lost session")));
  for (auto& w : idle) w->ctx.TryCancel();
  for (auto& w : idle) w->reader->Finish();
}

TEST_F(ServeTest, ATriggerCapturesBySelfWhenTheJobSlowsDown) {
  agent::AgentOptions o;
  o.port = 0;
  o.bind = "127.0.0.1";
  const int64_t slowdown_at_ms = clock_.WallNs() / kNanosPerMilli + 4000;
  o.synthetic = absl::StrCat("step_ms=20,slowdown_factor=3,slowdown_at_ms=", slowdown_at_ms);
  o.flight_recorder_s = 10;  // so the trigger's snapshot holds the slow steps that fired it
  absl::StatusOr<std::unique_ptr<agent::AgentServer>> slowing = agent::AgentServer::Start(
      o, {.clock = &clock_, .executor = &agent_executor_, .hostname = "machine"});
  ASSERT_THAT(slowing, IsOk());
  const std::string target = absl::StrCat("127.0.0.1:", (*slowing)->ports()[0]);
  ASSERT_THAT(WriteFileAtomically(config_, absl::StrCat("logdir: ", logdir_, R"(
schedules:
  - name: slow
    targets: [)",
                                                        target, R"(]
    trigger: {threshold: 1.5, poll: 1s, window: 1s, baseline: 10s, sustain: 1, cooldown: 1h}
    duration: 300ms
    tolerance: 500ms
)")),
              IsOk());
  const int port = StartServe();
  ASSERT_GT(port, 0);  // StartServe said why not
  const std::string coordinator = absl::StrCat("--coordinator=127.0.0.1:", port);
  const std::string token = "--token-file=" + certs_.token_file;

  // Watching: the healthy job's steps, before the slowdown.
  std::string out;
  ASSERT_EQ(Cli({"schedules", coordinator, token}, &out), coordinator::kExitOk) << out;
  EXPECT_THAT(out, HasSubstr("trigger step_time > 1.5x its 10s baseline"));

  // It fires by itself within seconds of the slowdown (bounded: 30 s).
  std::string session;
  for (int i = 0; i < 3000 && session.empty(); ++i) {
    std::error_code ec;
    for (const auto& entry :
         std::filesystem::directory_iterator(JoinPath(logdir_, "plugins/profile"), ec)) {
      const std::string name = entry.path().filename().string();
      // The firing's second session, the next window (the first is NAME-past).
      if (absl::StartsWith(name, "slow_") && !absl::EndsWith(name, "-past") &&
          PathExists(JoinPath(logdir_, "plugins/profile/" + name + "/session.json"))) {
        session = name;
      }
    }
    if (session.empty()) usleep(10'000);
  }
  ASSERT_FALSE(session.empty()) << serve_err_;
  // session.json is written when the session starts and again when it ends.
  absl::StatusOr<std::string> json;
  for (int i = 0; i < 3000; ++i) {
    json = ReadFile(JoinPath(logdir_, "plugins/profile/" + session + "/session.json"));
    if (json.ok() && !absl::StrContains(*json, "SESSION_STATUS_RUNNING")) break;
    usleep(10'000);
  }
  ASSERT_THAT(json, IsOk());
  EXPECT_THAT(*json, HasSubstr("\"status\": \"SESSION_STATUS_OK\""));
  EXPECT_THAT(*json, HasSubstr("\"kind\": \"trigger\""));
  EXPECT_THAT(*json, HasSubstr("\"late_tolerance_ns\": \"500000000\""));
  EXPECT_THAT(*json, HasSubstr("\"trigger_signal\": \"step_time\""));
  EXPECT_THAT(*json, HasSubstr("\"trigger_host\": \"" + target + "\""));
  // The healthy job's 20 ms steps against the slowed job's 60 ms.
  EXPECT_THAT(*json, HasSubstr("\"trigger_baseline\": 20000000"));
  EXPECT_THAT(*json, HasSubstr("\"trigger_observed\": 60000000"));
  EXPECT_THAT(*json, HasSubstr("\"trigger_part\": \"next\""));

  // Before it, the snapshot of the past that fired it (the trigger's window, 1 s). The trigger
  // fires once most steps of its last 1 s window are slow (>= 0.75 s after the slowdown), so the
  // snapshot's second holds more slow steps than fast: its median step is the slow one.
  absl::StatusOr<v1::SessionInfo> past;
  {
    auto stub = Stub(port);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + certs_.token);
    v1::GetSessionRequest request;
    request.set_session(session + "-past");
    v1::SessionInfo info;
    ASSERT_THAT(stub->GetSession(&ctx, request, &info), IsOk());
    past = info;
  }
  const v1::SessionManifest& pm = past->manifest();
  EXPECT_EQ(pm.status(), v1::SESSION_STATUS_OK) << pm.DebugString();
  EXPECT_EQ(pm.request().past_ms(), 1000u);
  EXPECT_EQ(pm.origin().trigger_part(), "past");
  EXPECT_EQ(pm.origin().trigger_linked_session(), session);
  EXPECT_LT(pm.start_at_ns(), slowdown_at_ms * kNanosPerMilli + 60 * kNanosPerSecond);
  ASSERT_EQ(pm.hosts_size(), 1);
  EXPECT_GE(pm.hosts(0).steps(), 10u);  // 1 s of 20-60 ms steps
  absl::StatusOr<std::string> breakdown =
      ReadFile(JoinPath(pm.session_dir(), "pod_step_breakdown.json"));
  ASSERT_THAT(breakdown, IsOk());
  const size_t at = breakdown->find("\"median_step_time_ms\": ");
  ASSERT_NE(at, std::string::npos);
  double median_ms = 0;
  ASSERT_TRUE(absl::SimpleAtod(
      breakdown->substr(at + 23, breakdown->find_first_of(",}\n", at + 23) - at - 23), &median_ms));
  EXPECT_GT(median_ms, 40.0) << "the past's steps are the slow ones (60 ms, the healthy 20 ms)";

  ASSERT_EQ(Cli({"schedules", coordinator, token}, &out), coordinator::kExitOk) << out;
  EXPECT_THAT(out, HasSubstr("fired 1"));
  EXPECT_THAT(out, HasSubstr("cooldown until"));
  StopServe();
}

TEST_F(ServeTest, RefusesANonLoopbackBindWithoutClientAuthentication) {
  std::string out;
  EXPECT_EQ(Cli({"serve", "--config=" + config_, "--bind=0.0.0.0", "--port=0"}, &out),
            coordinator::kExitUsage);
  EXPECT_THAT(out, HasSubstr("--serve-token-file or --serve-tls-ca"));
  EXPECT_EQ(Cli({"serve", "--config=" + JoinPath(tmp_.path(), "none.yaml")}, &out),
            coordinator::kExitUsage);
  EXPECT_THAT(out, HasSubstr("none.yaml"));
  EXPECT_EQ(Cli({"serve", "--config=" + config_, "--log-format=xml"}, &out),
            coordinator::kExitUsage);
  EXPECT_THAT(out, HasSubstr("--log-format"));
}

}  // namespace
}  // namespace profctl
