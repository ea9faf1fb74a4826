// profctl.v1.CoordinatorService over a Daemon, and the gRPC server that serves it
// (`profctl serve`). Handlers only convert between protos and the daemon; every call is
// authenticated first when the server has a token (common/net/server_auth.h).
#ifndef PROFCTL_COORDINATOR_SERVICE_COORDINATOR_SERVICE_H_
#define PROFCTL_COORDINATOR_SERVICE_COORDINATOR_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/net/server_auth.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/plan/capture_plan.h"
#include "coordinator/service/daemon.h"
#include "profctl/v1/coordinator.grpc.pb.h"

namespace profctl::coordinator::service {

// The server's threads: each call holds one while it runs, a watch stream as long as it is open.
inline constexpr int kMaxServerThreads = 64;
// At most this many WatchSessions streams at once: the next is refused with RESOURCE_EXHAUSTED,
// so idle watchers cannot take the threads that ListSessions, StartCapture and the rest need.
inline constexpr int kMaxWatchStreams = kMaxServerThreads / 2;

class CoordinatorServiceImpl final : public v1::CoordinatorService::Service {
 public:
  // `authenticator`: null when calls need no token. The daemon outlives the service.
  CoordinatorServiceImpl(Daemon* daemon, std::shared_ptr<const CallAuthenticator> authenticator,
                         int max_watch_streams = kMaxWatchStreams);

  grpc::Status StartCapture(grpc::ServerContext* ctx, const v1::StartCaptureRequest* request,
                            v1::StartCaptureResponse* response) override;
  grpc::Status GetSession(grpc::ServerContext* ctx, const v1::GetSessionRequest* request,
                          v1::SessionInfo* response) override;
  grpc::Status ListSessions(grpc::ServerContext* ctx, const v1::ListSessionsRequest* request,
                            v1::ListSessionsResponse* response) override;
  grpc::Status ListSchedules(grpc::ServerContext* ctx, const v1::ListSchedulesRequest* request,
                             v1::ListSchedulesResponse* response) override;
  // RESOURCE_EXHAUSTED when max_watch_streams are open. Once the watch is registered the
  // stream's initial metadata is sent, before any event.
  grpc::Status WatchSessions(grpc::ServerContext* ctx, const v1::WatchSessionsRequest* request,
                             grpc::ServerWriter<v1::SessionEvent>* writer) override;

 private:
  grpc::Status Authenticate(const grpc::ServerContext& ctx) const;
  Daemon* daemon_;
  std::shared_ptr<const CallAuthenticator> authenticator_;
  const int max_watch_streams_;
  std::atomic<int> watch_streams_{0};
};

// The daemon's gRPC server on bind:port (port 0: a free one).
class CoordinatorServer {
 public:
  // UNAVAILABLE when the port cannot be listened on.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      Daemon* daemon, const std::string& bind, int port, const ServerSecurity& security,
      int max_watch_streams = kMaxWatchStreams);
  ~CoordinatorServer();
  int port() const { return port_; }
  // Ends watch streams (the daemon's runner must be shut down first, so they end by themselves)
  // and stops serving; calls still running after `grace` are cancelled.
  void Shutdown(absl::Duration grace);

 private:
  CoordinatorServer() = default;
  std::unique_ptr<CoordinatorServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace profctl::coordinator::service

#endif  // PROFCTL_COORDINATOR_SERVICE_COORDINATOR_SERVICE_H_
