// gRPC adapter for the agent: translates profctl.v1.AgentService calls to a CaptureManager.
// Uses the callback API: no handler blocks a gRPC thread. A capture runs as a CaptureManager
// session on the executors; a write reactor that owns its own lifetime streams it back:
// started (the moment recording begins), header, data chunks, trailer.
//
// One service can serve several endpoints (profctl-agent --endpoints=N, for tests and
// benchmarks): one grpc::Server listens on N ports and each call is routed to the endpoint whose
// port appears in the call's :authority ("host:port", which every gRPC client sends from its
// target). With a single endpoint every call goes to it, whatever the authority says.
#ifndef PROFCTL_AGENT_AGENT_SERVICE_H_
#define PROFCTL_AGENT_AGENT_SERVICE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "agent/capture_manager.h"
#include "common/clock.h"
#include "profctl/v1/agent.grpc.pb.h"

namespace profctl::agent {

// One agent as seen from the network.
struct AgentEndpoint {
  CaptureManager* manager = nullptr;  // not owned; its executors must be set
  const Clock* clock = nullptr;       // not owned; SyncClock answers with its wall time
  std::string name;                   // GetInfo.name and the header's name; may be empty
  std::string hostname;               // the machine's
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

  // The endpoint a call is for. NOT_FOUND when its :authority names no port of this process,
  // UNAVAILABLE before SetPorts.
  absl::StatusOr<const AgentEndpoint*> Route(const grpc::CallbackServerContext& ctx) const;

 private:
  const std::vector<AgentEndpoint> endpoints_;
  mutable absl::Mutex mu_;
  bool ports_set_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<int, size_t> endpoint_by_port_ ABSL_GUARDED_BY(mu_);
};

struct AgentServiceOptions {
  size_t chunk_bytes = 1 << 20;
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
  grpc::ServerWriteReactor<profctl::v1::CaptureChunk>* Capture(
      grpc::CallbackServerContext* ctx, const profctl::v1::CaptureRequest* request) override;
  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* ctx,
                                   const profctl::v1::CancelRequest* request,
                                   profctl::v1::CancelResponse* response) override;

 private:
  EndpointRouter router_;
  const AgentServiceOptions options_;
  // GetInfo.instance_id per endpoint (by its manager): random per process start.
  absl::flat_hash_map<const CaptureManager*, std::string> instance_ids_;
};

grpc::Status ToGrpcStatus(const absl::Status& status);

// A unary call's reactor that has finished with `status` at once.
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* ctx, const grpc::Status& status);

// The port of an :authority such as "host:6000", "[::1]:6000"; nullopt when it has none.
std::optional<int> AuthorityPort(absl::string_view authority);

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_AGENT_SERVICE_H_
