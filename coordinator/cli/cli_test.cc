#include "coordinator/cli/cli.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/gzip.h"
#include "coordinator/cli/command.h"
#include "coordinator/cli/local_agents.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/session/session_writer.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "profctl/v1/session.pb.h"
#include "report/perfetto_trace_check.h"
#include "tests/fake_agent.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"
#include "tests/trace_data.h"

using ::profctl::test_data::DataPath;
using ::profctl::testkit::IsOk;

namespace profctl::coordinator {
namespace {

using ::profctl::testkit::FakeAgent;
using ::profctl::testkit::FakeAgentFactory;
using ::profctl::testkit::FakeClock;
using ::profctl::testkit::FakeExecutor;
using ::testing::HasSubstr;
using ::testing::Not;
namespace v1 = ::profctl::v1;

class CliTest : public ::testing::Test {
 protected:
  int Run(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    return RunCli(args, Env());
  }
  CliEnv Env(const StopSignal* interrupt = nullptr) {
    return {&out_,
            &err_,
            &clock_,
            &factory_,
            &ex_,
            "/nonexistent/profctl",
            interrupt,
            [this](const absl::Notification& done) {
              ASSERT_TRUE(ex_.RunUntil([&] { return done.HasBeenNotified(); },
                                       clock_.MonoNs() + 3600 * kNanosPerSecond));
            }};
  }
  std::string Logdir() const { return "--logdir=" + logdir_; }

  FakeClock clock_;
  FakeExecutor ex_{&clock_};
  FakeAgentFactory factory_{&ex_};
  std::ostringstream out_, err_;
  const testkit::TempDir tmp_;
  const std::string logdir_ = tmp_.path();
};

// The command table drives both the usage text and dispatch: every command listed answers its
// --help (exit 0, on stdout), and an unknown one is refused with the list.
TEST_F(CliTest, EveryListedCommandAnswersItsHelp) {
  ASSERT_EQ(Run({"--help"}), kExitOk);
  const std::string usage = out_.str();
  const size_t list = usage.find("commands:\n");
  ASSERT_NE(list, std::string::npos) << usage;
  std::vector<std::string> names;
  const size_t list_end = usage.find("\n\n", list);  // the list ends at the first blank line
  for (absl::string_view line : absl::StrSplit(usage.substr(list, list_end - list), '\n')) {
    if (absl::StartsWith(line, "  ")) {
      names.emplace_back(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  EXPECT_THAT(names, ::testing::ElementsAre("capture", "ping", "analyze", "diff", "serve",
                                            "sessions", "schedules", "demo", "version"));
  for (const std::string& name : names) {
    EXPECT_EQ(Run({name, "--help"}), kExitOk) << name << ": " << err_.str();
    EXPECT_FALSE(out_.str().empty()) << name;
    EXPECT_TRUE(err_.str().empty()) << name << ": " << err_.str();
  }
  EXPECT_EQ(Run({"--version"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("profctl "));
  EXPECT_EQ(Run({"captur"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("unknown command 'captur' (did you mean 'capture'?)"));
  EXPECT_THAT(err_.str(), HasSubstr("commands:"));
}

TEST(PortFileTest, ReadsEndpointPortsAndSkipsTheMetricsLine) {
  const testkit::TempDir tmp;
  const std::string path = tmp.path() + "/agent.port";
  ASSERT_THAT(WriteFileAtomically(path, "41234\n41235\nmetrics=9100\n"), IsOk());
  absl::StatusOr<std::vector<int>> ports = ReadPortFileAll(path);
  ASSERT_THAT(ports, IsOk());
  EXPECT_THAT(*ports, ::testing::ElementsAre(41234, 41235));
  ASSERT_THAT(WriteFileAtomically(path, "6000\n"), IsOk());  // an older agent's file
  absl::StatusOr<int> port = ReadPortFile(path);
  ASSERT_THAT(port, IsOk());
  EXPECT_EQ(*port, 6000);
  ASSERT_THAT(WriteFileAtomically(path, "six\n"), IsOk());
  EXPECT_THAT(ReadPortFile(path).status().message(), HasSubstr("'six' is not a port"));
}

TEST_F(CliTest, BadInputIsAUsageErrorBeforeAnyNetworkCall) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"capture"}, "profctl capture: --workers is required"},
      {{"capture", "--workers=h:99999"}, "worker 'h:99999': port '99999' is not a number"},
      {{"capture", "--workers=h"}, "missing :port"},
      {{"capture", "--workers=h:1,h:1"}, "listed twice"},
      {{"capture", "--workers=h:1", "--duration=0"}, "--duration=0 is not in 1..3600000"},
      {{"capture", "--workers=h:1", "--duration=2x"}, "--duration='2x' is not a window"},
      {{"capture", "--workers=h:1", "--duration=2h"}, "--duration=7200000 is not in 1..3600000"},
      {{"capture", "--workers=h:1", "--frobnicate"}, "unknown flag --frobnicate"},
      {{"capture", "--worker=h:1"}, "unknown flag --worker (did you mean --workers?)"},
      {{"anlyze", "x"}, "unknown command 'anlyze' (did you mean 'analyze'?)"},
      {{"capture", "--workers=h:1", "--logdir="}, "--logdir is empty; leave the flag out"},
      {{"capture", "--workers=h:1", "--session="}, "--session is empty; leave the flag out"},
      {{"capture", "--workers=h:1", "--logdir", "--session=x"},
       "--logdir needs a value, got the flag '--session=x'"},
      {{"capture", "--workers=h:1", "--session=a/b"}, "session name 'a/b'"},
      {{"capture", "--workers=h:1", "stray"}, "unexpected argument 'stray'"},
      {{"capture", "--workers=h:1", "--late=maybe"}, "--late=maybe is not one of: capture, fail"},
      {{"capture", "--workers=h:1", "--align=gps"}, "--align=gps is not one of: collectives, ntp"},
      {{"capture", "--workers=h:1", "--prepare-timeout=-1"}, "--prepare-timeout=-1 is not in"},
      {{"capture", "--workers=h:1", "--retries=21"}, "--retries=21 is not in 0..20"},
      {{"capture", "--workers=h:1", "--retries=-1"}, "--retries=-1 is not in 0..20"},
      {{"capture", "--workers=grpc://h:1", "--host-tracer-level=4"},
       "--host-tracer-level=4 is not in 0..3"},
      {{"capture", "--workers=h:1", "--device-tracer-level=-1"},
       "--device-tracer-level=-1 is not in 0..1"},
      {{"capture", "--workers=h:1", "--python-tracer-level=2"},
       "--python-tracer-level=2 is not in 0..1"},
      {{"capture", "--workers=h:1", "--duration=2000", "--deadline=2000"},
       "--deadline=2000 ms cannot hold the 2000 ms window"},
      {{"capture", "--workers=h:1,h:2", "--min-hosts=3"}, "--min-hosts=3 is not in 0..2"},
      {{"capture", "--workers=h:1", "--min-hosts=1", "--require-all"},
       "give --min-hosts or --require-all, not both"},
      {{"ping"}, "profctl ping: --workers is required"},
      {{"ping", "--workers=h:1", "--timeout=0"}, "--timeout=0 is not in 1..600000"},
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"demo", "--workers=0"}, "--workers=0 is not in 1..64"},
      {{"demo", "--duration=600000"}, "--duration=600000 is not in 1..60000"},
      {{"demo"}, "cannot find an executable profctl-agent"},
  };
  for (Case& c : cases) {
    const bool has_logdir = std::any_of(c.args.begin(), c.args.end(), [](const std::string& a) {
      return a.rfind("--logdir", 0) == 0;
    });
    if ((c.args[0] == "capture" || c.args[0] == "demo") && !has_logdir) {
      c.args.push_back(Logdir());
    }
    EXPECT_EQ(Run(c.args), kExitUsage) << c.args[1];
    EXPECT_THAT(err_.str(), HasSubstr(c.message));
  }
  EXPECT_EQ(factory_.connects(), 0);
  EXPECT_FALSE(PathExists(logdir_ + "/plugins/profile/a"));
}

TEST_F(CliTest, ExistingSessionIsNeverOverwritten) {
  FakeAgent a(&ex_, &clock_, {.name = "a"});
  factory_.Add("a:1", &a);
  ASSERT_EQ(Run({"capture", "--workers=a:1", "--duration=50", "--session=s", Logdir()}), kExitOk);
  const std::string file = logdir_ + "/plugins/profile/s/a.xplane.pb";
  const std::string before = *ReadFile(file);
  EXPECT_EQ(Run({"capture", "--workers=a:1", "--duration=50", "--session=s", Logdir()}),
            kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("already exists"));
  EXPECT_EQ(*ReadFile(file), before);
  EXPECT_EQ(a.captures(), 1);
}

// Two captures in one second with the default name: the second is not refused, it gets _2.
TEST_F(CliTest, DefaultSessionNamesNeverCollide) {
  FakeAgent a(&ex_, &clock_, {.name = "a"});
  factory_.Add("a:1", &a);
  ASSERT_EQ(Run({"capture", "--workers=a:1", "--duration=50", Logdir()}), kExitOk) << err_.str();
  ASSERT_EQ(Run({"capture", "--workers=a:1", "--duration=50", Logdir()}), kExitOk) << err_.str();
  const std::string first = DefaultSessionName(clock_, "");
  EXPECT_TRUE(PathExists(absl::StrCat(logdir_, "/plugins/profile/", first, "/session.json")));
  EXPECT_TRUE(PathExists(absl::StrCat(logdir_, "/plugins/profile/", first, "_2/session.json")));
  EXPECT_EQ(a.captures(), 2);
}

// A log dir on a (nearly) full file system is refused before any host is asked to record.
TEST_F(CliTest, FullDiskIsRefusedBeforeAnyHostIsContacted) {
  absl::StatusOr<SessionDir> dir =
      SessionDir::Create(logdir_, "full", {.min_free_bytes = uint64_t{1} << 62});
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(dir.status().message(), HasSubstr("MiB free on the file system of"));
  EXPECT_FALSE(PathExists(logdir_ + "/plugins/profile/full"));
}

// A committed trace is visible under its name at once (a coordinator killed afterwards keeps
// it); SyncCommitted then makes every one durable, and names what it could not sync.
TEST_F(CliTest, CommittedTracesAreVisibleAtOnceAndSyncedTogether) {
  absl::StatusOr<SessionDir> dir = SessionDir::Create(logdir_, "sync");
  ASSERT_THAT(dir, IsOk());
  const std::string folder = logdir_ + "/plugins/profile/sync";
  EXPECT_THAT(dir->SyncCommitted(), IsOk());  // nothing committed yet
  for (const char* host : {"a", "b"}) {
    absl::StatusOr<std::unique_ptr<TraceFile>> f = dir->Create(host);
    ASSERT_THAT(f, IsOk());
    ASSERT_THAT((*f)->Append(host), IsOk());
    ASSERT_THAT((*f)->Commit(XPlaneFileName(host)), IsOk());
    EXPECT_EQ(ReadFile(folder + "/" + XPlaneFileName(host)).value_or(""), host);
  }
  EXPECT_THAT(dir->SyncCommitted(), IsOk());
  // One that is gone by the time it is synced (removed by hand, a full disk's cleanup...).
  absl::StatusOr<std::unique_ptr<TraceFile>> f = dir->Create("c");
  ASSERT_THAT(f, IsOk());
  ASSERT_THAT((*f)->Commit(XPlaneFileName("c")), IsOk());
  ASSERT_EQ(unlink((folder + "/c.xplane.pb").c_str()), 0);
  const absl::Status gone = dir->SyncCommitted();
  EXPECT_FALSE(gone.ok());
  EXPECT_THAT(gone.message(), HasSubstr("cannot sync " + folder + "/c.xplane.pb: No such file"));
  EXPECT_THAT(gone.message(), HasSubstr("may not survive a crash"));
  EXPECT_THAT(dir->SyncCommitted(), IsOk());  // each commit is synced (or reported) once
}

// A coordinator killed mid-capture leaves session.json RUNNING and maybe temporary files: the
// next capture into the same log dir marks that session ABANDONED and removes them; a session
// whose coordinator still runs is left alone.
TEST_F(CliTest, NextCaptureCleansUpAfterAKilledCoordinator) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);  // reaped: this pid is now dead
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  auto make = [&](const std::string& name, int64_t pid) {
    const std::string dir = absl::StrCat(logdir_, "/plugins/profile/", name);
    EXPECT_THAT(MakeDirs(dir), IsOk());
    v1::SessionManifest m;
    m.set_status(v1::SESSION_STATUS_RUNNING);
    m.set_coordinator_pid(pid);
    m.set_coordinator_host(host);
    m.add_hosts()->set_status(v1::HOST_STATUS_OK);
    EXPECT_THAT(WriteFileAtomically(dir + "/session.json", ManifestJson(m)), IsOk());
    EXPECT_THAT(WriteFileAtomically(dir + "/.w0.xplane.pb.tmp.abc123", "partial bytes"), IsOk());
    EXPECT_THAT(WriteFileAtomically(dir + "/" + kRunningMarkerFileName, "1\n"), IsOk());
    return dir;
  };
  const std::string dead = make("dead", child);
  // A live capture holds its marker's lock (here, this process: a fresh open of the marker cannot
  // take a shared lock while the RunningSession holds it).
  absl::StatusOr<std::unique_ptr<RunningSession>> live = RunningSession::Open(logdir_, "alive", {});
  ASSERT_THAT(live, IsOk());
  const std::string alive = absl::StrCat(logdir_, "/plugins/profile/alive");
  {
    v1::SessionManifest m;
    m.set_status(v1::SESSION_STATUS_RUNNING);
    m.set_coordinator_pid(getpid());
    EXPECT_THAT(WriteFileAtomically(alive + "/session.json", ManifestJson(m)), IsOk());
    EXPECT_THAT(WriteFileAtomically(alive + "/.w0.xplane.pb.tmp.abc123", "partial"), IsOk());
  }
  EXPECT_TRUE(SessionHasLiveOwner(alive));
  EXPECT_FALSE(SessionHasLiveOwner(dead));
  // A marker another host wrote is not judged from here (its lock may not reach us).
  const std::string remote = make("remote", child);
  EXPECT_THAT(WriteFileAtomically(remote + "/" + kRunningMarkerFileName, "1 some-other-host\n"),
              IsOk());
  EXPECT_TRUE(SessionHasLiveOwner(remote));

  FakeAgent a(&ex_, &clock_, {.name = "a"});
  factory_.Add("a:1", &a);
  ASSERT_EQ(Run({"capture", "--workers=a:1", "--duration=50", "--session=next", Logdir()}), kExitOk)
      << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr(dead + ": abandoned by coordinator pid"));
  EXPECT_FALSE(PathExists(dead + "/.w0.xplane.pb.tmp.abc123"));
  v1::SessionManifest m;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(*ReadFile(dead + "/session.json"), &m),
              IsOk());
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_ABANDONED);
  EXPECT_EQ(m.hosts_size(), 1);  // what it said it holds is kept
  ASSERT_EQ(m.errors_size(), 1);
  EXPECT_THAT(m.errors(0), HasSubstr("removed 1 temporary file"));
  EXPECT_TRUE(PathExists(alive + "/.w0.xplane.pb.tmp.abc123"));  // its coordinator lives
  EXPECT_TRUE(PathExists(remote + "/.w0.xplane.pb.tmp.abc123"));
  EXPECT_FALSE(PathExists(dead + "/" + kRunningMarkerFileName));
  // A finished capture leaves no marker behind.
  EXPECT_FALSE(PathExists(logdir_ + "/plugins/profile/next/" + kRunningMarkerFileName));
}

synthetic::SyntheticJobConfig Rank(int r);  // below: rank r of 3, rank 1 straggles

namespace {

// Rewrites a finished session's folder into what a coordinator killed while writing its outputs
// leaves: session.json RUNNING from an early snapshot (every host UNSPECIFIED,
// no file named), the running marker unlocked, the pod trace and a breakdown file half written
// as temporaries, one host's trace still streaming (the others renamed into place, valid).
void MakeFolderAsAKillLeavesIt(const std::string& dir, const std::string& streaming_host) {
  v1::SessionManifest m;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(*ReadFile(dir + "/session.json"), &m),
              IsOk());
  m.set_status(v1::SESSION_STATUS_RUNNING);
  m.clear_errors();
  m.clear_pod_trace_file();
  m.clear_breakdown_files();
  for (v1::HostResult& h : *m.mutable_hosts()) {
    h.set_status(v1::HOST_STATUS_UNSPECIFIED);
    h.clear_xplane_file();
    h.clear_recording_detail();
  }
  ASSERT_THAT(WriteFileAtomically(dir + "/session.json", RunningManifestJson(m)), IsOk());
  std::filesystem::remove(dir + "/pod.perfetto-trace.gz");
  std::filesystem::remove(dir + "/pod_step_breakdown.json");
  std::filesystem::remove(dir + "/" + streaming_host + ".xplane.pb");
  ASSERT_THAT(WriteFileAtomically(dir + "/pod.perfetto-trace.gz.tmp.Ab12Cd", "\x1f\x8b half"),
              IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/pod_step_breakdown.json.tmp.Zz9Yy8", "{"), IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/." + streaming_host + ".xplane.pb.tmp.q1w2e3", "half"),
              IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/" + kRunningMarkerFileName, "1\n"), IsOk());
}

v1::SessionManifest ReadManifestOf(const std::string& dir) {
  v1::SessionManifest m;
  EXPECT_THAT(google::protobuf::util::JsonStringToMessage(*ReadFile(dir + "/session.json"), &m),
              IsOk());
  return m;
}

}  // namespace

// The folder a coordinator killed while writing its outputs leaves is analysed
// as it stands, and the next capture rebuilds each host from the traces on disk (a valid trace
// is a saved host), removes every temporary file (the pod trace's too) and says what it did.
TEST_F(CliTest, AKilledCoordinatorsFolderIsRebuiltFromTheTracesOnDisk) {
  FakeAgent a(&ex_, &clock_, {.name = "w0"}, Rank(0));
  FakeAgent b(&ex_, &clock_, {.name = "w1"}, Rank(1));
  FakeAgent c(&ex_, &clock_, {.name = "w2"}, Rank(2));
  factory_.Add("a:1", &a);
  factory_.Add("b:1", &b);
  factory_.Add("c:1", &c);
  ASSERT_EQ(
      Run({"capture", "--workers=a:1,b:1,c:1", "--duration=500", "--session=killed", Logdir()}),
      kExitOk)
      << err_.str();
  const std::string dir = logdir_ + "/plugins/profile/killed";
  MakeFolderAsAKillLeavesIt(dir, "w2");
  EXPECT_FALSE(SessionHasLiveOwner(dir));

  // As it stands (RUNNING, no host listed saved): the traces under the hosts' names are read.
  ASSERT_EQ(Run({"analyze", dir, "--out=" + tmp_.path() + "/before"}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("2 hosts"));

  ASSERT_EQ(Run({"capture", "--workers=a:1", "--duration=50", "--session=after", Logdir()}),
            kExitOk)
      << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr(dir + ": abandoned by coordinator pid"));
  EXPECT_THAT(err_.str(), HasSubstr("removed 3 temporary file(s); 2/3 host(s) saved"));
  for (const char* gone :
       {"/pod.perfetto-trace.gz.tmp.Ab12Cd", "/pod_step_breakdown.json.tmp.Zz9Yy8",
        "/.w2.xplane.pb.tmp.q1w2e3", "/.profctl_running"}) {
    EXPECT_FALSE(PathExists(dir + gone)) << gone;
  }
  const v1::SessionManifest m = ReadManifestOf(dir);
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_ABANDONED);
  ASSERT_EQ(m.hosts_size(), 3);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(m.hosts(i).status(), v1::HOST_STATUS_OK) << m.hosts(i).host();
    EXPECT_EQ(m.hosts(i).xplane_file(), m.hosts(i).host() + ".xplane.pb");
    EXPECT_GT(m.hosts(i).bytes(), 0u);
    EXPECT_THAT(m.hosts(i).recording_detail(), HasSubstr("recovered after its coordinator"));
  }
  EXPECT_EQ(m.hosts(2).status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(m.hosts(2).error().step(), v1::FAILURE_STEP_INTERRUPTED);
  EXPECT_THAT(m.hosts(2).error().message(), HasSubstr("w2.xplane.pb: no trace on disk"));
  ASSERT_EQ(m.errors_size(), 1);
  EXPECT_THAT(m.errors(0), HasSubstr("2 of 3 hold a valid trace"));

  ASSERT_EQ(Run({"analyze", dir, "--out=" + tmp_.path() + "/after"}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("2 hosts"));
}

// A trace under a host's name that is not a valid XSpace (a machine that lost power before the
// sync may leave it empty) is not a saved host: the host is failed, saying why.
TEST_F(CliTest, RecoveryFailsAHostWhoseTraceOnDiskIsNotValid) {
  const std::string dir = logdir_ + "/plugins/profile/torn";
  ASSERT_THAT(MakeDirs(dir), IsOk());
  v1::SessionManifest m;
  m.set_status(v1::SESSION_STATUS_RUNNING);
  m.add_hosts()->set_host("h0");
  m.add_hosts()->set_host("h1");
  m.mutable_hosts(1)->set_status(v1::HOST_STATUS_OK);  // the snapshot said saved
  m.mutable_hosts(1)->set_xplane_file("h1.xplane.pb");
  ASSERT_THAT(WriteFileAtomically(dir + "/session.json", ManifestJson(m)), IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/h0.xplane.pb.invalid", "junk"), IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/h1.xplane.pb", "\xff\xff not a proto"), IsOk());
  const int saved = RecoverHostsFromDisk(dir, m);
  EXPECT_EQ(saved, 0);
  EXPECT_EQ(m.hosts(0).status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(m.hosts(0).error().step(), v1::FAILURE_STEP_VALIDATE);
  EXPECT_THAT(m.hosts(0).error().message(), HasSubstr("only h0.xplane.pb.invalid is on disk"));
  EXPECT_EQ(m.hosts(1).status(), v1::HOST_STATUS_FAILED);
  EXPECT_TRUE(m.hosts(1).xplane_file().empty());
  EXPECT_THAT(m.hosts(1).error().message(), HasSubstr("session.json had listed it saved"));
}

// A session whose final session.json could not be written (a full disk) stays
// RUNNING on disk; its owner let go of the marker's lock but kept the marker, so `profctl
// sessions` shows it abandoned, not running, and the next capture marks it ABANDONED.
TEST_F(CliTest, ASessionThatCouldNotBeFinalisedIsNotRunningForever) {
  absl::StatusOr<std::unique_ptr<RunningSession>> running =
      RunningSession::Open(logdir_, "full", {});
  ASSERT_THAT(running, IsOk());
  const std::string dir = (*running)->dir().location();
  v1::SessionManifest m;
  m.set_status(v1::SESSION_STATUS_RUNNING);
  m.set_coordinator_pid(getpid());
  m.mutable_request()->set_session("full");
  m.add_hosts()->set_host("h0");
  ASSERT_THAT((*running)->dir().Write(kManifestFileName, RunningManifestJson(m)), IsOk());
  ASSERT_EQ(Run({"sessions", Logdir()}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), ::testing::ContainsRegex("full +running"));

  // The final write failed (disk full): session.json still says RUNNING when the capture ends.
  (*running)->Close();
  EXPECT_TRUE(PathExists(dir + "/" + kRunningMarkerFileName));
  EXPECT_FALSE(SessionHasLiveOwner(dir));
  ASSERT_EQ(Run({"sessions", Logdir()}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), ::testing::ContainsRegex("full +abandoned"));

  FakeAgent a(&ex_, &clock_, {.name = "a"});
  factory_.Add("a:1", &a);
  ASSERT_EQ(Run({"capture", "--workers=a:1", "--duration=50", "--session=next", Logdir()}), kExitOk)
      << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr(dir + ": abandoned by coordinator pid"));
  EXPECT_EQ(ReadManifestOf(dir).status(), v1::SESSION_STATUS_ABANDONED);
  EXPECT_THAT(ReadManifestOf(dir).errors(0), HasSubstr("a full disk?"));
  EXPECT_FALSE(PathExists(dir + "/" + kRunningMarkerFileName));
  // A session that did finish leaves no marker (the capture above).
  EXPECT_FALSE(PathExists(logdir_ + "/plugins/profile/next/" + kRunningMarkerFileName));
}

// The engine said the final session.json was written (MarkFinal): Close takes its word and does
// not parse the manifest again, so even one that reads RUNNING no longer holds the marker.
TEST_F(CliTest, AFolderMarkedFinalIsClosedWithoutReadingItsManifest) {
  absl::StatusOr<std::unique_ptr<RunningSession>> running =
      RunningSession::Open(logdir_, "done", {});
  ASSERT_THAT(running, IsOk());
  const std::string dir = (*running)->dir().location();
  v1::SessionManifest m;
  m.set_status(v1::SESSION_STATUS_RUNNING);
  ASSERT_THAT((*running)->dir().Write(kManifestFileName, RunningManifestJson(m)), IsOk());
  (*running)->MarkFinal();
  (*running)->Close();
  EXPECT_FALSE(PathExists(dir + "/" + kRunningMarkerFileName));
  EXPECT_FALSE(SessionHasLiveOwner(dir));
}

namespace {

// A session folder whose SyncCommitted (called as the outputs start to be written) runs `hook`.
class HookedSink final : public TraceSink {
 public:
  HookedSink(SessionDir* dir, std::function<void()> hook) : dir_(dir), hook_(std::move(hook)) {}
  absl::StatusOr<std::string> Write(const std::string& name, absl::string_view contents) override {
    return dir_->Write(name, contents);
  }
  absl::StatusOr<std::unique_ptr<TraceFile>> Create(const std::string& hint) override {
    return dir_->Create(hint);
  }
  absl::Status SyncCommitted() override {
    if (hook_) hook_();
    return dir_->SyncCommitted();
  }
  absl::StatusOr<std::string> Read(const std::string& name) override { return dir_->Read(name); }
  std::string LocalPath(const std::string& name) const override { return dir_->LocalPath(name); }
  std::string location() const override { return dir_->location(); }

 private:
  SessionDir* dir_;
  std::function<void()> hook_;
};

}  // namespace

// An interrupt while the outputs are written (every host done) writes no pod output not yet
// written instead of being ignored; session.json says the hosts were saved, which outputs were
// left out and how to build them, and the exit code (3) and the headline agree with it.
TEST_F(CliTest, AnInterruptWhileTheOutputsAreWrittenLeavesThemToAnalyze) {
  FakeAgent a(&ex_, &clock_, {.name = "w0"}, Rank(0));
  FakeAgent b(&ex_, &clock_, {.name = "w1"}, Rank(1));
  FakeAgent c(&ex_, &clock_, {.name = "w2"}, Rank(2));
  factory_.Add("a:1", &a);
  factory_.Add("b:1", &b);
  factory_.Add("c:1", &c);
  absl::StatusOr<SessionDir> dir = SessionDir::Create(logdir_, "int-out");
  ASSERT_THAT(dir, IsOk());
  CaptureEngine* engine = nullptr;
  int syncs = 0;
  HookedSink sink(&*dir, [&] {
    ++syncs;
    ASSERT_NE(engine, nullptr);
    engine->Cancel();  // Ctrl-C, as the outputs start
  });
  CapturePlan plan;
  plan.workers = *ParseWorkerList("a:1,b:1,c:1");
  plan.duration_ms = 500;
  plan.session = "int-out";
  plan.logdir = logdir_;
  std::optional<analysis::PodBreakdown> breakdown;
  absl::StatusOr<v1::SessionManifest> m = RunEngine(
      plan, &sink, Env(), [](const std::string&) {}, &breakdown,
      [&](CaptureEngine& e) { engine = &e; }, [&] { engine = nullptr; });
  ASSERT_THAT(m, IsOk());
  EXPECT_GE(syncs, 1);
  EXPECT_EQ(m->status(), v1::SESSION_STATUS_OK);  // every host saved, whole window
  for (const auto& h : m->hosts()) EXPECT_EQ(h.status(), v1::HOST_STATUS_OK) << h.host();
  EXPECT_TRUE(m->pod_trace_file().empty());
  EXPECT_FALSE(PathExists(dir->location() + "/pod.perfetto-trace.gz"));
  for (const auto& e : std::filesystem::directory_iterator(dir->location())) {
    EXPECT_THAT(e.path().filename().string(), ::testing::Not(HasSubstr(".tmp.")));
  }
  const std::string errors = absl::StrJoin(m->errors(), "\n");
  EXPECT_THAT(errors, HasSubstr("interrupted: not written: pod.perfetto-trace.gz, "
                                "pod_step_breakdown.json, pod_step_breakdown.csv, report.html; "
                                "every saved host's trace is kept; build them with: profctl "
                                "analyze " +
                                dir->location() + " --pod-trace"));
  EXPECT_THAT(errors, ::testing::Not(HasSubstr("capture was cancelled")));  // the window was not
  EXPECT_EQ(m->breakdown_files_size(), 0);
  EXPECT_FALSE(PathExists(dir->location() + "/report.html"));
  EXPECT_EQ(ExitCodeFor(*m), kExitPartial);
  EXPECT_THAT(FormatSummary(*m),
              HasSubstr("session int-out: ok, 3/3 hosts captured; 1 error(s) below"));

  // What it names builds them from the saved traces: the breakdown and the same pod trace.
  ASSERT_EQ(Run({"analyze", dir->location(), "--pod-trace"}), kExitOk) << err_.str();
  EXPECT_TRUE(PathExists(dir->location() + "/report.html"));
  absl::StatusOr<std::string> gz = ReadFile(dir->location() + "/pod.perfetto-trace.gz");
  ASSERT_THAT(gz, IsOk());
  absl::StatusOr<std::string> bytes = GzipDecompress(*gz);
  ASSERT_THAT(bytes, IsOk());
  absl::StatusOr<report::PerfettoTraceModel> trace = report::ReadPerfettoTrace(*bytes);
  ASSERT_THAT(trace, IsOk());
  std::set<std::string> processes;
  for (const auto& [uuid, t] : trace->tracks) {
    if (t.pid >= 0) processes.insert(t.name);
  }
  for (const char* process : {"w0 /device:GPU:0", "w1 /device:GPU:0", "w2 /device:GPU:0", "pod"}) {
    EXPECT_TRUE(processes.count(process)) << process;
  }
}

// Agents whose traces lack what was asked (record batches dropped over the window's caps, device
// work whose launches were lost, a flight recorder shorter than the past asked, a clock step) make
// their hosts partial: each reason with its amount in session.json, the sentence under the host
// in the table, and exit code 3; a whole host beside them stays ok.
TEST_F(CliTest, HostsWhoseTracesLackWhatWasAskedArePartialWithWhatAndHowMuch) {
  const auto shortfall = [](v1::ShortfallKind kind, uint64_t amount, const std::string& detail) {
    v1::Shortfall s;
    s.set_kind(kind);
    s.set_amount(amount);
    s.set_detail(detail);
    return s;
  };
  FakeAgent a(&ex_, &clock_,
              {.name = "w0",
               .shortfalls = {shortfall(v1::SHORTFALL_KIND_DROPPED_RECORD_BATCHES, 144'000'000,
                                        "144000000 bytes of CUDA record batches dropped over "
                                        "the window's caps"),
                              shortfall(v1::SHORTFALL_KIND_UNLAUNCHED_WORK, 600'000,
                                        "600000 kernels without a recorded launch")}},
              Rank(0));
  FakeAgent b(&ex_, &clock_,
              {.name = "w1",
               .shortfalls = {shortfall(v1::SHORTFALL_KIND_SHORT_RECORDER, 5'000'000'000,
                                        "the flight recorder held the last 3000 ms only of the "
                                        "8000 ms asked: the first 5000 ms are missing")}},
              Rank(1));
  FakeAgent c(&ex_, &clock_,
              {.name = "w2",
               .shortfalls = {shortfall(v1::SHORTFALL_KIND_CLOCK_STEP, 3'000'000'000,
                                        "the wall clock stepped back 3.000 s between its clock "
                                        "sync and the window's start")}},
              Rank(2));
  FakeAgent d(&ex_, &clock_, {.name = "w3"}, Rank(0));
  factory_.Add("a:1", &a);
  factory_.Add("b:1", &b);
  factory_.Add("c:1", &c);
  factory_.Add("d:1", &d);
  ASSERT_EQ(
      Run({"capture", "--workers=a:1,b:1,c:1,d:1", "--duration=500", "--session=short", Logdir()}),
      kExitPartial)
      << err_.str();
  const std::string table = out_.str();
  EXPECT_THAT(table, HasSubstr("session short: partial, 4/4 hosts captured"));
  EXPECT_THAT(table, ::testing::ContainsRegex("w0 +partial"));
  EXPECT_THAT(table, ::testing::ContainsRegex("w3 +ok"));
  for (const char* sentence :
       {"missing data: 144000000 bytes of CUDA record batches dropped over the window's caps; "
        "600000 kernels without a recorded launch",
        "missing data: the flight recorder held the last 3000 ms only of the 8000 ms asked: the "
        "first 5000 ms are missing",
        "missing data: the wall clock stepped back 3.000 s between its clock sync and the "
        "window's start"}) {
    EXPECT_THAT(table, HasSubstr(sentence));
  }
  const v1::SessionManifest m = ReadManifestOf(logdir_ + "/plugins/profile/short");
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_PARTIAL);
  ASSERT_EQ(m.hosts_size(), 4);
  const std::map<std::string, std::vector<std::pair<v1::ShortfallKind, uint64_t>>> expected = {
      {"w0",
       {{v1::SHORTFALL_KIND_DROPPED_RECORD_BATCHES, 144'000'000},
        {v1::SHORTFALL_KIND_UNLAUNCHED_WORK, 600'000}}},
      {"w1", {{v1::SHORTFALL_KIND_SHORT_RECORDER, 5'000'000'000}}},
      {"w2", {{v1::SHORTFALL_KIND_CLOCK_STEP, 3'000'000'000}}},
      {"w3", {}}};
  for (const v1::HostResult& h : m.hosts()) {
    std::vector<std::pair<v1::ShortfallKind, uint64_t>> got;
    for (const v1::Shortfall& s : h.shortfalls()) got.emplace_back(s.kind(), s.amount());
    EXPECT_EQ(got, expected.at(h.host())) << h.host();
    if (h.host() == "w3") {
      EXPECT_EQ(h.status(), v1::HOST_STATUS_OK);
      EXPECT_EQ(h.recording(), v1::RECORDING_COMPLETE);
    } else {
      EXPECT_EQ(h.status(), v1::HOST_STATUS_INCOMPLETE) << h.host();
      EXPECT_EQ(h.recording(), v1::RECORDING_MISSING_DATA) << h.host();
      EXPECT_THAT(h.recording_detail(), HasSubstr("missing data: ")) << h.host();
    }
  }
}

TEST_F(CliTest, AnalyzePodTraceNeedsASessionFolder) {
  EXPECT_EQ(Run({"analyze", DataPath("h100_pytorch_steps.xplane.pb"), "--pod-trace"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--pod-trace needs one saved session folder"));
}

// Names that a shell or a file browser would take for something else are
// refused before any host is contacted, and a file in the way is named as a file.
TEST_F(CliTest, SessionNamesMustStartWithALetterOrDigit) {
  FakeAgent a(&ex_, &clock_, {.name = "a"});
  factory_.Add("a:1", &a);
  for (const char* bad : {"-rf", "...", ".hidden", "..", "_x", "a/b", "a b"}) {
    EXPECT_EQ(Run({"capture", "--workers=a:1", "--duration=50", absl::StrCat("--session=", bad),
                   Logdir()}),
              kExitUsage)
        << bad;
    EXPECT_THAT(err_.str(), HasSubstr("session name '" + std::string(bad) + "'")) << bad;
    if (std::string(bad) != "a/b" && std::string(bad) != "a b" && std::string(bad) != "..") {
      EXPECT_THAT(err_.str(), HasSubstr("must start with a letter or digit")) << bad;
    }
  }
  EXPECT_EQ(a.captures(), 0);
  EXPECT_FALSE(PathExists(logdir_ + "/plugins/profile/.hidden"));
  EXPECT_THAT(ValidateSessionName("v1.2-run_3"), IsOk());

  ASSERT_THAT(MakeDirs(logdir_ + "/plugins/profile"), IsOk());
  ASSERT_THAT(WriteFileAtomically(logdir_ + "/plugins/profile/taken", "a file"), IsOk());
  EXPECT_EQ(Run({"capture", "--workers=a:1", "--duration=50", "--session=taken", Logdir()}),
            kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("taken is a file, not a session folder"));
  EXPECT_EQ(a.captures(), 0);
}

TEST_F(CliTest, SuccessPrintsSummaryAndJson) {
  FakeAgent a(&ex_, &clock_, {.clock_offset_ns = 2 * kNanosPerMilli, .name = "gpu-a"});
  factory_.Add("a:1", &a);
  ASSERT_EQ(Run({"capture", "--workers=a:1", "--duration=300", "--session=t1", Logdir()}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("session t1: ok, 1/1 hosts captured"));
  EXPECT_THAT(out_.str(), HasSubstr("gpu-a"));
  EXPECT_THAT(out_.str(), HasSubstr("+2.000"));
  EXPECT_EQ(err_.str(), "");  // no progress chatter for captures <= 1 s

  ASSERT_EQ(
      Run({"capture", "--workers=a:1", "--duration=1500", "--session=t2", "--json", Logdir()}),
      kExitOk);
  profctl::v1::SessionManifest m;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(out_.str(), &m), IsOk()) << out_.str();
  EXPECT_EQ(m.status(), profctl::v1::SESSION_STATUS_OK);
  EXPECT_EQ(m.hosts(0).host(), "gpu-a");
  EXPECT_THAT(err_.str(), HasSubstr("profctl: a:1: clock offset +2.000 ms"));  // progress
  EXPECT_TRUE(PathExists(logdir_ + "/plugins/profile/t2/gpu-a.xplane.pb"));
  // --json prints session.json exactly (the text written, not a second printing of it).
  absl::StatusOr<std::string> written = ReadFile(logdir_ + "/plugins/profile/t2/session.json");
  ASSERT_THAT(written, IsOk());
  EXPECT_EQ(out_.str(), *written);
}

TEST(FormatSummaryTest, ColumnsStayAlignedForLongHostNames) {
  profctl::v1::SessionManifest m;
  m.set_status(profctl::v1::SESSION_STATUS_PARTIAL);
  m.mutable_request()->set_session("s");
  auto* a = m.add_hosts();
  a->set_host("a");
  a->set_status(profctl::v1::HOST_STATUS_OK);
  a->set_events(7);
  auto* b = m.add_hosts();
  b->set_host("a-very-long-host-name-from-a-big-cluster_6000");
  b->set_status(profctl::v1::HOST_STATUS_OK);
  b->set_events(8);
  auto* c = m.add_hosts();
  c->set_host("gone_1");
  c->set_status(profctl::v1::HOST_STATUS_FAILED);
  c->mutable_error()->set_step(profctl::v1::FAILURE_STEP_GET_INFO);
  c->mutable_error()->set_code(14);
  c->mutable_error()->set_message("down");
  std::vector<std::string> lines;
  std::istringstream in(FormatSummary(m));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(lines[0], "session s: partial, 2/3 hosts captured");
  // Every row's STATUS starts where the header's does, and EVENTS ends where the header's does.
  const size_t status_col = lines[1].find("STATUS");
  const size_t events_end = lines[1].find("EVENTS") + 6;
  for (size_t i = 2; i <= 4; ++i) {
    EXPECT_EQ(lines[i].find(i == 4 ? "failed" : "ok"), status_col) << lines[i];
  }
  EXPECT_EQ(lines[2].substr(events_end - 1, 1), "7") << lines[2];
  EXPECT_EQ(lines[3].substr(events_end - 1, 1), "8") << lines[3];
  EXPECT_NE(lines[4].find("get info: UNAVAILABLE (down)"), std::string::npos) << lines[4];
}

TEST(FormatSummaryTest, AClockWarningFollowsItsHostsRow) {
  profctl::v1::SessionManifest m;
  m.set_status(profctl::v1::SESSION_STATUS_OK);
  m.mutable_request()->set_session("s");
  for (const char* name : {"w0", "odd"}) {
    auto* h = m.add_hosts();
    h->set_host(name);
    h->set_status(profctl::v1::HOST_STATUS_OK);
    h->mutable_clock()->set_method("collectives");
  }
  auto* odd = m.mutable_hosts(1)->mutable_clock();
  odd->set_method("rtt");
  odd->set_warning("clock: its 36 collectives do not coincide with the other hosts'");
  std::vector<std::string> lines;
  std::istringstream in(FormatSummary(m));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_GE(lines.size(), 5u);
  EXPECT_THAT(lines[2], HasSubstr("w0"));
  EXPECT_THAT(lines[3], HasSubstr("odd"));
  EXPECT_THAT(lines[4], ::testing::EndsWith(odd->warning()));
  EXPECT_EQ(lines[4].find("clock:"), lines[1].find("STATUS"));  // under the row, indented
}

TEST_F(CliTest, ExitCodesForPartialAndTotalFailure) {
  FakeAgent a(&ex_, &clock_, {.name = "a"});
  factory_.Add("a:1", &a);
  EXPECT_EQ(Run({"capture", "--workers=a:1,gone:1", "--duration=50", "--session=p", Logdir()}),
            kExitPartial);
  EXPECT_THAT(out_.str(), HasSubstr("session p: partial, 1/2 hosts captured"));
  EXPECT_THAT(out_.str(), HasSubstr("gone_1"));
  EXPECT_THAT(out_.str(), HasSubstr("UNAVAILABLE"));
  EXPECT_TRUE(PathExists(logdir_ + "/plugins/profile/p/a.xplane.pb"));
  EXPECT_EQ(Run({"capture", "--workers=gone:1", "--duration=50", "--session=f", Logdir()}),
            kExitFailed);
  EXPECT_THAT(out_.str(), HasSubstr("session f: failed, 0/1"));
}

// A log dir that cannot be one (under a regular file: as root, permissions would not stop us) is
// refused before any host is contacted.
TEST_F(CliTest, AnUnusableLogDirIsRefusedBeforeAnyHostIsContacted) {
  FakeAgent a(&ex_, &clock_, {.name = "a"});
  factory_.Add("a:1", &a);
  ASSERT_THAT(WriteFileAtomically(logdir_ + "/file", "x"), IsOk());
  EXPECT_EQ(Run({"capture", "--workers=a:1", "--duration=50", "--logdir=" + logdir_ + "/file/x"}),
            kExitFailed);
  EXPECT_THAT(err_.str(), HasSubstr(logdir_ + "/file"));
  EXPECT_EQ(factory_.connects(), 0);
}

// The session folder vanishes while the window is open (someone cleans the log dir): hosts fail at
// `write` naming the problem and the exit code says the session failed; nothing crashes.
TEST_F(CliTest, ALogDirThatVanishesMidCaptureFailsTheHostsAndSaysSo) {
  FakeAgent a(&ex_, &clock_, {.name = "a"});
  factory_.Add("a:1", &a);
  out_.str("");
  err_.str("");
  CliEnv env = Env();
  env.await = [&](const absl::Notification& done) {
    ASSERT_TRUE(ex_.RunUntil([&] { return a.last_start_ns() != 0; },
                             clock_.MonoNs() + 3600 * kNanosPerSecond));
    std::filesystem::remove_all(logdir_ + "/plugins");
    ASSERT_TRUE(ex_.RunUntil([&] { return done.HasBeenNotified(); },
                             clock_.MonoNs() + 3600 * kNanosPerSecond));
  };
  const int rc =
      RunCli({"capture", "--workers=a:1", "--duration=50", "--session=v", Logdir()}, env);
  EXPECT_EQ(rc, kExitFailed);
  EXPECT_THAT(out_.str(), HasSubstr("write"));
  EXPECT_FALSE(PathExists(logdir_ + "/plugins/profile/v/a.xplane.pb"));
}

TEST_F(CliTest, InterruptStopsTheCaptureAndStillWritesTheManifest) {
  FakeAgent a(&ex_, &clock_, {.name = "a"});
  factory_.Add("a:1", &a);
  StopSignal interrupt;
  interrupt.Stop();  // as if Ctrl-C came at once
  out_.str("");
  err_.str("");
  const int rc = RunCli({"capture", "--workers=a:1", "--duration=50", "--session=i", Logdir()},
                        Env(&interrupt));
  EXPECT_EQ(rc, kExitFailed);
  EXPECT_THAT(err_.str(), HasSubstr("profctl: interrupted: cancelling the capture"));
  EXPECT_THAT(out_.str(), HasSubstr("error: interrupted"));
  EXPECT_TRUE(PathExists(logdir_ + "/plugins/profile/i/session.json"));
  EXPECT_EQ(a.captures(), 0);
}

TEST_F(CliTest, CredentialFlagsAreCheckedBeforeAnyNetworkCallAndPickTheSecureClients) {
  const std::string token_file = tmp_.path() + "/token";
  ASSERT_THAT(WriteFileAtomically(token_file, "0123456789abcdef0123456789abcdef\n"), IsOk());
  ASSERT_EQ(chmod(token_file.c_str(), 0600), 0);
  FakeAgent a(&ex_, &clock_, {.name = "gpu-a"});
  factory_.Add("a:1", &a);
  // Without a way to make secure clients, the flags are refused.
  EXPECT_EQ(Run({"ping", "--workers=a:1", "--token-file=" + token_file}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--tls-* and --token-file are not supported here"));
  std::shared_ptr<const AgentCredentials> seen;
  CliEnv env = Env();
  env.secure_clients =
      [&](std::shared_ptr<const AgentCredentials> c) -> std::unique_ptr<AgentClientFactory> {
    seen = std::move(c);
    auto f = std::make_unique<FakeAgentFactory>(&ex_);
    f->Add("a:1", &a);
    return f;
  };
  out_.str("");
  err_.str("");
  // Without TLS the token would reach a worker beyond loopback in clear text: refused, before
  // any call, unless the user insists.
  EXPECT_EQ(RunCli({"ping", "--workers=127.0.0.1:1,a:1,b:1", "--token-file=" + token_file}, env),
            kExitUsage);
  EXPECT_THAT(err_.str(),
              HasSubstr("--token-file without TLS would send the bearer token in clear text to "
                        "worker 'a:1' (and 1 more), beyond loopback"));
  EXPECT_THAT(err_.str(), HasSubstr("--insecure-token"));
  EXPECT_EQ(seen, nullptr);
  err_.str("");
  EXPECT_EQ(RunCli({"ping", "--workers=a:1", "--insecure-token"}, env), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--insecure-token means nothing without --token-file"));
  err_.str("");
  EXPECT_EQ(
      RunCli({"ping", "--workers=a:1", "--token-file=" + token_file, "--insecure-token"}, env),
      kExitOk)
      << err_.str();
  ASSERT_NE(seen, nullptr);
  EXPECT_EQ(seen->token, "0123456789abcdef0123456789abcdef");
  EXPECT_FALSE(seen->tls);
  EXPECT_TRUE(seen->token_in_clear_beyond_loopback);
  EXPECT_THAT(err_.str(), HasSubstr("--token-file without TLS"));
  EXPECT_THAT(err_.str(),
              HasSubstr("WARNING: --insecure-token: the bearer token goes in clear text to 1 "
                        "worker(s) beyond loopback, 'a:1'"));
  struct Case {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"ping", "--workers=a:1", "--token-file=/nonexistent/token"},
       "--token-file=/nonexistent/token: No such file"},
      {{"capture", "--workers=a:1", "--tls-server-name=gpu-1"}, "--tls-server-name needs TLS"},
      {{"capture", "--workers=a:1", "--tls-cert=/c.pem"}, "--tls-cert is given without --tls-key"},
      {{"capture", "--workers=a:1", "--tls-ca=/nonexistent/ca.pem"}, "--tls-ca=/nonexistent"},
      {{"capture", "--workers=a:1", "--tls-ca="}, "--tls-ca is empty"},
  };
  for (const Case& c : cases) {
    out_.str("");
    err_.str("");
    EXPECT_EQ(RunCli(c.args, env), kExitUsage) << c.args.back();
    EXPECT_THAT(err_.str(), HasSubstr(c.message));
  }
  EXPECT_EQ(a.captures(), 0);
}

TEST_F(CliTest, PingPrintsOneRowPerWorkerWithOffsetAndRtt) {
  FakeAgent a(&ex_, &clock_,
              {.clock_offset_ns = -3 * kNanosPerMilli,
               .up_delay_ns = 250'000,
               .down_delay_ns = 250'000,
               .name = "gpu-a"});
  factory_.Add("a:1", &a);
  EXPECT_EQ(Run({"ping", "--workers=a:1,gone:1"}), kExitPartial);
  EXPECT_THAT(out_.str(), HasSubstr("WORKER"));
  EXPECT_THAT(out_.str(), HasSubstr("-3.000"));  // offset
  EXPECT_THAT(out_.str(), HasSubstr("0.500"));   // rtt
  EXPECT_THAT(out_.str(), HasSubstr("gpu-a"));
  EXPECT_THAT(out_.str(), HasSubstr("gone:1"));
  EXPECT_THAT(out_.str(), HasSubstr("UNAVAILABLE"));
  EXPECT_EQ(a.captures(), 0);
  EXPECT_FALSE(PathExists(logdir_ + "/plugins"));
  ASSERT_EQ(Run({"ping", "--workers=a:1", "--json"}), kExitOk);
  profctl::v1::SessionManifest m;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(out_.str(), &m), IsOk()) << out_.str();
  EXPECT_EQ(m.hosts(0).clock().offset_ns(), -3 * kNanosPerMilli);
  EXPECT_EQ(m.hosts(0).agent_version(), "test");
}

// --workers=@FILE: the same capture and ping as a list on the command line; a bad file is a
// usage error that names it, and nothing is captured.
TEST_F(CliTest, WorkersFromAFileCaptureAndPingAsTheListWould) {
  FakeAgent a(&ex_, &clock_, {.name = "w0"});
  FakeAgent b(&ex_, &clock_, {.clock_offset_ns = 5 * kNanosPerMilli, .name = "w1"});
  factory_.Add("a:1", &a);
  factory_.Add("b:1", &b);
  const std::string pod = tmp_.path() + "/pod.txt";
  ASSERT_THAT(WriteFileAtomically(pod, "# the pod\na:1\nb:1  # rank 1\n"), IsOk());
  ASSERT_EQ(Run({"ping", "--workers=@" + pod}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("w1"));
  ASSERT_EQ(Run({"capture", "--workers=@" + pod, "--duration=300", "--session=f", Logdir()}),
            kExitOk)
      << err_.str();
  EXPECT_EQ(a.captures(), 1);
  EXPECT_EQ(b.captures(), 1);
  EXPECT_TRUE(PathExists(logdir_ + "/plugins/profile/f/w0.xplane.pb"));
  EXPECT_TRUE(PathExists(logdir_ + "/plugins/profile/f/w1.xplane.pb"));

  ASSERT_THAT(WriteFileAtomically(pod, "a:1\nb:x\n"), IsOk());
  EXPECT_EQ(Run({"capture", "--workers=@" + pod, "--duration=300", "--session=g", Logdir()}),
            kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr(pod + ":2: worker 'b:x'"));
  EXPECT_EQ(Run({"ping", "--workers=@" + tmp_.path() + "/nope.txt"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("nope.txt"));
  EXPECT_EQ(a.captures(), 1);
  EXPECT_FALSE(PathExists(logdir_ + "/plugins/profile/g"));
}

synthetic::SyntheticJobConfig Rank(int r) {
  synthetic::SyntheticJobConfig c;
  c.rank = r;
  c.world = 3;
  c.step_ms = 20;
  c.straggler_rank = 1;
  c.straggler_factor = 1.5;
  return c;
}

TEST_F(CliTest, CaptureWritesTheBreakdownAndAnalyzeReRunsIt) {
  FakeAgent a(&ex_, &clock_, {.name = "w0"}, Rank(0));
  FakeAgent b(&ex_, &clock_, {.clock_offset_ns = 7 * kNanosPerMilli, .name = "w1"}, Rank(1));
  FakeAgent c(&ex_, &clock_, {.clock_offset_ns = -3 * kNanosPerMilli, .name = "w2"}, Rank(2));
  factory_.Add("a:1", &a);
  factory_.Add("b:1", &b);
  factory_.Add("c:1", &c);
  ASSERT_EQ(Run({"capture", "--workers=a:1,b:1,c:1", "--duration=500", "--session=bd", Logdir()}),
            kExitOk)
      << err_.str();
  const std::string dir = logdir_ + "/plugins/profile/bd";
  for (const char* f : {"pod_step_breakdown.json", "pod_step_breakdown.csv", "report.html"}) {
    EXPECT_TRUE(PathExists(dir + "/" + f)) << f;
  }
  EXPECT_THAT(out_.str(), HasSubstr("pod step breakdown of bd: 3 hosts"));
  EXPECT_THAT(out_.str(), HasSubstr("straggler: w1"));
  EXPECT_THAT(out_.str(), HasSubstr("report: " + dir + "/report.html"));
  const std::string captured = *ReadFile(dir + "/pod_step_breakdown.json");

  // Offline, on the saved session: the same answer, from the files alone.
  ASSERT_EQ(Run({"analyze", dir, "--json"}), kExitOk) << err_.str();
  google::protobuf::Struct json;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(out_.str(), &json), IsOk()) << out_.str();
  const auto& steps = json.fields().at("steps").list_value();
  ASSERT_GT(steps.values_size(), 5);
  for (const auto& step : steps.values()) {
    EXPECT_EQ(step.struct_value().fields().at("straggler").string_value(), "w1");
  }
  EXPECT_TRUE(PathExists(dir + "/report.html"));
  ASSERT_EQ(Run({"analyze", dir, "--csv"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("step,host,step_time_ms"));
  EXPECT_THAT(out_.str(), HasSubstr(",w1,"));
  // A folder of plain .xplane.pb files (no session.json) also works, without offsets.
  const std::string plain = tmp_.path() + "/plain";
  ASSERT_THAT(MakeDirs(plain), IsOk());
  for (const char* h : {"w0", "w1", "w2"}) {
    ASSERT_THAT(WriteFileAtomically(plain + "/" + h + ".xplane.pb",
                                    *ReadFile(dir + "/" + h + ".xplane.pb")),
                IsOk());
  }
  ASSERT_EQ(Run({"analyze", plain}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("straggler: w1"));
  // Without offsets, w1's clock is 7 ms off: its steps are matched by number, and it is said.
  EXPECT_THAT(out_.str(), HasSubstr("w1: its steps start 7.0 ms (median, steadily)"));
  EXPECT_FALSE(PathExists(plain + "/report.html"));  // no --out: nothing written
  EXPECT_FALSE(captured.empty());
}

TEST_F(CliTest, AnalyzeReadsPyTorchTracesAndReportsBadFilesButKeepsTheOthers) {
  const std::string dir = tmp_.path() + "/mixed";
  ASSERT_THAT(MakeDirs(dir), IsOk());
  ASSERT_THAT(
      WriteFileAtomically(dir + "/r3.pt.trace.json", *ReadFile(DataPath("rank3.pt.trace.json"))),
      IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/broken.pt.trace.json", "{\"traceEvents\": ["), IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/junk.xplane.pb", "\xff\xff not a proto"), IsOk());
  const std::string out = tmp_.path() + "/out";
  EXPECT_EQ(Run({"analyze", dir, "--out=" + out}), kExitPartial);
  EXPECT_THAT(err_.str(), HasSubstr("broken.pt.trace.json"));
  EXPECT_THAT(err_.str(), HasSubstr("junk.xplane.pb"));
  EXPECT_THAT(out_.str(), HasSubstr("rank-3"));  // named from distributedInfo.rank
  EXPECT_TRUE(PathExists(out + "/pod_step_breakdown.json"));
  EXPECT_TRUE(PathExists(out + "/report.html"));
  // The gzip variant reads the same.
  ASSERT_EQ(Run({"analyze", DataPath("rank3.pt.trace.json.gz"), "--csv"}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("rank-3"));
}

// A trace nested 100,000 levels deep (200 KB; fuzz/corpus/kineto/nested_100000_deep) crashed
// analyze and lost the good rank beside it: now it is refused naming the file and the cap, the
// good rank analysed, exit partial; the same with the tools' reader.
TEST_F(CliTest, AnalyzeRefusesADeeplyNestedTraceAndKeepsTheOthers) {
  const std::string dir = tmp_.path() + "/deep";
  ASSERT_THAT(MakeDirs(dir), IsOk());
  ASSERT_THAT(
      WriteFileAtomically(dir + "/r3.pt.trace.json", *ReadFile(DataPath("rank3.pt.trace.json"))),
      IsOk());
  const std::string deep =
      absl::StrCat("{\"traceEvents\": ", std::string(100000, '['), std::string(100000, ']'), "}");
  ASSERT_THAT(WriteFileAtomically(dir + "/deep.pt.trace.json", deep), IsOk());
  EXPECT_EQ(Run({"analyze", dir, "--csv"}), kExitPartial);
  EXPECT_THAT(err_.str(), HasSubstr(dir + "/deep.pt.trace.json: "));
  EXPECT_THAT(err_.str(), HasSubstr("nested deeper than 1000 levels"));
  EXPECT_THAT(out_.str(), HasSubstr(",rank-3,"));
  EXPECT_EQ(Run({"analyze", dir, "--tool=kernel_stats", "--csv"}), kExitPartial);
  EXPECT_THAT(err_.str(), HasSubstr(dir + "/deep.pt.trace.json: "));
  EXPECT_THAT(out_.str(), HasSubstr("aten::linear,168,213072"));
}

// A trace file over --max-file-mb is refused before it is read, naming the file, its size and
// the flag; the good rank beside it is analysed (exit partial), by the tools' reader too; the
// flag's value is checked.
TEST_F(CliTest, AnalyzeRefusesAFileOverTheSizeCapAndKeepsTheOthers) {
  const std::string dir = tmp_.path() + "/big";
  ASSERT_THAT(MakeDirs(dir), IsOk());
  ASSERT_THAT(
      WriteFileAtomically(dir + "/r3.pt.trace.json", *ReadFile(DataPath("rank3.pt.trace.json"))),
      IsOk());
  const std::string big =
      absl::StrCat("{\"traceEvents\": [", std::string((1 << 20) + 1, ' '), "]}");
  ASSERT_THAT(WriteFileAtomically(dir + "/big.pt.trace.json", big), IsOk());
  EXPECT_EQ(Run({"analyze", dir, "--csv", "--max-file-mb=1"}), kExitPartial);
  EXPECT_THAT(err_.str(), HasSubstr(absl::StrCat(dir, "/big.pt.trace.json: ", big.size(),
                                                 " bytes (1.0 MiB), more than the cap")));
  EXPECT_THAT(err_.str(), HasSubstr("--max-file-mb"));
  EXPECT_THAT(out_.str(), HasSubstr(",rank-3,"));
  EXPECT_EQ(Run({"analyze", dir, "--tool=kernel_stats", "--csv", "--max-file-mb=1"}), kExitPartial);
  EXPECT_THAT(err_.str(), HasSubstr(dir + "/big.pt.trace.json: "));
  EXPECT_THAT(out_.str(), HasSubstr("aten::linear,168,213072"));
  Run({"analyze", dir, "--csv"});  // the default cap (2 GiB) takes it
  EXPECT_THAT(err_.str(), Not(HasSubstr("--max-file-mb")));
  EXPECT_EQ(Run({"analyze", dir, "--max-file-mb=0"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--max-file-mb=0: must be 1..2^30"));
}

// `torch.profiler`'s export_chrome_trace is usually given "trace.json", any name really: the
// file is read by what it holds, gzipped or not, and an XSpace under another name too.
TEST_F(CliTest, AnalyzeReadsATraceByItsContentWhateverItsName) {
  const std::string dir = tmp_.path() + "/names";
  ASSERT_THAT(MakeDirs(dir), IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/trace.json", *ReadFile(DataPath("rank3.pt.trace.json"))),
              IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/export", *ReadFile(DataPath("rank3.pt.trace.json.gz"))),
              IsOk());
  ASSERT_THAT(
      WriteFileAtomically(dir + "/h100.bin", *ReadFile(DataPath("h100_pytorch_steps.xplane.pb"))),
      IsOk());
  for (const char* name : {"trace.json", "export"}) {
    ASSERT_EQ(Run({"analyze", dir + "/" + name, "--csv"}), kExitOk) << name << err_.str();
    EXPECT_THAT(out_.str(), HasSubstr(",rank-3,")) << name;
  }
  ASSERT_EQ(Run({"analyze", dir + "/h100.bin", "--csv"}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\n3088,h100.bin,"));  // an XSpace under any name
  // Bytes that are neither are refused by name, saying what was looked for.
  ASSERT_THAT(WriteFileAtomically(dir + "/notes.json", "hello"), IsOk());
  EXPECT_EQ(Run({"analyze", dir + "/notes.json"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("neither an XSpace protobuf"));
}

// A folder of traces under other names (HTA's test data: rank-0.json.gz, base.json.gz): each
// trace is read by what it holds, and every file that is not read is named with why.
TEST_F(CliTest, AnalyzeOfAFolderReadsTracesOfAnyNameAndNamesEveryFileItSkips) {
  const std::string dir = tmp_.path() + "/mixed";
  ASSERT_THAT(MakeDirs(dir + "/sub"), IsOk());
  ASSERT_THAT(
      WriteFileAtomically(dir + "/rank-0.json.gz", *ReadFile(DataPath("rank3.pt.trace.json.gz"))),
      IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/base.json", *ReadFile(DataPath("rank3.pt.trace.json"))),
              IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/et.json", "{\"schema\": \"1.0.1\", \"nodes\": []}"),
              IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/notes.txt", "hello"), IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/empty.json", ""), IsOk());
  // An accelerator's device events profctl does not read (MTIA's): named with their count.
  ASSERT_THAT(WriteFileAtomically(dir + "/mtia.pt.trace.json",
                                  R"({"traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
            {"ph": "X", "cat": "mtia_ccp_events", "name": "k", "pid": 17, "tid": 3, "ts": 11, "dur": 2},
            {"ph": "X", "cat": "mtia_ccp_events", "name": "k", "pid": 17, "tid": 3, "ts": 14, "dur": 2}]})"),
              IsOk());
  ASSERT_EQ(Run({"analyze", dir, "--json"}), kExitOk) << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("mtia: events of unknown categories ignored: "
                                    "'mtia_ccp_events' (2)"));
  google::protobuf::Struct json;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(out_.str(), &json), IsOk()) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"rank-3-2\""));  // both traces read (one rank, twice)
  for (const std::string& skipped :
       {dir + "/et.json: JSON, but not a Chrome trace", dir + "/notes.txt: not a trace by its name",
        dir + "/empty.json: empty", dir + "/sub: a folder"}) {
    EXPECT_THAT(err_.str(), HasSubstr("warning: skipped " + skipped));
    EXPECT_THAT(out_.str(), HasSubstr("skipped " + skipped));  // the JSON's warnings
  }
}

// --json lists every file that failed and why; two files of one rank are both kept, warned
// about by name, never renamed silently.
TEST_F(CliTest, AnalyzeJsonListsFailedFilesAndWarnsOfDuplicateRanks) {
  const std::string dir = tmp_.path() + "/dups";
  ASSERT_THAT(MakeDirs(dir), IsOk());
  const std::string rank3 = *ReadFile(DataPath("rank3.pt.trace.json"));
  ASSERT_THAT(WriteFileAtomically(dir + "/a.pt.trace.json", rank3), IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/b.pt.trace.json", rank3), IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/broken.pt.trace.json", "{\"traceEvents\": ["), IsOk());
  ASSERT_THAT(WriteFileAtomically(dir + "/junk.xplane.pb", "\xff\xff not a proto"), IsOk());
  EXPECT_EQ(Run({"analyze", dir, "--json"}), kExitPartial);
  const std::string warning = "two files claim host rank-3: " + dir + "/a.pt.trace.json and " +
                              dir + "/b.pt.trace.json (the same rank twice?); the second is " +
                              "reported as rank-3-2";
  EXPECT_THAT(err_.str(), HasSubstr("warning: " + warning));
  google::protobuf::Struct json;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(out_.str(), &json), IsOk()) << out_.str();
  const auto& failed = json.fields().at("failed_files").list_value();
  ASSERT_EQ(failed.values_size(), 2) << out_.str();
  const auto& f0 = failed.values(0).struct_value().fields();
  EXPECT_EQ(f0.at("path").string_value(), dir + "/broken.pt.trace.json");
  EXPECT_THAT(f0.at("error").string_value(), HasSubstr("invalid JSON"));
  EXPECT_THAT(f0.at("error").string_value(), ::testing::Not(HasSubstr(dir)));  // path once
  const auto& f1 = failed.values(1).struct_value().fields();
  EXPECT_EQ(f1.at("path").string_value(), dir + "/junk.xplane.pb");
  EXPECT_FALSE(f1.at("error").string_value().empty());
  std::vector<std::string> warnings;
  for (const auto& w : json.fields().at("warnings").list_value().values()) {
    warnings.push_back(w.string_value());
  }
  EXPECT_THAT(warnings, ::testing::Contains(warning));
  EXPECT_THAT(out_.str(), HasSubstr("\"rank-3-2\""));
  // The tools' JSON lists them too.
  EXPECT_EQ(Run({"analyze", dir, "--tool=kernel_stats", "--json"}), kExitPartial);
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(out_.str(), &json), IsOk()) << out_.str();
  EXPECT_EQ(json.fields().at("failed_files").list_value().values_size(), 2);
  EXPECT_THAT(err_.str(), HasSubstr("warning: " + warning));
  // Nothing failed: an empty list.
  ASSERT_EQ(Run({"analyze", dir + "/a.pt.trace.json", "--json"}), kExitOk) << err_.str();
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(out_.str(), &json), IsOk());
  EXPECT_EQ(json.fields().at("failed_files").list_value().values_size(), 0);
}

TEST_F(CliTest, AnalyzeRunsTheProfilerToolsOnAPyTorchTrace) {
  const std::string trace = DataPath("rank3.pt.trace.json.gz");
  ASSERT_EQ(Run({"analyze", trace, "--tool=kernel_stats", "--csv"}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("aten::linear,168,213072"));  // kernel, its op, the numbers
  EXPECT_EQ(Run({"analyze", trace, "--tool=bogus"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("unknown tool 'bogus'"));
  EXPECT_THAT(err_.str(), Not(HasSubstr("did you mean")));
  EXPECT_EQ(Run({"analyze", trace, "--tool=kernel_stat"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("unknown tool 'kernel_stat' (did you mean 'kernel_stats'?)"));
  EXPECT_EQ(Run({"analyze", trace, "--tool=all", "--json"}), kExitUsage);
  const std::string out = tmp_.path() + "/tools";
  ASSERT_EQ(Run({"analyze", trace, "--tool=all", "--out=" + out}), kExitOk) << err_.str();
  for (const char* tool :
       {"overview", "kernel_stats", "op_stats", "input_pipeline", "memory", "timeline"}) {
    EXPECT_TRUE(PathExists(absl::StrCat(out, "/tool_", tool, ".json"))) << tool;
  }
  EXPECT_TRUE(PathExists(out + "/report.html"));
}

TEST_F(CliTest, AnalyzeOpStatsIncludeIdleAddsTheIdleRow) {
  const std::string trace = DataPath("rank3.pt.trace.json.gz");
  ASSERT_EQ(Run({"analyze", trace, "--tool=op_stats", "--json"}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"include_idle\": false"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("\"name\": \"IDLE\"")));
  ASSERT_EQ(Run({"analyze", trace, "--tool=op_stats", "--json", "--include-idle"}), kExitOk)
      << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"include_idle\": true"));
  EXPECT_THAT(out_.str(), HasSubstr("\"name\": \"IDLE\""));
}

// Two captures of the same pod whose straggler moved from w1 to w2: `diff` says so, per host.
TEST_F(CliTest, DiffComparesTwoSessionsAndNamesTheStragglerChange) {
  std::vector<std::unique_ptr<FakeAgent>> agents;
  for (const std::string session : {"before", "after"}) {
    std::vector<std::string> workers;
    for (int r = 0; r < 3; ++r) {
      synthetic::SyntheticJobConfig config = Rank(r);
      config.straggler_rank = session == "before" ? 1 : 2;
      agents.push_back(std::make_unique<FakeAgent>(
          &ex_, &clock_, testkit::FakeAgentBehavior{.name = absl::StrCat("w", r)}, config));
      const std::string address = absl::StrCat(session, r, ":1");
      factory_.Add(address, agents.back().get());
      workers.push_back(address);
    }
    ASSERT_EQ(Run({"capture", "--workers=" + absl::StrJoin(workers, ","), "--duration=500",
                   "--session=" + session, Logdir()}),
              kExitOk)
        << err_.str();
  }
  const std::string before = logdir_ + "/plugins/profile/before";
  const std::string after = logdir_ + "/plugins/profile/after";
  ASSERT_EQ(Run({"diff", before, after, "--json"}), kExitOk) << err_.str();
  google::protobuf::Struct json;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(out_.str(), &json), IsOk()) << out_.str();
  const auto& straggler = json.fields().at("straggler").struct_value().fields();
  EXPECT_EQ(straggler.at("a").struct_value().fields().at("host").string_value(), "w1");
  EXPECT_EQ(straggler.at("b").struct_value().fields().at("host").string_value(), "w2");
  EXPECT_TRUE(straggler.at("changed").bool_value());
  // w1 stood out in compute before; w2 does after.
  std::vector<std::string> stands_out;
  for (const auto& o : json.fields().at("stands_out").list_value().values()) {
    const auto& f = o.struct_value().fields();
    stands_out.push_back(absl::StrCat(f.at("host").string_value(), " ",
                                      f.at("category").string_value(), " ",
                                      f.at("in_a").bool_value(), f.at("in_b").bool_value()));
  }
  EXPECT_THAT(stands_out, ::testing::Contains("w1 compute 10"));
  EXPECT_THAT(stands_out, ::testing::Contains("w2 compute 01"));
  const auto& hosts = json.fields().at("hosts").list_value();
  ASSERT_EQ(hosts.values_size(), 3);
  for (const auto& h : hosts.values()) {
    EXPECT_TRUE(h.struct_value().fields().at("in_a").bool_value());
    EXPECT_TRUE(h.struct_value().fields().at("in_b").bool_value());
  }
  // w1 got faster at compute, w2 slower.
  auto compute_delta = [&](int host) {
    return hosts.values(host)
        .struct_value()
        .fields()
        .at("categories_ms")
        .struct_value()
        .fields()
        .at("compute")
        .struct_value()
        .fields()
        .at("delta")
        .number_value();
  };
  EXPECT_LT(compute_delta(1), 0);
  EXPECT_GT(compute_delta(2), 0);
  ASSERT_EQ(Run({"diff", before, after}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("straggler: w1 (compute"));
  EXPECT_THAT(out_.str(), HasSubstr("[straggler changed]"));
  // CSV on stdout and the page beside it.
  const std::string page = tmp_.path() + "/diff.html";
  ASSERT_EQ(Run({"diff", before, after, "--csv", "--html=" + page}), kExitOk) << err_.str();
  EXPECT_TRUE(absl::StartsWith(out_.str(), "kind,host,name,a,b,delta,pct\n")) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("straggler,,host,w1,w2,,"));
  EXPECT_THAT(out_.str(), HasSubstr("host,w2,compute_ms,"));
  absl::StatusOr<std::string> html = ReadFile(page);
  ASSERT_THAT(html.status(), IsOk());
  EXPECT_THAT(*html, HasSubstr("straggler changed"));
  EXPECT_THAT(*html, HasSubstr("</html>"));
  // A page that cannot be written is an error, not a silent miss.
  ASSERT_THAT(WriteFileAtomically(tmp_.path() + "/a-file", "x"), IsOk());
  EXPECT_EQ(Run({"diff", before, after, "--html=" + tmp_.path() + "/a-file/d.html"}), kExitFailed);
  EXPECT_THAT(err_.str(), HasSubstr("--html="));
}

// The two real H100 fixtures: a rank-3 trace (Kineto distributedInfo.rank 3, two GPUs) and a
// single-GPU torch.profiler run named by its file: different names, one host a side, paired one
// to one; their categories compared, and the copies and memsets in the kernel list.
TEST_F(CliTest, DiffPairsTheTwoH100FixturesAndListsTheirCopiesAndMemsets) {
  const std::string a = DataPath("rank3.pt.trace.json");
  const std::string b = DataPath("h100_torch_profiler.pt.trace.json.gz");
  ASSERT_EQ(Run({"diff", a, b, "--json", "--top=50"}), kExitOk) << err_.str();
  google::protobuf::Struct json;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(out_.str(), &json), IsOk()) << out_.str();
  const auto& f = json.fields();
  EXPECT_EQ(f.at("pairing").struct_value().fields().at("method").string_value(), "single");
  const auto& hosts = f.at("hosts").list_value();
  ASSERT_EQ(hosts.values_size(), 1);
  const auto& h = hosts.values(0).struct_value().fields();
  EXPECT_EQ(h.at("host").string_value(), "rank-3 / h100_torch_profiler");
  EXPECT_EQ(h.at("rank").struct_value().fields().at("a").number_value(), 3);
  EXPECT_TRUE(h.at("in_a").bool_value() && h.at("in_b").bool_value());
  // Compared per category, per pair and for the pod.
  const auto& compute =
      h.at("categories_ms").struct_value().fields().at("compute").struct_value().fields();
  EXPECT_NE(compute.at("delta").number_value(), 0);
  EXPECT_NE(f.at("pod")
                .struct_value()
                .fields()
                .at("categories_ms")
                .struct_value()
                .fields()
                .at("compute")
                .struct_value()
                .fields()
                .at("delta")
                .number_value(),
            0);
  // The copies and memsets are listed with the kernels, marked.
  std::set<std::string> kinds;
  for (const auto& k : f.at("kernels").list_value().values()) {
    kinds.insert(k.struct_value().fields().at("kind").string_value());
  }
  EXPECT_TRUE(kinds.contains("memset")) << out_.str();
  EXPECT_TRUE(kinds.contains("copy h2d")) << out_.str();
  EXPECT_TRUE(kinds.contains("kernel")) << out_.str();
  EXPECT_GE(f.at("transfers").list_value().values_size(), 3);
  EXPECT_FALSE(f.at("headline").struct_value().fields().at("sentence").string_value().empty());

  // The table says what changed most first, and how the hosts were paired.
  ASSERT_EQ(Run({"diff", a, b}), kExitOk) << err_.str();
  EXPECT_TRUE(absl::StartsWith(out_.str(), "changed most: ")) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("hosts: 1 -> 1, paired one to one (each side has one host)"));
}

TEST_F(CliTest, DiffOfTwoTraceFilesAndItsUsageErrors) {
  const std::string plain = DataPath("rank3.pt.trace.json");
  // The same trace, gzipped or not: nothing changed.
  ASSERT_EQ(Run({"diff", plain, DataPath("rank3.pt.trace.json.gz"), "--json"}), kExitOk)
      << err_.str();
  google::protobuf::Struct json;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(out_.str(), &json), IsOk()) << out_.str();
  const auto& hosts = json.fields().at("hosts").list_value();
  ASSERT_EQ(hosts.values_size(), 1);
  EXPECT_EQ(hosts.values(0).struct_value().fields().at("host").string_value(), "rank-3");
  EXPECT_EQ(hosts.values(0)
                .struct_value()
                .fields()
                .at("step_time_ms")
                .struct_value()
                .fields()
                .at("delta")
                .number_value(),
            0);
  EXPECT_TRUE(json.fields().at("has_tools").bool_value());
  EXPECT_EQ(json.fields().at("kernels").list_value().values_size(), 0);

  EXPECT_EQ(Run({"diff"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("profctl diff: give two captures to compare, A and B (got 0"));
  EXPECT_EQ(Run({"diff", plain}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("(got 1 path)"));
  EXPECT_EQ(Run({"diff", plain, plain, plain}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("(got 3 paths)"));
  EXPECT_EQ(Run({"diff", plain, tmp_.path() + "/nope"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("profctl diff: B: "));
  EXPECT_THAT(err_.str(), HasSubstr("no such file"));
  EXPECT_EQ(Run({"diff", tmp_.path() + "/nope", plain}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("profctl diff: A: "));
  EXPECT_EQ(Run({"diff", plain, plain, "--top=-1"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--top=-1"));
  EXPECT_EQ(Run({"diff", plain, plain, "--json", "--csv"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("exclude each other"));

  // A side with no readable trace fails (1), naming the side; one bad file of several is
  // partial (3) and the diff is still printed.
  const std::string broken = tmp_.path() + "/broken";
  ASSERT_THAT(MakeDirs(broken), IsOk());
  ASSERT_THAT(WriteFileAtomically(broken + "/bad.pt.trace.json", "{\"traceEvents\": ["), IsOk());
  EXPECT_EQ(Run({"diff", plain, broken}), kExitFailed);
  EXPECT_THAT(err_.str(), HasSubstr("profctl diff: B: no trace could be analysed in " + broken));
  ASSERT_THAT(WriteFileAtomically(broken + "/r3.pt.trace.json", *ReadFile(plain)), IsOk());
  EXPECT_EQ(Run({"diff", broken, plain}), kExitPartial);
  EXPECT_THAT(err_.str(), HasSubstr("profctl diff: A: "));
  EXPECT_THAT(err_.str(), HasSubstr("bad.pt.trace.json"));
  EXPECT_THAT(out_.str(), HasSubstr("rank-3"));
}

TEST_F(CliTest, SessionsListsALogDirNewestFirst) {
  FakeAgent a(&ex_, &clock_, {.name = "a"});
  factory_.Add("a:1", &a);
  ASSERT_EQ(Run({"capture", "--workers=a:1", "--duration=50", "--session=first", Logdir()}),
            kExitOk);
  ASSERT_EQ(Run({"capture", "--workers=a:1", "--duration=50", "--session=second", Logdir()}),
            kExitOk);
  ASSERT_EQ(Run({"sessions", Logdir()}), kExitOk) << err_.str();
  const std::string table = out_.str();
  ASSERT_THAT(table, HasSubstr("first"));
  EXPECT_LT(table.find("second"), table.find("first"));  // newest first
  EXPECT_THAT(table, HasSubstr("cli"));
  ASSERT_EQ(Run({"sessions", Logdir(), "--json", "--limit=1"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"session\": \"second\""));
  EXPECT_THAT(out_.str(), ::testing::Not(HasSubstr("\"session\": \"first\"")));
  EXPECT_EQ(Run({"sessions", "--limit=0"}), kExitUsage);
  EXPECT_EQ(Run({"sessions", "--coordinator=grpc://x:1"}), kExitUsage);
  EXPECT_EQ(Run({"serve"}), kExitUsage);  // --config is required
  EXPECT_THAT(err_.str(), HasSubstr("--config"));
}

TEST_F(CliTest, AnalyzeBadPathsAreUsageErrors) {
  EXPECT_EQ(Run({"analyze"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("no path given"));
  EXPECT_EQ(Run({"analyze", tmp_.path() + "/nope"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("no such file"));
  ASSERT_THAT(WriteFileAtomically(tmp_.path() + "/notes.txt", "hi"), IsOk());
  EXPECT_EQ(Run({"analyze", tmp_.path() + "/notes.txt"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("not a trace file profctl reads"));
  EXPECT_THAT(err_.str(), HasSubstr("notes.txt"));
  ASSERT_THAT(MakeDirs(tmp_.path() + "/logs/plugins/profile/run1"), IsOk());
  EXPECT_EQ(Run({"analyze", tmp_.path() + "/logs"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("is a logdir: pass one run folder"));
  EXPECT_THAT(err_.str(), HasSubstr("run1"));
  EXPECT_EQ(Run({"analyze", tmp_.path(), "--step-pattern=step(no group"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--step-pattern"));
  EXPECT_EQ(Run({"analyze", tmp_.path(), "--json", "--csv"}), kExitUsage);
}

// fuzz/corpus/session_manifest/escapes_the_folder: a manifest naming a file outside its folder.
// A session.json too large to be a manifest (64 GiB, sparse) is refused before it is read.
TEST_F(CliTest, AnalyzeRefusesAHugeManifestBeforeReadingIt) {
  const std::string dir = tmp_.path() + "/huge";
  ASSERT_THAT(MakeDirs(dir), IsOk());
  const std::string manifest = dir + "/session.json";
  ASSERT_THAT(WriteFileAtomically(manifest, "{}"), IsOk());
  ASSERT_EQ(truncate(manifest.c_str(), off_t{64} << 30), 0);
  EXPECT_EQ(Run({"analyze", dir}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr(manifest + ": 68719476736 bytes, more than a session manifest "
                                               "may hold (67108864 bytes)"));
}

// What is not a regular file is refused without blocking or being read, named with what it is:
// a session.json that is a FIFO or a link to /dev/zero (a usage error: no session to read), and
// beside a good trace a FIFO named like a trace and a link to /dev/zero named like one (each
// named, the good host analysed: partial). The same through `diff`.
TEST_F(CliTest, AnalyzeAndDiffRefuseWhatIsNotARegularFile) {
  const std::string plain = DataPath("rank3.pt.trace.json");
  const std::string zero_session = tmp_.path() + "/zero";
  ASSERT_THAT(MakeDirs(zero_session), IsOk());
  ASSERT_EQ(symlink("/dev/zero", (zero_session + "/session.json").c_str()), 0);
  const std::string fifo_session = tmp_.path() + "/fifo";
  ASSERT_THAT(MakeDirs(fifo_session), IsOk());
  ASSERT_EQ(mkfifo((fifo_session + "/session.json").c_str(), 0644), 0);
  EXPECT_EQ(Run({"analyze", zero_session}), kExitUsage);
  EXPECT_THAT(err_.str(),
              HasSubstr(zero_session + "/session.json: a character device (/dev/zero, through a "
                                       "symbolic link), not a regular file"));
  EXPECT_EQ(Run({"diff", zero_session, plain}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("profctl diff: A: " + zero_session + "/session.json"));
  EXPECT_EQ(Run({"analyze", fifo_session}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr(fifo_session + "/session.json: a FIFO, not a regular file"));
  EXPECT_EQ(Run({"diff", plain, fifo_session}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("profctl diff: B: " + fifo_session + "/session.json: a FIFO"));

  const std::string traces = tmp_.path() + "/traces";
  ASSERT_THAT(MakeDirs(traces), IsOk());
  ASSERT_EQ(symlink(plain.c_str(), (traces + "/rank3.pt.trace.json").c_str()), 0);
  ASSERT_EQ(mkfifo((traces + "/rank4.pt.trace.json").c_str(), 0644), 0);
  ASSERT_EQ(symlink("/dev/zero", (traces + "/rank5.xplane.pb").c_str()), 0);
  EXPECT_EQ(Run({"analyze", traces}), kExitPartial) << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("rank4.pt.trace.json: a FIFO, not a regular file"));
  EXPECT_THAT(err_.str(), HasSubstr("rank5.xplane.pb: a character device (/dev/zero"));
  EXPECT_THAT(out_.str(), HasSubstr("rank-3"));
  EXPECT_EQ(Run({"diff", traces, plain}), kExitPartial) << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("rank4.pt.trace.json: a FIFO, not a regular file"));
  EXPECT_THAT(out_.str(), HasSubstr("rank-3"));
  // Named on the command line itself.
  EXPECT_EQ(Run({"analyze", traces + "/rank4.pt.trace.json"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("rank4.pt.trace.json: a FIFO, not a regular file"));
  EXPECT_EQ(Run({"diff", plain, traces + "/rank5.xplane.pb"}), kExitUsage);
  EXPECT_THAT(
      err_.str(),
      HasSubstr("rank5.xplane.pb: a character device (/dev/zero, through a symbolic link)"));
}

// `sessions` names a session whose session.json is a link to /dev/zero and lists the others; a
// RUNNING session whose owner marker is a FIFO is judged without blocking on it.
TEST_F(CliTest, SessionsNamesAManifestThatIsNotARegularFileAndListsTheRest) {
  FakeAgent a(&ex_, &clock_, {.name = "a"});
  factory_.Add("a:1", &a);
  ASSERT_EQ(Run({"capture", "--workers=a:1", "--duration=50", "--session=good", Logdir()}),
            kExitOk);
  const std::string zero = logdir_ + "/plugins/profile/zero";
  ASSERT_THAT(MakeDirs(zero), IsOk());
  ASSERT_EQ(symlink("/dev/zero", (zero + "/session.json").c_str()), 0);
  const std::string running = logdir_ + "/plugins/profile/running";
  ASSERT_THAT(MakeDirs(running), IsOk());
  ASSERT_THAT(
      WriteFileAtomically(running + "/session.json", R"({"status":"SESSION_STATUS_RUNNING"})"),
      IsOk());
  ASSERT_EQ(mkfifo((running + "/" + kRunningMarkerFileName).c_str(), 0644), 0);
  ASSERT_EQ(Run({"sessions", Logdir()}), kExitOk) << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr(zero + "/session.json: a character device (/dev/zero"));
  EXPECT_THAT(out_.str(), HasSubstr("good"));
  EXPECT_THAT(out_.str(), HasSubstr("running"));
}

// `diff --html=PATH` replaces a regular file we may write, and refuses anything else before a
// trace is read (a usage error), leaving it as it was: a FIFO, a directory, a symbolic link and
// a read-only file.
TEST_F(CliTest, DiffHtmlReplacesOnlyARegularFile) {
  const std::string plain = DataPath("rank3.pt.trace.json");
  const std::string page = tmp_.path() + "/diff.html";
  ASSERT_THAT(WriteFileAtomically(page, "old"), IsOk());
  EXPECT_EQ(Run({"diff", plain, plain, "--html=" + page}), kExitOk) << err_.str();
  EXPECT_THAT(*ReadFile(page), HasSubstr("<html"));

  const std::string fifo = tmp_.path() + "/fifo.html";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const std::string dir = tmp_.path() + "/dir.html";
  ASSERT_THAT(MakeDirs(dir), IsOk());
  const std::string link = tmp_.path() + "/link.html";
  ASSERT_EQ(symlink(page.c_str(), link.c_str()), 0);
  const std::string read_only = tmp_.path() + "/ro.html";
  ASSERT_THAT(WriteFileAtomically(read_only, "keep"), IsOk());
  ASSERT_EQ(chmod(read_only.c_str(), 0444), 0);
  for (const auto& [path, what] : std::vector<std::pair<std::string, std::string>>{
           {fifo, ": a FIFO, not a regular file: not replaced"},
           {dir, ": a directory, not a regular file: not replaced"},
           {link, ": a symbolic link (to " + page + "), not a regular file: not replaced"},
           {read_only, ": a read-only file (mode 0444): not replaced"}}) {
    EXPECT_EQ(Run({"diff", plain, plain, "--html=" + path}), kExitUsage) << path;
    EXPECT_THAT(err_.str(), HasSubstr("profctl diff: --html: " + path + what));
    EXPECT_EQ(out_.str(), "") << "refused before any trace was read";
  }
  struct stat st {};
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(*ReadFile(read_only), "keep");
}

// Only the commands that watch the interrupt (a capture saves what was recorded, serve stops
// its schedules) keep the process alive on SIGINT/SIGTERM; every other one quits at once.
TEST_F(CliTest, OnlyCommandsThatWatchTheInterruptTakeIt) {
  std::atomic<bool> taken{false};
  CliEnv env = Env();
  env.interrupt_taken = &taken;
  for (const char* name : {"capture", "demo", "serve"}) {
    taken = false;
    EXPECT_EQ(RunCli({name, "--help"}, env), kExitOk);
    EXPECT_TRUE(taken.load()) << name;
  }
  for (const char* name : {"analyze", "diff", "ping", "sessions", "schedules", "version"}) {
    taken = true;
    EXPECT_EQ(RunCli({name, "--help"}, env), kExitOk);
    EXPECT_FALSE(taken.load()) << name;
  }
}

TEST_F(CliTest, AnalyzeRefusesAManifestThatNamesFilesOutsideTheSession) {
  const std::string dir = tmp_.path() + "/run";
  ASSERT_THAT(MakeDirs(dir), IsOk());
  ASSERT_THAT(WriteFileAtomically(tmp_.path() + "/outside.xplane.pb", "x"), IsOk());
  for (const std::string file : {"../outside.xplane.pb", "/etc/passwd", ".."}) {
    const std::string manifest =
        R"({"hosts":[{"host":"w0","status":"HOST_STATUS_OK","xplane_file":")" + file + R"("}]})";
    ASSERT_THAT(WriteFileAtomically(dir + "/session.json", manifest), IsOk());
    EXPECT_EQ(Run({"analyze", dir}), kExitUsage) << file;
    EXPECT_THAT(err_.str(), HasSubstr("not a file name in the session folder")) << file;
  }
}

TEST_F(CliTest, HelpAndVersion) {
  EXPECT_EQ(Run({"--help"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("capture"));
  EXPECT_EQ(Run({}), kExitUsage);
  EXPECT_EQ(Run({"capture", "--help"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("--workers"));
  EXPECT_EQ(Run({"version"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("profctl 0."));
  EXPECT_EQ(Run({"-V"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("profctl 0."));
}

TEST_F(CliTest, HelpListsEveryExitCode) {
  EXPECT_EQ(Run({"--help"}), kExitOk);
  const std::string help = out_.str();
  EXPECT_THAT(help, HasSubstr(absl::StrCat("  ", kExitOk, "  done")));
  EXPECT_THAT(help, HasSubstr(absl::StrCat("  ", kExitFailed, "  failed")));
  EXPECT_THAT(help, HasSubstr(absl::StrCat("  ", kExitUsage, "  usage")));
  EXPECT_THAT(help, HasSubstr(absl::StrCat("  ", kExitPartial, "  partial")));
  EXPECT_THAT(help, HasSubstr("128+N"));
}

}  // namespace
}  // namespace profctl::coordinator
