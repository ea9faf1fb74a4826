// AgentClient over gRPC (profctl.v1.AgentService).
#ifndef PROFCTL_COORDINATOR_GRPC_AGENT_CLIENT_H_
#define PROFCTL_COORDINATOR_GRPC_AGENT_CLIENT_H_

#include <cstdint>
#include <memory>

#include "coordinator/agent_client.h"

namespace profctl::coordinator {

struct GrpcAgentClientOptions {
  // A trace larger than this is refused (protects the coordinator from a peer that lies).
  uint64_t max_trace_bytes = uint64_t{2} << 30;
};

class GrpcAgentClientFactory final : public AgentClientFactory {
 public:
  explicit GrpcAgentClientFactory(GrpcAgentClientOptions options = {}) : options_(options) {}
  std::unique_ptr<AgentClient> Connect(const WorkerAddress& worker) override;

 private:
  GrpcAgentClientOptions options_;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_GRPC_AGENT_CLIENT_H_
