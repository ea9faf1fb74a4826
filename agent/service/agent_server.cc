#include "agent/service/agent_server.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/collectors/cupti/cupti_collector.h"
#include "agent/collectors/cupti/inject_server.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace profctl::agent {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string ListenAddress(const std::string& bind, int64_t port) {
  const bool ipv6 = absl::StrContains(bind, ':') && bind.front() != '[';
  return absl::StrCat(ipv6 ? "[" : "", bind, ipv6 ? "]" : "", ":", port);
}

}  // namespace

int64_t EndpointSkewMs(int64_t index, int64_t spread_ms) {
  if (spread_ms <= 0) return 0;
  const uint64_t width = 2 * static_cast<uint64_t>(spread_ms) + 1;
  return static_cast<int64_t>(SplitMix64(static_cast<uint64_t>(index)) % width) - spread_ms;
}

absl::StatusOr<std::vector<EndpointPlan>> PlanEndpoints(const AgentOptions& options) {
  const int64_t n = options.endpoints;
  const bool synthetic = UsesCollector(options, kSyntheticCollector);
  synthetic::SyntheticJobConfig job;
  if (synthetic) {
    absl::StatusOr<synthetic::SyntheticJobConfig> parsed =
        synthetic::ParseSyntheticJobConfig(options.synthetic);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--synthetic: ", parsed.status().message()));
    }
    job = *parsed;
    if (n > 1) {
      constexpr int64_t kMaxWorld = 4096;  // synthetic::ValidateSyntheticJobConfig's limit
      if (job.rank + n > kMaxWorld) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--endpoints=", n, " with synthetic rank ", job.rank, " needs ranks up to ",
            job.rank + n - 1, "; a synthetic job has at most ", kMaxWorld, " ranks"));
      }
      job.world = std::max(job.world, job.rank + n);
    }
  }
  std::vector<EndpointPlan> plans;
  plans.reserve(static_cast<size_t>(n));
  const auto memo = synthetic ? std::make_shared<synthetic::SyntheticStepMemo>(job) : nullptr;
  for (int64_t i = 0; i < n; ++i) {
    EndpointPlan plan;
    if (n == 1) {
      plan.name = options.name;
    } else {
      plan.name =
          options.name.empty() ? absl::StrCat("ep-", i) : absl::StrCat(options.name, "-", i);
    }
    plan.clock_skew_ns =
        (options.clock_skew_ms + EndpointSkewMs(i, options.endpoint_skew_spread_ms)) *
        kNanosPerMilli;
    plan.synthetic = job;
    plan.synthetic.rank = job.rank + i;
    plan.synthetic.clock_skew_ns = plan.clock_skew_ns;
    plan.synthetic_memo = memo;
    plan.recorder_launches = options.flight_recorder_launches;
    plan.tsl.servers = options.tsl_local;
    plan.tsl.grace_ms = options.tsl_grace_ms;
    // The framework servers read the host's real clock; this endpoint's is skewed from it.
    plan.tsl.clock_skew_ns = plan.clock_skew_ns;
    if (synthetic) {
      if (absl::Status s = synthetic::ValidateSyntheticJobConfig(plan.synthetic); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--synthetic (endpoint ", i, "): ", s.message()));
      }
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

int64_t RecorderRingBytes(const AgentOptions& options) {
  return std::max<int64_t>(1,
                           std::min(options.flight_recorder_mb << 20,
                                    (options.max_held_mb << 20) / kRecorderSnapshotPeakMultiple));
}

absl::StatusOr<std::unique_ptr<AgentServer>> AgentServer::Start(const AgentOptions& options,
                                                                const Dependencies& deps) {
  PROFCTL_ASSIGN_OR_RETURN(const std::vector<EndpointPlan> plans, PlanEndpoints(options));
  PROFCTL_ASSIGN_OR_RETURN(const ServerSecurity security, LoadServerSecurity(options));
  TslServiceOptions tsl_options;
  if (!options.tsl_save_root.empty()) {
    PROFCTL_ASSIGN_OR_RETURN(tsl_options.save_root, CanonicalSaveRoot(options.tsl_save_root));
  }
  auto server = std::unique_ptr<AgentServer>(new AgentServer());
  // One store for every endpoint: the memory caps are the host's.
  server->store_ =
      std::make_unique<TraceStore>(TraceStore::Dependencies{deps.clock, deps.executor},
                                   TraceStoreOptions{.retain_ms = options.retain_ms,
                                                     .retain_bytes = options.retain_mb << 20,
                                                     .max_held_bytes = options.max_held_mb << 20});
  server->authenticator_ = security.authenticator;
  std::vector<AgentEndpoint> service_endpoints;
  for (const EndpointPlan& plan : plans) {
    auto ep = std::make_unique<Endpoint>(deps.clock, plan.clock_skew_ns);
    ep->name = plan.name;
    std::vector<Collector*> collector_ptrs;
    for (const std::string& name : options.collectors) {
      absl::StatusOr<std::unique_ptr<Collector>> collector =
          MakeCollector(name, plan, &ep->clock, CollectorEnv{deps.hostname, deps.inject_server});
      if (!collector.ok()) return collector.status();
      ep->collectors.push_back(*std::move(collector));
      collector_ptrs.push_back(ep->collectors.back().get());
    }
    ep->manager = std::make_unique<CaptureManager>(
        CaptureManager::Dependencies{&ep->clock, std::move(collector_ptrs), deps.executor,
                                     deps.collect_executor},
        CaptureManagerOptions{.max_duration_ms = options.max_duration_ms,
                              .host_name = plan.name.empty() ? deps.hostname : plan.name,
                              .max_trace_events = options.max_trace_events,
                              .max_trace_bytes = options.max_trace_mb << 20});
    ep->hang = std::make_unique<HangDetector>(static_cast<double>(options.hang_factor));
    service_endpoints.push_back(
        {ep->manager.get(), &ep->clock, plan.name, deps.hostname, server->authenticator_.get()});
    service_endpoints.back().hang = ep->hang.get();
    service_endpoints.back().store = server->store_.get();
    service_endpoints.back().executor = deps.executor;
    server->endpoints_.push_back(std::move(ep));
  }
  if (options.flight_recorder_s > 0) {
    std::vector<FlightRecorder::Target> targets;
    for (const auto& ep : server->endpoints_) {
      for (const auto& c : ep->collectors) targets.push_back({&ep->clock, c.get()});
    }
    // A snapshot of the whole ring peaks the agent at about kRecorderSnapshotPeakMultiple times
    // its bytes: the ring is kept small enough for that to stay under --max-held-mb.
    const int64_t ring_bytes = RecorderRingBytes(options);
    PROFCTL_ASSIGN_OR_RETURN(server->recorder_,
                             FlightRecorder::Start(targets, deps.executor,
                                                   {.keep_ms = options.flight_recorder_s * 1000,
                                                    .max_bytes = ring_bytes}));
    spdlog::info(
        "flight recorder: the last {} s of {} in at most {:.1f} MiB{}{}", options.flight_recorder_s,
        server->recorder_->recording().empty() ? std::string("nothing")
                                               : absl::StrJoin(server->recorder_->recording(), ","),
        static_cast<double>(ring_bytes) / (1 << 20),
        ring_bytes < (options.flight_recorder_mb << 20)
            ? absl::StrCat(" (--flight-recorder-mb=", options.flight_recorder_mb,
                           " lowered: a snapshot of it peaks the agent at about ",
                           kRecorderSnapshotPeakMultiple, " times its bytes, which --max-held-mb=",
                           options.max_held_mb, " bounds)")
            : std::string(),
        server->recorder_->not_recording().empty()
            ? ""
            : absl::StrCat(
                  "; keeping no past: ", absl::StrJoin(server->recorder_->not_recording(), ","),
                  " (docs/flight-recorder.md)"));
  }
  if (deps.metrics != nullptr) {
    // /metrics polls every endpoint's detector; ~AgentServer unhooks it before the endpoints go.
    deps.metrics->SetStepStatus([srv = server.get()] {
      std::vector<StepSourceMetric> out;
      for (const auto& ep : srv->endpoints_) {
        for (StepSourceStatus& st : ep->hang->Poll(*ep->manager, ep->clock.WallNs())) {
          out.push_back(
              {.agent = srv->endpoints_.size() > 1 ? ep->name : "", .status = std::move(st)});
        }
      }
      return out;
    });
    server->metrics_ = deps.metrics;
  }
  server->tsl_service_ =
      std::make_unique<TslProfilerServiceImpl>(service_endpoints, std::move(tsl_options));
  server->service_ = std::make_unique<AgentServiceImpl>(
      std::move(service_endpoints),
      AgentServiceOptions{.stream_idle_timeout_ms = options.stream_idle_timeout_ms,
                          .metrics = deps.metrics});

  const size_t n = plans.size();
  std::vector<int> selected(n, 0);
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a taken port must fail loudly
  for (size_t i = 0; i < n; ++i) {
    const int64_t port = options.port == 0 ? 0 : options.port + static_cast<int64_t>(i);
    builder.AddListeningPort(ListenAddress(options.bind, port), security.credentials, &selected[i]);
  }
  builder.RegisterService(server->service_.get());
  builder.RegisterService(server->tsl_service_.get());
  server->server_ = builder.BuildAndStart();
  const std::string where =
      n == 1 ? ListenAddress(options.bind, options.port)
             : absl::StrCat(ListenAddress(options.bind, options.port), " and ", n - 1,
                            options.port == 0 ? " more free ports" : " following ports");
  if (server->server_ == nullptr ||
      std::any_of(selected.begin(), selected.end(), [](int p) { return p == 0; })) {
    if (server->server_ != nullptr) server->server_->Shutdown();
    server->shut_down_ = true;
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", where, " (address in use or not local?)"));
  }
  server->ports_ = selected;
  server->service_->SetPorts(selected);
  server->tsl_service_->SetPorts(selected);
  return server;
}

AgentServer::~AgentServer() {
  if (metrics_ != nullptr) metrics_->SetStepStatus(nullptr);
  Shutdown(absl::ZeroDuration());
}

void AgentServer::Shutdown(absl::Duration grace) {
  if (recorder_ != nullptr) recorder_->Stop();
  if (shut_down_) return;
  shut_down_ = true;
  for (const auto& ep : endpoints_) ep->manager->CancelActive();
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(grace));
}

}  // namespace profctl::agent
