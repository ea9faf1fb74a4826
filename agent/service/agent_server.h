// profctl-agent's endpoints and their gRPC server, wired from AgentOptions: one endpoint in
// production, N (--endpoints=N) for tests and benchmarks that need hundreds of agents on a small
// machine.
//
// Every endpoint is a complete agent of its own: its own port, skewed clock, collectors,
// CaptureManager (capture slot, remembered cancelled ids) and name. They share what makes an agent
// expensive: one grpc::Server listening on all the ports (calls are routed by the port in their
// :authority, see agent_service.h), gRPC's threads, and the two executors on which every
// endpoint's capture sessions run as timer tasks (no thread per endpoint or per capture).
//
// Endpoint i of N > 1:
//   - port: --port + i, or a free port each with --port=0;
//   - name: "<--name>-<i>", or "ep-<i>" without --name (also its XSpace hostname);
//   - clock: the host's wall clock + --clock-skew-ms + EndpointSkewMs(i,
//   --endpoint-skew-spread-ms);
//   - synthetic job: the --synthetic knobs with rank = <rank> + i, and world raised to
//     <rank> + N when it is smaller (so the endpoints are the ranks of one job; a world larger
//     than that is kept, the other ranks being simulated but not served), clock_skew_ns = its
//     clock's skew.
// With N == 1 everything is as it always was: the endpoint is named --name (possibly empty), its
// skew is --clock-skew-ms (+ EndpointSkewMs(0, S) when a spread is given) and calls are never
// routed by authority.
#ifndef PROFCTL_AGENT_SERVICE_AGENT_SERVER_H_
#define PROFCTL_AGENT_SERVICE_AGENT_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/agent_options.h"
#include "agent/auth.h"
#include "agent/capture_manager.h"
#include "agent/collector_registry.h"
#include "agent/collectors/collector.h"
#include "agent/collectors/cupti/inject_server.h"
#include "agent/collectors/tsl/tsl_collector.h"
#include "agent/flight_recorder.h"
#include "agent/hang_detector.h"
#include "agent/service/agent_service.h"
#include "agent/service/tsl_profiler_service.h"
#include "agent/trace_store.h"
#include "common/clock.h"
#include "common/executor.h"
#include "synthetic/synthetic_job.h"

namespace profctl::agent {

// Endpoint i's extra skew in ms, a fixed function of i alone (adding endpoints never changes
// the others'): with z = SplitMix64(i) (the 64-bit finalizer of Steele et al., seed i),
// skew = (z mod (2S + 1)) - S, uniform over [-S, +S]. 0 when spread_ms is 0.
int64_t EndpointSkewMs(int64_t index, int64_t spread_ms);

// Plans every endpoint of `options` (as validated by ParseAgentOptions). INVALID_ARGUMENT names
// --synthetic for bad knobs and --endpoints when the ranks do not fit a synthetic job (world is
// at most 4096).
absl::StatusOr<std::vector<EndpointPlan>> PlanEndpoints(const AgentOptions& options);

// What a snapshot of a full ring costs the agent at its peak, in ring bytes: the ring itself, the
// trace collected from it (10.6x, measured: 8 synthetic GPUs x 256 kernels per 10 ms step,
// release build) and the agent's own ~25 MiB at the default size.
inline constexpr int64_t kRecorderSnapshotPeakMultiple = 13;

// The flight recorder's ring (all collectors together): --flight-recorder-mb, lowered to
// --max-held-mb / kRecorderSnapshotPeakMultiple when that is less, so that the agent's peak while
// it takes a snapshot of the whole ring stays under --max-held-mb (the default 64 MiB under the
// default 512: 39.4 MiB).
int64_t RecorderRingBytes(const AgentOptions& options);

class AgentServer {
 public:
  struct Dependencies {
    // The host's clock: every endpoint's clock is it plus a skew. Its MonoNs() must be the
    // executors' monotonic time.
    const Clock* clock = nullptr;
    // Every endpoint's session timeline (cheap tasks) and collect work; see CaptureManager.
    Executor* executor = nullptr;
    Executor* collect_executor = nullptr;  // null: `executor`
    std::string hostname;                  // the machine's
    // The cupti collector's socket server (agent/collectors/cupti/inject_server.h); needed when
    // the collectors include cupti (then --endpoints is 1).
    cupti::InjectServer* inject_server = nullptr;
    // Counts the agent's streams for /metrics; null: not counted.
    AgentMetrics* metrics = nullptr;
  };

  // Builds every endpoint and starts one gRPC server listening on all their ports, serving
  // profctl.v1.AgentService and tensorflow.ProfilerService there. The dependencies outlive the
  // server. INVALID_ARGUMENT for options PlanEndpoints rejects and for a --tsl-save-root that is
  // not an existing directory or --tls-*/--token-file files LoadServerSecurity rejects
  // (agent/auth.h), UNAVAILABLE when a port cannot be listened on (in use, or not a
  // local address).
  static absl::StatusOr<std::unique_ptr<AgentServer>> Start(const AgentOptions& options,
                                                            const Dependencies& deps);
  ~AgentServer();
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  // Endpoint i listens on ports()[i].
  const std::vector<int>& ports() const { return ports_; }
  size_t endpoint_count() const { return endpoints_.size(); }
  const std::string& endpoint_name(size_t i) const { return endpoints_[i]->name; }
  CaptureManager& manager_for_testing(size_t i) { return *endpoints_[i]->manager; }
  TraceStore& store_for_testing() { return *store_; }
  // Null without --flight-recorder.
  const FlightRecorder* flight_recorder() const { return recorder_.get(); }

  // Stops every running capture (each still streams back what it recorded), then shuts the
  // server down, cancelling calls still in flight after `grace`. Returns once every call has
  // ended. Idempotent; the destructor calls it with no grace.
  void Shutdown(absl::Duration grace);

 private:
  struct Endpoint {
    Endpoint(const Clock* base, int64_t skew_ns) : clock(base, skew_ns) {}
    std::string name;
    SkewedClock clock;
    std::vector<std::unique_ptr<Collector>> collectors;
    std::unique_ptr<CaptureManager> manager;
    std::unique_ptr<HangDetector> hang;
  };

  AgentServer() = default;

  // Destroyed in reverse: the server first, then what its calls use.
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::unique_ptr<TraceStore> store_;         // retained traces of every endpoint
  std::shared_ptr<FlightRecorder> recorder_;  // stopped in Shutdown, before the endpoints go
  std::shared_ptr<const CallAuthenticator> authenticator_;  // null: no token needed
  std::unique_ptr<AgentServiceImpl> service_;
  std::unique_ptr<TslProfilerServiceImpl> tsl_service_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<int> ports_;
  bool shut_down_ = false;
  AgentMetrics* metrics_ = nullptr;  // whose step status reads endpoints_; unhooked first
};

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_SERVICE_AGENT_SERVER_H_
