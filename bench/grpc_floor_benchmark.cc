// What gRPC alone costs a coordinator per host: the floor under the coordinator's per-host CPU
// and memory (docs/perf.md, "What gRPC alone costs a host"). The client makes, for every host, the
// calls a `profctl capture` makes (a channel with profctl's arguments, GetInfo, --samples SyncClock
// round trips one after another, a renewal GetInfo, then a Capture stream of --trace-bytes and a
// GetStepSignal at the window's end), with nothing of profctl's own work: no clock math, no trace
// decoding, no files. The servers are minimal AgentService processes (--endpoints-per-process ports
// each) that answer at once, hold each Capture for --window-ms and then send a header, the bytes
// and a trailer.
//
//   grpc_floor_benchmark [--hosts=1024] [--samples=5] [--trace-bytes=18000] [--window-ms=1000]
//                        [--endpoints-per-process=256] [--calls=full|info+stream|stream]
//                        [--arg=NAME=INTEGER ...] [--scheme=ipv4] [--drain=1]
//
// Reports the client's CPU time per host (getrusage of the whole client process, user and system,
// gRPC's threads included, from the first channel made to 300 ms after the last one was
// destroyed), wall time, and its peak RSS above what it held after one warm-up call of each kind.
// Each call is dropped as it ends, as profctl drops it. --calls=info+stream makes only GetInfo
// and the Capture stream, --calls=stream only the stream (the least this gRPC client can do with a
// connection a host). --arg adds integer channel arguments, to try gRPC's knobs against the
// floor. Each run first waits (at most 75 s; --drain=0 not at all) for the last run's TIME_WAIT
// sockets to drain, as multihost_benchmark does.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/blocking_counter.h"
#include "bench/proc_status.h"
#include "bench/time_wait.h"
#include "common/process_setup.h"
#include "grpcpp/grpcpp.h"
#include "profctl/v1/agent.grpc.pb.h"

extern char** environ;

namespace {

using profctl::v1::AgentService;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Flags {
  bool serve = false;
  int hosts = 1024;
  int samples = 5;
  int trace_bytes = 18000;
  int window_ms = 1000;
  int endpoints_per_process = 256;
  enum class Calls { kFull, kInfoAndStream, kStream } calls = Calls::kFull;
  // --arg=NAME=VALUE: extra integer channel arguments, to try gRPC's knobs against the floor.
  std::vector<std::pair<std::string, int>> channel_args;
  std::string scheme;  // --scheme=ipv4: targets as ipv4:127.0.0.1:PORT (no DNS resolver)
  int drain = 1;       // --drain=0: do not wait for the last run's TIME_WAIT sockets
};

bool ParseFlag(absl::string_view arg, absl::string_view name, int* out) {
  if (!absl::ConsumePrefix(&arg, name) || !absl::ConsumePrefix(&arg, "=")) return false;
  if (!absl::SimpleAtoi(arg, out) || *out < 0) {
    std::cerr << "grpc_floor_benchmark: bad value for " << name << ": " << arg << "\n";
    std::exit(2);
  }
  return true;
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (a == "serve") {
      f.serve = true;
    } else if (a == "--calls=info+stream") {
      f.calls = Flags::Calls::kInfoAndStream;
    } else if (a == "--calls=stream") {
      f.calls = Flags::Calls::kStream;
    } else if (absl::ConsumePrefix(&a, "--arg=")) {
      const size_t eq = a.rfind('=');
      int v = 0;
      if (eq == absl::string_view::npos || !absl::SimpleAtoi(a.substr(eq + 1), &v)) {
        std::cerr << "grpc_floor_benchmark: --arg wants NAME=INTEGER\n";
        std::exit(2);
      }
      f.channel_args.emplace_back(std::string(a.substr(0, eq)), v);
    } else if (absl::ConsumePrefix(&a, "--scheme=")) {
      f.scheme = std::string(a);
    } else if (a == "--calls=full") {
      f.calls = Flags::Calls::kFull;
    } else if (!ParseFlag(a, "--hosts", &f.hosts) && !ParseFlag(a, "--samples", &f.samples) &&
               !ParseFlag(a, "--trace-bytes", &f.trace_bytes) &&
               !ParseFlag(a, "--window-ms", &f.window_ms) && !ParseFlag(a, "--drain", &f.drain) &&
               !ParseFlag(a, "--endpoints-per-process", &f.endpoints_per_process)) {
      std::cerr << "grpc_floor_benchmark: unknown argument " << a << "\n";
      std::exit(2);
    }
  }
  if (f.hosts < 1 || f.endpoints_per_process < 1) {
    std::cerr << "grpc_floor_benchmark: --hosts and --endpoints-per-process must be >= 1\n";
    std::exit(2);
  }
  return f;
}

// ---------------------------------------------------------------- the servers

class MinimalAgent final : public AgentService::Service {
 public:
  MinimalAgent(int trace_bytes, int window_ms) : data_(trace_bytes, 'x'), window_ms_(window_ms) {}

  grpc::Status GetInfo(grpc::ServerContext*, const profctl::v1::GetInfoRequest*,
                       profctl::v1::GetInfoResponse* r) override {
    r->set_name("floor");
    r->set_hostname("floor");
    r->set_version("0");
    r->add_collectors("synthetic");
    r->set_max_duration_ms(3'600'000);
    r->set_instance_id("floor");
    return grpc::Status::OK;
  }
  grpc::Status SyncClock(grpc::ServerContext*, const profctl::v1::SyncClockRequest*,
                         profctl::v1::SyncClockResponse* r) override {
    r->set_receive_ns(NowNs());
    r->set_send_ns(NowNs());
    return grpc::Status::OK;
  }
  grpc::Status GetStepSignal(grpc::ServerContext*, const profctl::v1::GetStepSignalRequest*,
                             profctl::v1::GetStepSignalResponse* r) override {
    r->set_now_ns(NowNs());
    return grpc::Status::OK;
  }
  grpc::Status Capture(grpc::ServerContext*, const profctl::v1::CaptureRequest* req,
                       grpc::ServerWriter<profctl::v1::CaptureChunk>* w) override {
    profctl::v1::CaptureChunk chunk;
    chunk.mutable_started();
    w->Write(chunk);
    std::this_thread::sleep_for(std::chrono::milliseconds(window_ms_));
    chunk.Clear();
    profctl::v1::CaptureHeader* h = chunk.mutable_header();
    h->set_session_id(req->session_id());
    h->set_total_bytes(data_.size());
    h->set_name("floor");
    w->Write(chunk);
    chunk.Clear();
    chunk.set_data(data_);
    w->Write(chunk);
    chunk.Clear();
    chunk.mutable_trailer();
    w->Write(chunk);
    return grpc::Status::OK;
  }

 private:
  const std::string data_;
  const int window_ms_;
};

int Serve(const Flags& f) {
  MinimalAgent service(f.trace_bytes, f.window_ms);
  grpc::ServerBuilder builder;
  std::vector<int> ports(static_cast<size_t>(f.endpoints_per_process));
  for (int& p : ports) {
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &p);
  }
  builder.RegisterService(&service);
  // Every Capture holds a thread for the window: one for each endpoint, and some to spare.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 4);
  grpc::ResourceQuota quota;
  quota.SetMaxThreads(f.endpoints_per_process * 2 + 16);
  builder.SetResourceQuota(quota);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return 1;
  for (int p : ports) std::cout << p << "\n";
  std::cout << "ready" << std::endl;
  // Serve until the client closes our stdin.
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}

// ---------------------------------------------------------------- the client

struct Server {
  pid_t pid = -1;
  int to_child = -1;
  std::vector<int> ports;
};

Server SpawnServer(const Flags& f) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) std::exit(1);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  std::vector<std::string> args = {
      "/proc/self/exe", "serve", absl::StrCat("--trace-bytes=", f.trace_bytes),
      absl::StrCat("--window-ms=", f.window_ms),
      absl::StrCat("--endpoints-per-process=", f.endpoints_per_process)};
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  Server s;
  if (posix_spawn(&s.pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ) != 0) std::exit(1);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  s.to_child = in[1];
  FILE* from = fdopen(out[0], "r");
  char buf[64];
  while (fgets(buf, sizeof buf, from) != nullptr) {
    const absl::string_view line = absl::StripSuffix(absl::string_view(buf), "\n");
    if (line == "ready") break;
    int port = 0;
    if (absl::SimpleAtoi(line, &port)) s.ports.push_back(port);
  }
  fclose(from);
  return s;
}

struct Cpu {
  double user_s = 0;
  double sys_s = 0;
};

Cpu CpuNow() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return {static_cast<double>(ru.ru_utime.tv_sec) + static_cast<double>(ru.ru_utime.tv_usec) / 1e6,
          static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) / 1e6};
}

struct Host;

class CaptureReader final : public grpc::ClientReadReactor<profctl::v1::CaptureChunk> {
 public:
  explicit CaptureReader(Host* host) : host_(host) {}
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& s) override;
  grpc::ClientContext ctx;
  profctl::v1::CaptureRequest request;
  profctl::v1::CaptureChunk chunk;
  int64_t bytes = 0;

 private:
  Host* host_;
};

struct Host {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<AgentService::Stub> stub;
  const Flags* flags = nullptr;
  absl::BlockingCounter* prepared = nullptr;
  absl::BlockingCounter* finished = nullptr;
  int samples_left = 0;
  std::atomic<bool> failed{false};
  std::unique_ptr<CaptureReader> capture;
  // One call at a time in prepare, so one context and response of each kind is enough.
  std::unique_ptr<grpc::ClientContext> ctx;
  profctl::v1::GetInfoRequest info_req;
  profctl::v1::GetInfoResponse info;
  profctl::v1::SyncClockRequest sync_req;
  profctl::v1::SyncClockResponse sync;
  std::unique_ptr<grpc::ClientContext> step_ctx;
  profctl::v1::GetStepSignalRequest step_req;
  profctl::v1::GetStepSignalResponse step;
  std::atomic<int> finish_parts{2};

  grpc::ClientContext* NewContext() {
    ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return ctx.get();
  }

  bool Full() const { return flags->calls == Flags::Calls::kFull; }

  void Start() {
    if (flags->calls == Flags::Calls::kStream) {  // the stream connects the channel itself
      prepared->DecrementCount();
      return;
    }
    info_req.mutable_reserve()->set_session_id("floor-session");
    info_req.mutable_reserve()->set_session_key("floor-key");
    info_req.mutable_reserve()->set_ttl_ms(2000);
    stub->async()->GetInfo(NewContext(), &info_req, &info, [this](const grpc::Status& s) {
      if (!s.ok()) failed = true;
      samples_left = Full() ? flags->samples : 0;
      NextSample();
    });
  }

  void NextSample() {
    if (samples_left == 0) {
      if (!Full()) {
        ctx.reset();  // as profctl drops each call as it ends
        prepared->DecrementCount();
        return;
      }
      stub->async()->GetInfo(NewContext(), &info_req, &info, [this](const grpc::Status& s) {
        if (!s.ok()) failed = true;
        ctx.reset();
        prepared->DecrementCount();
      });
      return;
    }
    --samples_left;
    stub->async()->SyncClock(NewContext(), &sync_req, &sync, [this](const grpc::Status& s) {
      if (!s.ok()) failed = true;
      NextSample();
    });
  }

  void StartCapture() {
    capture = std::make_unique<CaptureReader>(this);
    capture->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    capture->request.set_session_id("floor-session");
    capture->request.set_duration_ms(static_cast<uint64_t>(flags->window_ms));
    capture->request.set_session_key("floor-key");
    stub->async()->Capture(&capture->ctx, &capture->request, capture.get());
    capture->StartRead(&capture->chunk);
    capture->StartCall();
    if (!Full()) PartDone();
  }

  void AskStepSignal() {
    if (!Full()) return;
    step_ctx = std::make_unique<grpc::ClientContext>();
    step_ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    step_req.set_summary_only(true);
    stub->async()->GetStepSignal(step_ctx.get(), &step_req, &step, [this](const grpc::Status& s) {
      if (!s.ok()) failed = true;
      step_ctx.reset();
      PartDone();
    });
  }

  void PartDone() {
    if (finish_parts.fetch_sub(1) == 1) finished->DecrementCount();
  }
};

void CaptureReader::OnReadDone(bool ok) {
  if (!ok) return;
  if (chunk.has_data()) bytes += static_cast<int64_t>(chunk.data().size());
  StartRead(&chunk);
}

void CaptureReader::OnDone(const grpc::Status& s) {
  Host* host = host_;
  if (!s.ok() || bytes != host->flags->trace_bytes) host->failed = true;
  host->capture.reset();  // this reader, as profctl deletes its stream call at its end
  host->PartDone();
}

constexpr const char* kCallsNames[] = {"full", "info+stream", "stream"};

int RunClient(const Flags& f) {
  std::vector<Server> servers;
  std::vector<int> ports;
  while (static_cast<int>(ports.size()) < f.hosts) {
    servers.push_back(SpawnServer(f));
    for (int p : servers.back().ports) ports.push_back(p);
    if (servers.back().ports.empty()) {
      std::cerr << "grpc_floor_benchmark: a server process gave no ports\n";
      return 1;
    }
  }
  ports.resize(static_cast<size_t>(f.hosts));
  // The last run's connections, lingering in TIME_WAIT, make new ones cost more.
  const double waited_s = f.drain != 0 ? profctl::bench::AwaitTimeWaitDrained() : 0.0;

  // gRPC's own start (its threads, the callback API's completion queue, the code first run) is
  // once a process, not a host's cost: one call of each kind to the first server first.
  {
    std::unique_ptr<AgentService::Stub> warm = AgentService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", ports[0]), grpc::InsecureChannelCredentials()));
    absl::BlockingCounter done(2);
    grpc::ClientContext c1, c2;
    profctl::v1::GetInfoRequest info_req;
    profctl::v1::GetInfoResponse info;
    profctl::v1::SyncClockRequest sync_req;
    profctl::v1::SyncClockResponse sync;
    warm->async()->GetInfo(&c1, &info_req, &info,
                           [&](const grpc::Status&) { done.DecrementCount(); });
    warm->async()->SyncClock(&c2, &sync_req, &sync,
                             [&](const grpc::Status&) { done.DecrementCount(); });
    done.Wait();
  }
  const int64_t rss_before = profctl::bench::ProcStatusBytes("VmRSS:");
  const Cpu cpu0 = CpuNow();
  const auto wall0 = std::chrono::steady_clock::now();

  absl::BlockingCounter prepared(f.hosts);
  absl::BlockingCounter finished(f.hosts);
  std::vector<std::unique_ptr<Host>> hosts;
  hosts.reserve(static_cast<size_t>(f.hosts));
  for (int port : ports) {
    // The arguments profctl's GrpcAgentClient gives each agent's channel.
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(16 << 20);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_ENABLE_CHANNELZ, 0);
    for (const auto& [name, value] : f.channel_args) args.SetInt(name, value);
    auto h = std::make_unique<Host>();
    h->channel = grpc::CreateCustomChannel(
        absl::StrCat(f.scheme.empty() ? "" : f.scheme + ":", "127.0.0.1:", port),
        grpc::InsecureChannelCredentials(), args);
    h->stub = AgentService::NewStub(h->channel);
    h->flags = &f;
    h->prepared = &prepared;
    h->finished = &finished;
    hosts.push_back(std::move(h));
  }
  for (auto& h : hosts) h->Start();
  prepared.Wait();
  const auto prepared_at = std::chrono::steady_clock::now();
  for (auto& h : hosts) h->StartCapture();
  std::this_thread::sleep_for(std::chrono::milliseconds(f.window_ms));
  for (auto& h : hosts) h->AskStepSignal();
  finished.Wait();
  int failed = 0;
  for (auto& h : hosts) failed += h->failed ? 1 : 0;
  hosts.clear();  // the channels close here, as profctl closes them at the end
  const auto wall1 = std::chrono::steady_clock::now();
  // gRPC closes the transports on its own threads after that: their CPU counts too.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Cpu cpu1 = CpuNow();
  const double user = cpu1.user_s - cpu0.user_s, sys = cpu1.sys_s - cpu0.sys_s;
  const int64_t peak = profctl::bench::ProcStatusBytes("VmHWM:");

  for (Server& s : servers) {
    close(s.to_child);
    int status = 0;
    waitpid(s.pid, &status, 0);
  }
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::cout << absl::StrFormat(
      "floor hosts %d calls %s samples %d trace_bytes %d: wall-window %.0f ms (prepare %.0f, "
      "after the window %.0f), cpu/host %.3f ms (user %.3f, sys %.3f), peak rss above start "
      "%.1f KiB/host (%.1f MiB peak), failed %d, waited %.0f s for TIME_WAIT to drain\n",
      f.hosts, kCallsNames[static_cast<int>(f.calls)], f.samples, f.trace_bytes,
      ms(wall1 - wall0) - f.window_ms, ms(prepared_at - wall0),
      ms(wall1 - prepared_at) - f.window_ms, (user + sys) * 1000.0 / f.hosts,
      user * 1000.0 / f.hosts, sys * 1000.0 / f.hosts,
      static_cast<double>(peak - rss_before) / 1024.0 / f.hosts,
      static_cast<double>(peak) / (1024.0 * 1024.0), failed, waited_s);
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // The process set up as profctl's main sets it up (common/process_setup.h).
  profctl::LimitMallocArenas(2);
  profctl::DisableMutexDeadlockDetection();
  profctl::RaiseOpenFileLimit();
  profctl::ReturnLargeBuffersToTheSystem();
  const Flags f = ParseFlags(argc, argv);
  return f.serve ? Serve(f) : RunClient(f);
}
