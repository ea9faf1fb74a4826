// gRPC adapter for the agent: translates profctl.v1.AgentService calls to the CaptureManager.
// Uses the callback API: no handler blocks a gRPC thread. A capture runs on the executor; its
// result is streamed back in chunks by a write reactor that owns its own lifetime.
#ifndef PROFCTL_AGENT_AGENT_SERVICE_H_
#define PROFCTL_AGENT_AGENT_SERVICE_H_

#include <cstddef>
#include <string>

#include "agent/capture_manager.h"
#include "boost/asio/thread_pool.hpp"
#include "common/clock.h"
#include "profctl/v1/agent.grpc.pb.h"

namespace profctl::agent {

struct AgentServiceOptions {
  std::string name;      // --name, may be empty
  std::string hostname;  // the machine's
  size_t chunk_bytes = 1 << 20;
};

class AgentServiceImpl final : public profctl::v1::AgentService::CallbackService {
 public:
  // None owned; all outlive the service (and the server's Shutdown).
  AgentServiceImpl(CaptureManager* manager, const Clock* clock, boost::asio::thread_pool* executor,
                   AgentServiceOptions options);

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
  CaptureManager* manager_;
  const Clock* clock_;
  boost::asio::thread_pool* executor_;
  const AgentServiceOptions options_;
};

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_AGENT_SERVICE_H_
