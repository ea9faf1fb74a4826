// Whole-system measurements of `profctl capture` against real profctl-agent processes on this
// machine, through shaped network paths (tests/tcp_proxy.h: this kernel has no tc/netem). Not a
// Google Benchmark: each sample is a whole capture (seconds), run as the release `profctl` binary
// in a child process, so its wall time, peak RSS and CPU time are the coordinator's alone
// (wait4's rusage of that child). Results and exact commands: docs/perf.md.
//
//   multihost_benchmark alignment [--runs=20] [--align-hosts=8] [--duration=1500]
//     Hosts 0 and 1 are reached directly (loopback), hosts 2.. through their own TcpProxy with
//     the path under test: loopback (no proxy), 20 ms RTT symmetric (10 ms each way), 10 ms
//     asymmetry (10 ms up, 0 down). Each run captures with --align=ntp and with the default
//     (collectives), alternately. Per shaped host it reports
//       - realized start skew: the host's realized start on the true timeline minus start_at,
//         where true = agent clock - injected skew (every agent runs on this machine's clock, so
//         the injected --clock-skew-ms is the true offset); plus the agent's own view
//         (agent_start - requested_start on its clock) and the manifest's start_spread_ns;
//       - alignment error: |offset used - injected skew| (the aligned all-reduce ends' error
//         against the true instant), and the all-reduce end disagreement with host 0 read from
//         the saved .xplane.pb files (ncclDevKernel* ends on /device:GPU:0, matched within 15 ms).
//
//   multihost_benchmark heavy [--hosts=8] [--duration=3000] [--runs=3] [--synthetic=...]
//     One profctl-agent --endpoints process serving every host, each a rank of a heavy synthetic
//     job (8 GPUs, 256 kernels a step). Reports the pod outputs against their targets: the pod
//     trace's bytes per saved XSpace byte, the outputs phase (session.json outputs_ms) per window,
//     and the coordinator's peak RSS against 2 x the traces' bytes + 64 MiB.
//
//   multihost_benchmark scale [--hosts=64,256,1024] [--runs=3] [--duration=1000]
//                             [--endpoints-per-process=256] [--unhealthy-percent=5] [--pin]
//                             [--keep=DIR] [--agent-log-level=warn]
//     profctl-agent --endpoints processes (ranks of one synthetic job, clocks +-2 s apart), with
//     unhealthy-percent of the workers dead (closed ports, half, rounded up) or hung (a stalled
//     TcpProxy in front of a real endpoint). Reports wall time minus duration, its phases from the
//     manifest, the coordinator's peak RSS and CPU time per host, and whether every healthy host
//     was saved. --pin puts profctl on CPU 0 and the agents and proxies on CPU 1; --keep copies
//     each run's session.json, profctl output and agent logs (with --agent-log-level=info they
//     show when each Capture arrived) into DIR. --agent and --profctl take other binaries (or
//     wrappers: perf record, prlimit, LD_PRELOAD shims). Each run first waits (at most 75 s) for
//     the last run's TIME_WAIT sockets to drain: while they linger, new connections cost more.
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/service/agent_server.h"
#include "bench/time_wait.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "coordinator/cli/local_agents.h"
#include "google/protobuf/util/json_util.h"
#include "profctl/v1/session.pb.h"
#include "tensorflow/profiler/xplane.pb.h"
#include "tests/build_paths.h"
#include "tests/loopback.h"
#include "tests/tcp_proxy.h"
#include "xspace/xspace.h"

extern char** environ;

namespace profctl::bench {
namespace {

using testkit::TcpProxy;

struct Paths {
  std::string agent = test_paths::AgentBinary();
  std::string profctl = test_paths::CliBinary();
  std::string scratch;
  std::string keep;  // copy each scale run's session.json and profctl stderr here
  // Scale: agents (and the proxies) on CPU 1, profctl on CPU 0, so the coordinator's own cost is
  // seen without the agents competing for its core.
  bool pin = false;
  std::string agent_log_level = "warn";    // scale: the agents' --log-level (logs kept with --keep)
  std::vector<std::string> capture_flags;  // heavy: more flags for profctl capture
};

// Pins the calling thread (and so every process or thread it starts from now on) to `cpu`;
// -1 = every CPU.
void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (cpu < 0) {
    for (int i = 0; i < CPU_SETSIZE; ++i) CPU_SET(i, &set);
  } else {
    CPU_SET(cpu, &set);
  }
  sched_setaffinity(0, sizeof(set), &set);
}

// The 1-minute load average, to tell a quiet machine from a busy one in the logs.
std::string LoadAverage() {
  const std::string text = ReadFile("/proc/loadavg").value_or("?");
  return text.substr(0, text.find(' '));
}

std::string Loopback(int port) { return testkit::LoopbackAddress(port); }

// Nearest-rank percentile of `v` (p in 0..100); 0 for an empty sample.
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// CPU time (user + system) process `pid` has used so far, in ms (/proc/<pid>/stat fields 14 and
// 15, after the parenthesized command name); 0 if it cannot be read.
double ProcessCpuMs(pid_t pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat")).value_or("");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  const std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ');
  int64_t utime = 0, stime = 0;  // fields 14 and 15 are f[11] and f[12] after the name
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return 0;
  }
  return static_cast<double>(utime + stime) * 1e3 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct CaptureRun {
  int exit_code = -1;
  int64_t wall_ns = 0;
  int64_t spawn_wall_ns = 0, exit_wall_ns = 0;  // this host's wall clock, as profctl's
  rusage usage{};
  v1::SessionManifest manifest;
  bool manifest_ok = false;
  std::string session_dir;
};

// Runs `profctl capture` as a child process (stdout, stderr to files in the scratch folder) and
// reads its session.json.
CaptureRun RunProfctl(const Paths& paths, const std::vector<std::string>& workers,
                      const std::vector<std::string>& flags, const std::string& session) {
  const std::string logdir = paths.scratch + "/logs";
  // Past 64 workers the list goes in a file (--workers=@FILE), as a large pod's would: one
  // argument of a command line may not pass 128 KiB (about 8,000 loopback addresses).
  std::string workers_flag = "--workers=" + absl::StrJoin(workers, ",");
  if (workers.size() > 64) {
    const std::string list = paths.scratch + "/workers.txt";
    if (absl::Status s = WriteFileAtomically(list, absl::StrJoin(workers, "\n")); !s.ok()) {
      std::cerr << "cannot write the worker file: " << s << "\n";
      return CaptureRun{};
    }
    workers_flag = "--workers=@" + list;
  }
  std::vector<std::string> argv = {paths.profctl,        "capture",
                                   workers_flag,         "--session=" + session,
                                   "--logdir=" + logdir, "--json"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const std::string out = paths.scratch + "/profctl.out", err = paths.scratch + "/profctl.err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  RealClock clock;
  CaptureRun r;
  const int64_t t0 = clock.MonoNs();
  r.spawn_wall_ns = clock.WallNs();
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) == 0) {
    int status = 0;
    if (wait4(pid, &status, 0, &r.usage) == pid && WIFEXITED(status)) {
      r.exit_code = WEXITSTATUS(status);
    }
  }
  r.wall_ns = clock.MonoNs() - t0;
  r.exit_wall_ns = clock.WallNs();
  posix_spawn_file_actions_destroy(&actions);
  r.session_dir = logdir + "/plugins/profile/" + session;
  absl::StatusOr<std::string> json = ReadFile(r.session_dir + "/session.json");
  r.manifest_ok = json.ok() && google::protobuf::util::JsonStringToMessage(*json, &r.manifest).ok();
  if (!r.manifest_ok) {
    std::cerr << "session " << session << ": no manifest (exit " << r.exit_code
              << "): " << ReadFile(err).value_or("") << "\n";
  }
  return r;
}

// Ends of the ncclDevKernel* events on /device:GPU:0 of a saved file, minus offset_ns; sorted.
std::vector<int64_t> AllReduceEnds(const std::string& path, int64_t offset_ns) {
  std::vector<int64_t> ends;
  tensorflow::profiler::XSpace space;
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok() || !space.ParseFromString(*bytes)) return ends;
  const tensorflow::profiler::XPlane* gpu = xspace::FindPlane(space, "/device:GPU:0");
  if (gpu == nullptr) return ends;
  const int64_t start = xspace::ProfileStartNs(space);
  const xspace::XPlaneReader reader(*gpu);
  reader.ForEachEvent([&](const xspace::XLine& line, const xspace::XEvent& e) {
    if (absl::StartsWith(reader.EventName(e), "ncclDevKernel")) {
      ends.push_back(xspace::EventEndNs(start, line, e) - offset_ns);
    }
  });
  std::sort(ends.begin(), ends.end());
  return ends;
}

// --- alignment ---------------------------------------------------------------------------------

struct PathShape {
  std::string name;
  int64_t up_ms = 0, down_ms = 0;
  bool proxied = false;
};

struct AlignmentSamples {
  std::vector<double> start_true_ms;   // |realized start (true timeline) - start_at|
  std::vector<double> start_agent_ms;  // agent's own view: agent_start - requested_start
  std::vector<double> spread_ms;       // manifest start_spread_ns, per run
  std::vector<double> offset_err_us;   // |offset used - injected skew|
  std::vector<double> disagree_us;     // |all-reduce end - host 0's|, per matched collective
  int runs = 0, failed_runs = 0;
};

int RunAlignment(const Paths& paths, int64_t runs, int64_t hosts, int64_t duration_ms) {
  const int64_t kSkewMs[] = {0, -1537, 263, 4011, -250, 1200, -3333, 77, 911, -42, 2500, -777};
  if (hosts < 3 || hosts > static_cast<int64_t>(std::size(kSkewMs))) {
    std::cerr << "--hosts must be in 3.." << std::size(kSkewMs) << "\n";
    return 2;
  }
  RealClock clock;
  coordinator::LocalAgents agents(paths.scratch);
  std::vector<int> ports;
  for (int64_t r = 0; r < hosts; ++r) {
    const std::string port_file = absl::StrCat(paths.scratch, "/agent-", r, ".port");
    absl::Status s = agents.Spawn(
        paths.agent, {"--port=0", "--bind=127.0.0.1", "--port-file=" + port_file,
                      absl::StrCat("--name=worker-", r),
                      absl::StrCat("--synthetic=world=", hosts,
                                   ",seed=5,step_ms=40,gpus=2,kernels_per_step=4,rank=", r),
                      absl::StrCat("--clock-skew-ms=", kSkewMs[r]), "--log-level=warn"});
    absl::StatusOr<int> port =
        s.ok() ? agents.WaitForPort(static_cast<size_t>(r), port_file, clock) : s;
    if (!port.ok()) {
      std::cerr << "agent " << r << ": " << port.status() << "\n";
      return 1;
    }
    ports.push_back(*port);
  }
  const std::vector<PathShape> shapes = {{"loopback", 0, 0, false},
                                         {"20 ms RTT, symmetric (10 up / 10 down)", 10, 10, true},
                                         {"10 ms asymmetry (10 up / 0 down)", 10, 0, true}};
  std::cout << "| path | align | runs | start skew p50 / p99 (ms) | agent's own view p50 / p99 "
               "(ms) | start_spread_ns p50 / max (ms) | offset error p50 / p99 (us) | all-reduce "
               "disagreement p50 / p99 (us) |\n|---|---|---|---|---|---|---|---|\n";
  for (const PathShape& shape : shapes) {
    std::vector<std::unique_ptr<TcpProxy>> proxies;
    std::vector<std::string> workers;
    for (int64_t r = 0; r < hosts; ++r) {
      if (!shape.proxied || r < 2) {
        workers.push_back(Loopback(ports[static_cast<size_t>(r)]));
        continue;
      }
      absl::StatusOr<std::unique_ptr<TcpProxy>> p =
          TcpProxy::Start("127.0.0.1", ports[static_cast<size_t>(r)]);
      if (!p.ok()) {
        std::cerr << "proxy: " << p.status() << "\n";
        return 1;
      }
      (*p)->SetUpDelay(absl::Milliseconds(shape.up_ms));
      (*p)->SetDownDelay(absl::Milliseconds(shape.down_ms));
      workers.push_back((*p)->address());
      proxies.push_back(*std::move(p));
    }
    // The hosts measured: the shaped ones (all but host 0 on plain loopback).
    const int64_t first_measured = shape.proxied ? 2 : 1;
    AlignmentSamples samples[2];  // [0] ntp, [1] collectives
    for (int64_t run = 0; run < 2 * runs; ++run) {
      const int mode = static_cast<int>(run % 2);
      AlignmentSamples& s = samples[mode];
      const std::string session =
          absl::StrCat("align-", &shape - shapes.data(), "-", mode, "-", run / 2);
      std::vector<std::string> flags = {absl::StrCat("--duration=", duration_ms)};
      if (mode == 0) flags.push_back("--align=ntp");
      CaptureRun c = RunProfctl(paths, workers, flags, session);
      ++s.runs;
      if (!c.manifest_ok || c.exit_code != 0) {
        ++s.failed_runs;
        std::cerr << session << ": exit " << c.exit_code << "\n";
        std::filesystem::remove_all(c.session_dir);
        continue;
      }
      const v1::SessionManifest& m = c.manifest;
      s.spread_ms.push_back(Ms(m.start_spread_ns()));
      const std::vector<int64_t> ref = AllReduceEnds(c.session_dir + "/" + m.hosts(0).xplane_file(),
                                                     m.hosts(0).clock().offset_ns());
      for (int64_t r = first_measured; r < hosts; ++r) {
        const v1::HostResult& h = m.hosts(static_cast<int>(r));
        const int64_t skew = kSkewMs[r] * kNanosPerMilli;
        s.start_true_ms.push_back(
            std::abs(Ms(h.agent_start_ns() - skew - static_cast<int64_t>(m.start_at_ns()))));
        s.start_agent_ms.push_back(Ms(h.agent_start_ns() - h.requested_start_ns()));
        s.offset_err_us.push_back(std::abs(static_cast<double>(h.clock().offset_ns() - skew)) /
                                  1e3);
        for (int64_t x :
             AllReduceEnds(c.session_dir + "/" + h.xplane_file(), h.clock().offset_ns())) {
          auto it = std::lower_bound(ref.begin(), ref.end(), x);
          int64_t best = INT64_MAX;
          if (it != ref.end()) best = std::min(best, *it - x);
          if (it != ref.begin()) best = std::min(best, x - *std::prev(it));
          if (best <= 15 * kNanosPerMilli) s.disagree_us.push_back(static_cast<double>(best) / 1e3);
        }
      }
      std::filesystem::remove_all(c.session_dir);
      std::cerr << session << " done\n";
    }
    for (int mode = 0; mode < 2; ++mode) {
      const AlignmentSamples& s = samples[mode];
      std::cout << absl::StrFormat(
          "| %s | %s | %d%s | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f | %.0f / %.0f | %.1f / %.1f "
          "|\n",
          shape.name, mode == 0 ? "ntp" : "collectives", s.runs,
          s.failed_runs > 0 ? absl::StrCat(" (", s.failed_runs, " failed)") : "",
          Percentile(s.start_true_ms, 50), Percentile(s.start_true_ms, 99),
          Percentile(s.start_agent_ms, 50), Percentile(s.start_agent_ms, 99),
          Percentile(s.spread_ms, 50), Percentile(s.spread_ms, 100),
          Percentile(s.offset_err_us, 50), Percentile(s.offset_err_us, 99),
          Percentile(s.disagree_us, 50), Percentile(s.disagree_us, 99));
    }
    std::cout.flush();
  }
  return 0;
}

// --- scale -------------------------------------------------------------------------------------

struct ScaleResult {
  double wall_minus_duration_ms = 0;
  double prepare_ms = 0, budget_ms = 0, lead_ms = 0, send_ms = 0, after_window_ms = 0;
  double peak_rss_mib = 0;
  double cpu_ms_per_host = 0;
  double agents_cpu_ms = 0;               // every agent process, during the profctl run
  double collect_ms = 0, outputs_ms = 0;  // session.json: after the window
  // Before preparing (process start, flags, session folder) and after finished_ns (session.json,
  // --json output, teardown, exit): the rest of wall - duration.
  double startup_ms = 0, exit_tail_ms = 0;
  double start_p50_ms = 0, start_p99_ms = 0, spread_ms = 0;
  double agent_late_p50_ms = 0, agent_late_p99_ms = 0;  // agent_start - requested, its clock
  int ok = 0, healthy = 0, exit_code = -1;
  int healthy_saved = 0, late = 0;  // healthy hosts whose trace was saved (ok or incomplete); late
  bool unhealthy_failed_right = true;
  std::string load_before;
  double time_wait_waited_s = 0;  // before the run, for the last run's sockets to drain
};

constexpr int64_t kSkewSpreadMs = 2000;

ScaleResult RunScaleOnce(const Paths& paths, int64_t hosts, int64_t per_process,
                         int64_t unhealthy_percent, int64_t duration_ms, int64_t run) {
  ScaleResult out;
  out.time_wait_waited_s = AwaitTimeWaitDrained();
  const int64_t unhealthy = (hosts * unhealthy_percent + 50) / 100;
  const int64_t dead = (unhealthy + 1) / 2, hung = unhealthy - dead;
  const int64_t served = hosts - dead;  // endpoints: the healthy ones and the hung ones
  out.healthy = static_cast<int>(served - hung);
  RealClock clock;
  const std::string scratch = absl::StrCat(paths.scratch, "/scale-", hosts, "-", run);
  std::filesystem::create_directories(scratch);
  std::vector<std::string> endpoint_address;
  std::vector<int64_t> endpoint_skew_ns;
  {
    if (paths.pin) PinTo(1);
    coordinator::LocalAgents agents(scratch);
    for (int64_t first = 0, p = 0; first < served; first += per_process, ++p) {
      const int64_t n = std::min(per_process, served - first);
      const std::string port_file = absl::StrCat(scratch, "/agents-", p, ".port");
      // Process p serves ranks first..first+n-1 of one job of `served` ranks; its clock is off by
      // 100 ms * p, and each endpoint's by up to +-2 s more.
      absl::Status s =
          agents.Spawn(paths.agent, {"--port=0", "--bind=127.0.0.1", "--port-file=" + port_file,
                                     absl::StrCat("--endpoints=", n), absl::StrCat("--name=p", p),
                                     absl::StrCat("--clock-skew-ms=", 100 * p),
                                     absl::StrCat("--endpoint-skew-spread-ms=", kSkewSpreadMs),
                                     absl::StrCat("--synthetic=rank=", first, ",world=", served,
                                                  ",seed=3,step_ms=50,gpus=1,kernels_per_step=2"),
                                     "--log-level=" + paths.agent_log_level});
      absl::StatusOr<std::vector<int>> ports =
          s.ok() ? agents.WaitForPorts(static_cast<size_t>(p), port_file, clock)
                 : absl::StatusOr<std::vector<int>>(s);
      if (!ports.ok()) {
        std::cerr << "agents " << p << ": " << ports.status() << "\n";
        return out;
      }
      for (size_t i = 0; i < ports->size(); ++i) {
        endpoint_address.push_back(Loopback((*ports)[i]));
        endpoint_skew_ns.push_back(
            (100 * p + agent::EndpointSkewMs(static_cast<int64_t>(i), kSkewSpreadMs)) *
            kNanosPerMilli);
      }
    }
    // Hung: every (served / hung)-th endpoint is reached only through a stalled proxy.
    std::vector<std::unique_ptr<TcpProxy>> proxies;
    std::vector<std::string> workers;
    std::vector<int> kind;  // 0 healthy, 1 hung, 2 dead
    std::vector<int64_t> skew;
    const int64_t hung_every = hung > 0 ? served / hung : 0;
    int64_t hung_left = hung;
    for (int64_t i = 0; i < served; ++i) {
      if (hung_left > 0 && i % hung_every == hung_every - 1) {
        --hung_left;
        const std::string& a = endpoint_address[static_cast<size_t>(i)];
        absl::StatusOr<std::unique_ptr<TcpProxy>> p =
            TcpProxy::Start("127.0.0.1", std::stoi(a.substr(a.find(':') + 1)));
        if (!p.ok()) {
          std::cerr << "proxy: " << p.status() << "\n";
          return out;
        }
        (*p)->Stall(true);
        workers.push_back((*p)->address());
        proxies.push_back(*std::move(p));
        kind.push_back(1);
      } else {
        workers.push_back(endpoint_address[static_cast<size_t>(i)]);
        kind.push_back(0);
      }
      skew.push_back(endpoint_skew_ns[static_cast<size_t>(i)]);
    }
    // Dead: spread through the list.
    const std::vector<int> dead_ports = testkit::ClosedLoopbackPorts(static_cast<int>(dead));
    for (int64_t d = 0; d < dead; ++d) {
      const size_t at =
          static_cast<size_t>((d * 2 + 1) * static_cast<int64_t>(workers.size()) / (2 * dead + 1));
      workers.insert(workers.begin() + static_cast<ptrdiff_t>(at),
                     Loopback(dead_ports[static_cast<size_t>(d)]));
      kind.insert(kind.begin() + static_cast<ptrdiff_t>(at), 2);
      skew.insert(skew.begin() + static_cast<ptrdiff_t>(at), 0);
    }

    out.load_before = LoadAverage();
    const size_t agent_processes = static_cast<size_t>((served + per_process - 1) / per_process);
    auto agents_cpu_ms = [&] {
      double sum = 0;
      for (size_t p = 0; p < agent_processes; ++p) sum += ProcessCpuMs(agents.pid(p));
      return sum;
    };
    const double agents_cpu_before = agents_cpu_ms();
    if (paths.pin) PinTo(0);
    CaptureRun c = RunProfctl(paths, workers, {absl::StrCat("--duration=", duration_ms)},
                              absl::StrCat("scale-", hosts, "-", run));
    if (paths.pin) PinTo(-1);
    out.agents_cpu_ms = agents_cpu_ms() - agents_cpu_before;
    out.exit_code = c.exit_code;
    out.wall_minus_duration_ms = Ms(c.wall_ns) - static_cast<double>(duration_ms);
    out.peak_rss_mib = static_cast<double>(c.usage.ru_maxrss) / 1024;  // KiB on Linux
    const double cpu_ms =
        (static_cast<double>(c.usage.ru_utime.tv_sec + c.usage.ru_stime.tv_sec) * 1e3 +
         static_cast<double>(c.usage.ru_utime.tv_usec + c.usage.ru_stime.tv_usec) / 1e3);
    out.cpu_ms_per_host = cpu_ms / static_cast<double>(hosts);
    if (c.manifest_ok) {
      const v1::SessionManifest& m = c.manifest;
      out.prepare_ms = m.prepare_ms();
      out.budget_ms = m.prepare_budget_ms();
      out.spread_ms = Ms(m.start_spread_ns());
      out.collect_ms = m.collect_ms();
      out.outputs_ms = m.outputs_ms();
      int64_t max_rtt = 0;
      std::vector<double> start, agent_late;
      for (int i = 0; i < m.hosts_size(); ++i) {
        const v1::HostResult& h = m.hosts(i);
        const bool ok = h.status() == v1::HOST_STATUS_OK;
        const bool saved = !h.xplane_file().empty();
        out.ok += ok;
        out.late += h.late();
        if (kind[static_cast<size_t>(i)] == 0) out.healthy_saved += saved;
        if (kind[static_cast<size_t>(i)] == 0 && !ok) {
          std::cerr << "healthy " << h.address() << ": " << v1::HostStatus_Name(h.status()) << " "
                    << v1::FailureStep_Name(h.error().step()) << " " << h.error().message()
                    << (h.late() ? absl::StrCat(" late ", Ms(h.lateness_ns()), " ms") : "") << " "
                    << h.recording_detail() << "\n";
        }
        if (kind[static_cast<size_t>(i)] != 0) {
          const int want = kind[static_cast<size_t>(i)] == 2
                               ? static_cast<int>(absl::StatusCode::kUnavailable)
                               : static_cast<int>(absl::StatusCode::kDeadlineExceeded);
          if (ok || h.error().code() != want) {
            out.unhealthy_failed_right = false;
            std::cerr << "unhealthy " << h.address() << ": " << h.error().code() << " "
                      << h.error().message() << "\n";
          }
        }
        if (!saved) continue;  // every recording host: a late one too
        max_rtt = std::max(max_rtt, h.clock().rtt_ns());
        start.push_back(std::abs(Ms(h.agent_start_ns() - skew[static_cast<size_t>(i)] -
                                    static_cast<int64_t>(m.start_at_ns()))));
        agent_late.push_back(Ms(h.agent_start_ns() - h.requested_start_ns()));
      }
      out.lead_ms = m.lead_ms();  // 0 from a profctl before it was recorded
      out.send_ms = m.send_ms();  // likewise
      if (out.lead_ms == 0) {     // then the formula before the send cost was measured
        out.lead_ms =
            Ms(std::max<int64_t>(100 * kNanosPerMilli, 4 * max_rtt) + hosts * 20 * kNanosPerMicro);
      }
      out.startup_ms = Ms(m.start_at_ns() - c.spawn_wall_ns) - out.prepare_ms - out.lead_ms;
      out.exit_tail_ms = Ms(c.exit_wall_ns - m.finished_ns());
      out.after_window_ms =
          Ms(m.finished_ns() - m.start_at_ns()) - static_cast<double>(duration_ms);
      out.start_p50_ms = Percentile(start, 50);
      out.start_p99_ms = Percentile(start, 99);
      out.agent_late_p50_ms = Percentile(agent_late, 50);
      out.agent_late_p99_ms = Percentile(agent_late, 99);
    }
    if (!paths.keep.empty()) {
      std::error_code ignored;  // a run that wrote no manifest still keeps its stderr
      std::filesystem::copy_file(
          c.session_dir + "/session.json",
          absl::StrCat(paths.keep, "/scale-", hosts, "-", run, ".session.json"),
          std::filesystem::copy_options::overwrite_existing, ignored);
      std::filesystem::copy_file(paths.scratch + "/profctl.err",
                                 absl::StrCat(paths.keep, "/scale-", hosts, "-", run, ".err"),
                                 std::filesystem::copy_options::overwrite_existing, ignored);
      std::filesystem::copy_file(paths.scratch + "/profctl.out",
                                 absl::StrCat(paths.keep, "/scale-", hosts, "-", run, ".out"),
                                 std::filesystem::copy_options::overwrite_existing, ignored);
    }
    std::filesystem::remove_all(c.session_dir);
    proxies.clear();  // before the agents stop: no connection held open into them
  }
  if (!paths.keep.empty()) {
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(scratch, ignored)) {
      if (entry.path().extension() == ".log") {
        std::filesystem::copy_file(entry.path(),
                                   absl::StrCat(paths.keep, "/scale-", hosts, "-", run, ".",
                                                entry.path().filename().string()),
                                   std::filesystem::copy_options::overwrite_existing, ignored);
      }
    }
  }
  std::filesystem::remove_all(scratch);
  return out;
}

int RunScale(const Paths& paths, const std::vector<int64_t>& host_counts, int64_t runs,
             int64_t duration_ms, int64_t per_process, int64_t unhealthy_percent) {
  std::cout << "| hosts (dead + hung) | agent processes | runs | wall - duration (ms) | prepare / "
               "budget (ms) | lead (ms) | after window (ms) | coordinator peak RSS (MiB) | "
               "coordinator CPU per host (ms) | realized start p50 / p99 (ms) | agent's own "
               "lateness p50 / p99 (ms) | start_spread_ns (ms) | healthy saved "
               "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (int64_t hosts : host_counts) {
    std::vector<ScaleResult> results;
    for (int64_t run = 0; run < runs; ++run) {
      results.push_back(
          RunScaleOnce(paths, hosts, per_process, unhealthy_percent, duration_ms, run));
      const ScaleResult& r = results.back();
      std::cerr << absl::StrFormat(
          "hosts %d run %d: exit %d, wall-duration %.0f ms (startup %.0f, prepare %.0f of %.0f, "
          "lead %.0f (Captures sent in %.0f), after window %.0f: collect %.0f, outputs %.0f; exit "
          "tail %.0f), rss %.1f "
          "MiB, cpu/host %.3f ms (agents' cpu %.0f ms), ok %d, saved %d/%d healthy, late %d, "
          "start p99 %.3f ms (agent's own %.3f), load before %s, waited %.0f s for TIME_WAIT to "
          "drain\n",
          hosts, run, r.exit_code, r.wall_minus_duration_ms, r.startup_ms, r.prepare_ms,
          r.budget_ms, r.lead_ms, r.send_ms, r.after_window_ms, r.collect_ms, r.outputs_ms,
          r.exit_tail_ms, r.peak_rss_mib, r.cpu_ms_per_host, r.agents_cpu_ms, r.ok, r.healthy_saved,
          r.healthy, r.late, r.start_p99_ms, r.agent_late_p99_ms, r.load_before,
          r.time_wait_waited_s);
    }
    // The median run by wall time, and whether every run saved every healthy host.
    std::sort(results.begin(), results.end(), [](const ScaleResult& a, const ScaleResult& b) {
      return a.wall_minus_duration_ms < b.wall_minus_duration_ms;
    });
    bool all_saved = true, unhealthy_right = true;
    double max_wall = 0;
    for (const ScaleResult& r : results) {
      all_saved = all_saved && r.healthy_saved == r.healthy;
      unhealthy_right = unhealthy_right && r.unhealthy_failed_right;
      max_wall = std::max(max_wall, r.wall_minus_duration_ms);
    }
    const ScaleResult& m = results[results.size() / 2];
    const int64_t unhealthy = (hosts * unhealthy_percent + 50) / 100;
    std::cout << absl::StrFormat(
        "| %d (%d + %d) | %d | %d | %.0f (max %.0f) | %.0f / %.0f | %.0f | %.0f | %.1f | %.3f | "
        "%.3f / %.3f | %.3f / %.3f | %.3f | %s%s |\n",
        hosts, (unhealthy + 1) / 2, unhealthy / 2,
        (hosts - (unhealthy + 1) / 2 + per_process - 1) / per_process, runs,
        m.wall_minus_duration_ms, max_wall, m.prepare_ms, m.budget_ms, m.lead_ms, m.after_window_ms,
        m.peak_rss_mib, m.cpu_ms_per_host, m.start_p50_ms, m.start_p99_ms, m.agent_late_p50_ms,
        m.agent_late_p99_ms, m.spread_ms,
        absl::StrCat(all_saved ? "yes, " : "NO, median run ", m.healthy_saved, "/", m.healthy,
                     m.late > 0 ? absl::StrCat(" (", m.late, " late)") : ""),
        unhealthy_right ? "" : " (an unhealthy host did not fail as expected)");
    std::cout.flush();
  }
  return 0;
}

// A heavy host: 8 GPUs, 256 kernels a step every 100 ms (about 2 MB of XSpace a second).
constexpr absl::string_view kHeavySynthetic = "seed=5,step_ms=100,gpus=8,kernels_per_step=256";

// --- heavy: the pod outputs of heavy hosts -----------------------------------------------------

struct HeavyResult {
  int exit_code = -1;
  double wall_minus_duration_ms = 0;
  int64_t collect_ms = 0, outputs_ms = 0;
  int64_t xspace_bytes = 0;     // the saved *.xplane.pb files
  int64_t pod_trace_bytes = 0;  // pod.perfetto-trace.gz (else pod.trace.json.gz)
  double peak_rss_mib = 0, cpu_ms = 0;
  int saved = 0;
  std::string load_before;
};

// One capture of `hosts` endpoints of one agent process, each a rank of the synthetic job
// `synthetic` (world = hosts); the saved files' sizes, then the session folder is removed.
HeavyResult RunHeavyOnce(const Paths& paths, int64_t hosts, int64_t duration_ms,
                         const std::string& synthetic, int64_t run) {
  HeavyResult out;
  RealClock clock;
  const std::string scratch = absl::StrCat(paths.scratch, "/heavy-", hosts, "-", run);
  std::filesystem::create_directories(scratch);
  {
    coordinator::LocalAgents agents(scratch);
    const std::string port_file = scratch + "/agents.port";
    absl::Status s =
        agents.Spawn(paths.agent, {"--port=0", "--bind=127.0.0.1", "--port-file=" + port_file,
                                   absl::StrCat("--endpoints=", hosts), "--name=heavy",
                                   absl::StrCat("--synthetic=rank=0,world=", hosts, ",", synthetic),
                                   "--log-level=warn"});
    absl::StatusOr<std::vector<int>> ports =
        s.ok() ? agents.WaitForPorts(0, port_file, clock) : absl::StatusOr<std::vector<int>>(s);
    if (!ports.ok()) {
      std::cerr << "agents: " << ports.status() << "\n";
      return out;
    }
    std::vector<std::string> workers;
    for (int port : *ports) workers.push_back(Loopback(port));
    out.load_before = LoadAverage();
    std::vector<std::string> flags = paths.capture_flags;
    flags.push_back(absl::StrCat("--duration=", duration_ms));
    CaptureRun c = RunProfctl(paths, workers, flags, absl::StrCat("heavy-", hosts, "-", run));
    out.exit_code = c.exit_code;
    out.wall_minus_duration_ms = Ms(c.wall_ns) - static_cast<double>(duration_ms);
    out.peak_rss_mib = static_cast<double>(c.usage.ru_maxrss) / 1024;
    out.cpu_ms = static_cast<double>(c.usage.ru_utime.tv_sec + c.usage.ru_stime.tv_sec) * 1e3 +
                 static_cast<double>(c.usage.ru_utime.tv_usec + c.usage.ru_stime.tv_usec) / 1e3;
    if (c.manifest_ok) {
      out.collect_ms = c.manifest.collect_ms();
      out.outputs_ms = c.manifest.outputs_ms();
    }
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(c.session_dir, ignored)) {
      const std::string name = entry.path().filename().string();
      const auto size = static_cast<int64_t>(entry.file_size(ignored));
      if (absl::EndsWith(name, ".xplane.pb")) {
        out.xspace_bytes += size;
        ++out.saved;
      } else if (name == "pod.perfetto-trace.gz" ||
                 (name == "pod.trace.json.gz" && out.pod_trace_bytes == 0)) {
        out.pod_trace_bytes = size;
      }
    }
    if (!paths.keep.empty()) {
      std::filesystem::copy(c.session_dir, absl::StrCat(paths.keep, "/heavy-", hosts, "-", run),
                            std::filesystem::copy_options::recursive, ignored);
    }
    std::filesystem::remove_all(c.session_dir);
  }
  std::filesystem::remove_all(scratch);
  return out;
}

// The pod outputs against their targets: pod trace bytes per XSpace byte (<= 0.4), the outputs
// phase per window (<= 0.5), coordinator peak RSS against 2 x the traces + 64 MiB.
int RunHeavy(const Paths& paths, const std::vector<int64_t>& host_counts, int64_t runs,
             int64_t duration_ms, const std::string& synthetic) {
  std::cout << "| hosts x window | runs | XSpace (MiB) | pod trace (MiB) / per XSpace byte | "
               "outputs (ms) / per window | collect (ms) | coordinator peak RSS (MiB) / (2 x "
               "traces + 64 MiB) | coordinator CPU (ms) | saved |\n|---|---|---|---|---|---|---|"
               "---|---|\n";
  for (int64_t hosts : host_counts) {
    std::vector<HeavyResult> results;
    for (int64_t run = 0; run < runs; ++run) {
      results.push_back(RunHeavyOnce(paths, hosts, duration_ms, synthetic, run));
      const HeavyResult& r = results.back();
      std::cerr << absl::StrFormat(
          "heavy %d hosts x %d ms run %d: exit %d, wall-duration %.0f ms, collect %d ms, outputs "
          "%d ms, xspace %.1f MiB, pod trace %.1f MiB, rss %.1f MiB, cpu %.0f ms, saved %d, "
          "load before %s\n",
          hosts, duration_ms, run, r.exit_code, r.wall_minus_duration_ms, r.collect_ms,
          r.outputs_ms, static_cast<double>(r.xspace_bytes) / (1 << 20),
          static_cast<double>(r.pod_trace_bytes) / (1 << 20), r.peak_rss_mib, r.cpu_ms, r.saved,
          r.load_before);
    }
    std::sort(results.begin(), results.end(), [](const HeavyResult& a, const HeavyResult& b) {
      return a.outputs_ms < b.outputs_ms;
    });
    const HeavyResult& m = results[results.size() / 2];
    const double xspace_mib = static_cast<double>(m.xspace_bytes) / (1 << 20);
    const double trace_mib = static_cast<double>(m.pod_trace_bytes) / (1 << 20);
    std::cout << absl::StrFormat(
        "| %d x %.1f s | %d | %.1f | %.1f / %.2f | %d (%d-%d) / %.2f | %d | %.0f / %.2f | %.0f | "
        "%d/%d |\n",
        hosts, static_cast<double>(duration_ms) / 1e3, runs, xspace_mib, trace_mib,
        xspace_mib > 0 ? trace_mib / xspace_mib : 0.0, m.outputs_ms, results.front().outputs_ms,
        results.back().outputs_ms,
        static_cast<double>(m.outputs_ms) / static_cast<double>(duration_ms), m.collect_ms,
        m.peak_rss_mib, m.peak_rss_mib / (2 * xspace_mib + 64), m.cpu_ms, m.saved, hosts);
    std::cout.flush();
  }
  return 0;
}

int Main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || (args[0] != "alignment" && args[0] != "scale" && args[0] != "heavy")) {
    std::cerr << "usage: multihost_benchmark alignment|scale|heavy [flags] (--help for flags)\n";
    return 2;
  }
  Paths paths;
  int64_t runs = args[0] == "alignment" ? 20 : 3;
  int64_t duration_ms = args[0] == "alignment" ? 1500 : args[0] == "heavy" ? 3000 : 1000;
  int64_t align_hosts = 8;
  std::string scale_hosts = args[0] == "heavy" ? "8" : "64,256,1024";
  std::string synthetic = std::string(kHeavySynthetic);
  int64_t per_process = 256;
  int64_t unhealthy_percent = 5;
  FlagSet fs("multihost_benchmark " + args[0]);
  fs.String("agent", &paths.agent, "profctl-agent binary");
  fs.String("profctl", &paths.profctl, "profctl binary");
  fs.String("agent-log-level", &paths.agent_log_level,
            "scale: the agents' --log-level (info logs each capture's arrival; kept with --keep)");
  fs.Bool("pin", &paths.pin, "scale: agents and proxies on CPU 1, profctl on CPU 0");
  fs.String("keep", &paths.keep, "scale: copy each run's session.json and stderr into this folder");
  fs.Int64("runs", &runs, "captures per configuration");
  fs.Int64("duration", &duration_ms, "capture window, ms");
  fs.Int64("align-hosts", &align_hosts, "alignment: hosts (0 and 1 direct, the rest shaped)");
  fs.String("hosts", &scale_hosts, "scale: comma-separated host counts");
  fs.Int64("endpoints-per-process", &per_process, "scale: endpoints per agent process");
  fs.Int64("unhealthy-percent", &unhealthy_percent, "scale: dead + hung workers, %");
  fs.String("synthetic", &synthetic, "heavy: each host's synthetic job (world is the host count)");
  std::string capture_flags;
  fs.String("capture-flags", &capture_flags,
            "heavy: comma-separated flags for profctl capture (e.g. --pod-trace-json)");
  if (absl::Status s = fs.Parse({args.begin() + 1, args.end()}); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  if (fs.help_requested()) {
    std::cout << fs.Help();
    return 0;
  }
  for (absl::string_view f : absl::StrSplit(capture_flags, ',', absl::SkipEmpty())) {
    paths.capture_flags.emplace_back(f);
  }
  // The sessions are written here: under $TMPDIR (default /tmp). Where that file system is slow
  // to make files (docs/perf.md: 225 us a file in one VM's /tmp), it shows in the coordinator's
  // CPU.
  std::error_code no_tmpdir;
  std::filesystem::path base = std::filesystem::temp_directory_path(no_tmpdir);
  if (no_tmpdir) base = "/tmp";
  std::string tmpl = (base / "profctl_bench_XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::cerr << "cannot make a scratch folder " << tmpl << "\n";
    return 1;
  }
  paths.scratch = tmpl;
  int rc = 0;
  if (args[0] == "alignment") {
    rc = RunAlignment(paths, runs, align_hosts, duration_ms);
  } else if (args[0] == "heavy") {
    std::vector<int64_t> counts;
    for (absl::string_view h : absl::StrSplit(scale_hosts, ',')) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(h, &n) || n < 1) {
        std::cerr << "--hosts: bad count '" << h << "'\n";
        return 2;
      }
      counts.push_back(n);
    }
    rc = RunHeavy(paths, counts, runs, duration_ms, synthetic);
  } else {
    std::vector<int64_t> counts;
    for (absl::string_view h : absl::StrSplit(scale_hosts, ',')) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(h, &n) || n < 2) {
        std::cerr << "--hosts: bad count '" << h << "'\n";
        return 2;
      }
      counts.push_back(n);
    }
    rc = RunScale(paths, counts, runs, duration_ms, per_process, unhealthy_percent);
  }
  std::filesystem::remove_all(paths.scratch);
  return rc;
}

}  // namespace
}  // namespace profctl::bench

int main(int argc, char** argv) { return profctl::bench::Main(argc, argv); }
