// gRPC adapter for the agent: translates profctl.v1.AgentService calls to a CaptureManager.
// Uses the callback API: no handler blocks a gRPC thread. A capture runs as a CaptureManager
// session on the executors; a write reactor that owns its own lifetime streams it back:
// started (the moment recording begins), header, data chunks, trailer. Fetch streams a retained
// trace (TraceStore) with the same reactor, minus `started`.
//
// Keyed sessions (CaptureRequest.session_key) outlive their stream: when the caller goes away
// the session records on to the end of its window and its trace is retained for Fetch. A keyless
// session stops when its caller goes away (cancel_reason CLIENT_GONE) and is not retained.
// A stream whose write has not completed for stream_idle_timeout_ms (a client that stopped
// reading) is cancelled by the agent, so it cannot pin its trace's memory.
//
// One service can serve several endpoints (profctl-agent --endpoints=N, for tests and
// benchmarks): one grpc::Server listens on N ports and each call is routed to the endpoint whose
// port appears in the call's :authority ("host:port", which every gRPC client sends from its
// target). With a single endpoint every call goes to it, whatever the authority says.
#ifndef PROFCTL_AGENT_SERVICE_AGENT_SERVICE_H_
#define PROFCTL_AGENT_SERVICE_AGENT_SERVICE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_metrics.h"
#include "agent/auth.h"
#include "agent/capture_manager.h"
#include "agent/hang_detector.h"
#include "agent/trace_store.h"
#include "common/clock.h"
#include "common/executor.h"
#include "common/logging.h"
#include "profctl/v1/agent.grpc.pb.h"

namespace profctl::agent {

// One agent as seen from the network.
struct AgentEndpoint {
  CaptureManager* manager = nullptr;  // not owned; its executors must be set
  const Clock* clock = nullptr;       // not owned; SyncClock answers with its wall time
  std::string name;                   // GetInfo.name and the header's name; may be empty
  std::string hostname;               // the machine's
  // Checks every call's bearer token (agent/auth.h); null: none needed. Every endpoint of a
  // process has the same one. Not owned.
  const CallAuthenticator* authenticator = nullptr;
  // Retained traces and the trace-memory ledger, shared by every endpoint; not owned. Null:
  // nothing is retained (Fetch is NOT_FOUND) and no memory cap applies.
  TraceStore* store = nullptr;
  // Runs the stream idle timers (on its clock's monotonic time); not owned. Null: no idle
  // timeout.
  Executor* executor = nullptr;
  // Judges the step sources' stalls for GetStepSignal (agent/hang_detector.h); not owned. Null:
  // no stalls are reported.
  HangDetector* hang = nullptr;
};

// Routes each call to its endpoint (see the top of this file). Shared by every service the agent
// serves on its ports (AgentService, tensorflow.ProfilerService). Thread-safe.
class EndpointRouter {
 public:
  explicit EndpointRouter(std::vector<AgentEndpoint> endpoints);

  // With more than one endpoint: `ports[i]` is endpoint i's listening port. Call once, after the
  // server started (its ports are known only then) and before anyone learns the ports; calls that
  // arrive earlier fail with UNAVAILABLE. Ignored with a single endpoint.
  void SetPorts(const std::vector<int>& ports);

  // The endpoint a call is for. First of all, before anything else is looked at: the
  // authenticator's UNAUTHENTICATED or PERMISSION_DENIED for a call without the right bearer
  // token. Then NOT_FOUND when its :authority names no port of this process, UNAVAILABLE before
  // SetPorts.
  absl::StatusOr<const AgentEndpoint*> Route(const grpc::CallbackServerContext& ctx) const;

 private:
  const std::vector<AgentEndpoint> endpoints_;
  mutable absl::Mutex mu_;
  bool ports_set_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<int, size_t> endpoint_by_port_ ABSL_GUARDED_BY(mu_);
};

struct AgentServiceOptions {
  size_t chunk_bytes = 1 << 20;
  // A stream whose write has waited this long for the client is cancelled (needs
  // AgentEndpoint::executor).
  int64_t stream_idle_timeout_ms = 30'000;
  // Counts streams and bytes for /metrics; null: not counted. Outlives the service.
  AgentMetrics* metrics = nullptr;
};

class AgentServiceImpl final : public profctl::v1::AgentService::CallbackService {
 public:
  // Every endpoint's manager and clock outlive the service (and the server's Shutdown).
  explicit AgentServiceImpl(std::vector<AgentEndpoint> endpoints, AgentServiceOptions options = {});

  // See EndpointRouter::SetPorts.
  void SetPorts(const std::vector<int>& ports) { router_.SetPorts(ports); }

  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* ctx,
                                    const profctl::v1::GetInfoRequest* request,
                                    profctl::v1::GetInfoResponse* response) override;
  grpc::ServerUnaryReactor* SyncClock(grpc::CallbackServerContext* ctx,
                                      const profctl::v1::SyncClockRequest* request,
                                      profctl::v1::SyncClockResponse* response) override;
  grpc::ServerUnaryReactor* GetStepSignal(grpc::CallbackServerContext* ctx,
                                          const profctl::v1::GetStepSignalRequest* request,
                                          profctl::v1::GetStepSignalResponse* response) override;
  grpc::ServerWriteReactor<profctl::v1::CaptureChunk>* Capture(
      grpc::CallbackServerContext* ctx, const profctl::v1::CaptureRequest* request) override;
  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* ctx,
                                   const profctl::v1::CancelRequest* request,
                                   profctl::v1::CancelResponse* response) override;
  grpc::ServerWriteReactor<profctl::v1::CaptureChunk>* Fetch(
      grpc::CallbackServerContext* ctx, const profctl::v1::FetchRequest* request) override;

 private:
  EndpointRouter router_;
  const AgentServiceOptions options_;
  // GetInfo.instance_id per endpoint (by its manager): random per process start.
  absl::flat_hash_map<const CaptureManager*, std::string> instance_ids_;
};

// `status` as gRPC's; a message longer than 2 KiB is cut there (a last bound on what a request can
// make the agent send back: the places that quote client strings bound them already).
grpc::Status ToGrpcStatus(const absl::Status& status);

// The bound on log lines a peer can repeat at will (refused Capture, Fetch and TSL Profile calls,
// Cancels; common/logging.h): one per process, on the real clock, 10 lines of a kind per 10 s.
LogLimiter& RequestLogLimiter();
// `line` logged at info unless `kind` is over its bound (RequestLogLimiter); the line that is
// logged after some were left out says how many.
void LogRequest(absl::string_view kind, const std::string& line);

profctl::v1::CancelReason ToProto(CancelReason reason);

// A unary call's reactor that has finished with `status` at once.
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* ctx, const grpc::Status& status);

// The port of an :authority such as "host:6000", "[::1]:6000"; nullopt when it has none.
std::optional<int> AuthorityPort(absl::string_view authority);

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_SERVICE_AGENT_SERVICE_H_
