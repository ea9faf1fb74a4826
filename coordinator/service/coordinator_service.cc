#include "coordinator/service/coordinator_service.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "coordinator/service/session_index.h"
#include "coordinator/session/session_writer.h"

namespace profctl::coordinator::service {
namespace {

constexpr uint32_t kDefaultListLimit = 100;
constexpr absl::Duration kWatchPoll = absl::Milliseconds(200);

grpc::Status ToGrpc(const absl::Status& s) {
  return {static_cast<grpc::StatusCode>(s.code()), std::string(s.message())};
}

}  // namespace

CoordinatorServiceImpl::CoordinatorServiceImpl(
    Daemon* daemon, std::shared_ptr<const CallAuthenticator> authenticator, int max_watch_streams)
    : daemon_(daemon),
      authenticator_(std::move(authenticator)),
      max_watch_streams_(max_watch_streams) {}

grpc::Status CoordinatorServiceImpl::Authenticate(const grpc::ServerContext& ctx) const {
  if (authenticator_ == nullptr) return grpc::Status::OK;
  return ToGrpc(authenticator_->Check(ctx));
}

grpc::Status CoordinatorServiceImpl::StartCapture(grpc::ServerContext* ctx,
                                                  const v1::StartCaptureRequest* request,
                                                  v1::StartCaptureResponse* response) {
  if (grpc::Status s = Authenticate(*ctx); !s.ok()) return s;
  absl::StatusOr<CapturePlan> plan = PlanFromRequest(*request);
  if (!plan.ok()) return ToGrpc(plan.status());
  // An empty session name: the daemon names it, as profctl capture does.
  const bool generated = plan->session.empty();
  if (generated) plan->session = DefaultSessionName(daemon_->clock(), "");
  v1::SessionOrigin origin;
  origin.set_kind("api");
  absl::StatusOr<v1::StartCaptureResponse> started = daemon_->runner().Start(
      *std::move(plan), {.make_unique = generated, .origin = origin, .on_finished = nullptr});
  if (!started.ok()) return ToGrpc(started.status());
  *response = *std::move(started);
  return grpc::Status::OK;
}

grpc::Status CoordinatorServiceImpl::GetSession(grpc::ServerContext* ctx,
                                                const v1::GetSessionRequest* request,
                                                v1::SessionInfo* response) {
  if (grpc::Status s = Authenticate(*ctx); !s.ok()) return s;
  std::optional<v1::SessionInfo> running = daemon_->runner().Running(request->session());
  absl::StatusOr<v1::SessionInfo> on_disk = ReadSession(daemon_->logdir(), request->session());
  if (running.has_value()) {
    *response = *std::move(running);
    // The manifest as last flushed (RUNNING), when it has been written yet.
    if (on_disk.ok()) *response->mutable_manifest() = on_disk->manifest();
    return grpc::Status::OK;
  }
  if (!on_disk.ok()) return ToGrpc(on_disk.status());
  *response = *std::move(on_disk);
  return grpc::Status::OK;
}

grpc::Status CoordinatorServiceImpl::ListSessions(grpc::ServerContext* ctx,
                                                  const v1::ListSessionsRequest* request,
                                                  v1::ListSessionsResponse* response) {
  if (grpc::Status s = Authenticate(*ctx); !s.ok()) return s;
  SessionListing listing =
      service::ListSessions(daemon_->logdir(), request->schedule(),
                            request->limit() == 0 ? kDefaultListLimit : request->limit());
  for (v1::SessionInfo& info : listing.sessions) {
    info.set_running(daemon_->runner().Running(info.session()).has_value());
    *response->add_sessions() = std::move(info);
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorServiceImpl::ListSchedules(grpc::ServerContext* ctx,
                                                   const v1::ListSchedulesRequest* /*request*/,
                                                   v1::ListSchedulesResponse* response) {
  if (grpc::Status s = Authenticate(*ctx); !s.ok()) return s;
  auto result = std::make_shared<v1::ListSchedulesResponse>();
  auto done = std::make_shared<absl::Notification>();
  daemon_->Schedules([result, done](v1::ListSchedulesResponse r) {
    *result = std::move(r);
    done->Notify();
  });
  if (!done->WaitForNotificationWithTimeout(absl::Seconds(10))) {
    return {grpc::StatusCode::DEADLINE_EXCEEDED, "the scheduler did not answer in 10 s"};
  }
  *response = *result;
  return grpc::Status::OK;
}

grpc::Status CoordinatorServiceImpl::WatchSessions(grpc::ServerContext* ctx,
                                                   const v1::WatchSessionsRequest* request,
                                                   grpc::ServerWriter<v1::SessionEvent>* writer) {
  if (grpc::Status s = Authenticate(*ctx); !s.ok()) return s;
  if (watch_streams_.fetch_add(1) >= max_watch_streams_) {
    watch_streams_.fetch_sub(1);
    return {grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat(max_watch_streams_,
                         " WatchSessions streams are open, the most this coordinator serves at "
                         "once; close one or try again later")};
  }
  const std::string& session = request->session();
  SessionRunner& runner = daemon_->runner();
  std::shared_ptr<EventQueue> queue = runner.Watch(session);
  struct Unwatch {
    SessionRunner* runner;
    std::shared_ptr<EventQueue> queue;
    std::atomic<int>* streams;
    ~Unwatch() {
      runner->Unwatch(queue);
      streams->fetch_sub(1);
    }
  } unwatch{&runner, queue, &watch_streams_};
  writer->SendInitialMetadata();
  if (!session.empty() && !runner.Running(session).has_value()) {
    // Not running: finished already (its FINISHED event may also be queued: either ends the
    // stream), or unknown.
    absl::StatusOr<v1::SessionInfo> info = ReadSession(daemon_->logdir(), session);
    if (!info.ok()) return ToGrpc(info.status());
    if (info->manifest().status() != v1::SESSION_STATUS_RUNNING) {
      v1::SessionEvent event;
      event.set_kind(v1::SESSION_EVENT_KIND_FINISHED);
      event.set_session(session);
      event.set_wall_ns(info->manifest().finished_ns());
      event.set_message(OutcomeLine(info->manifest()));
      *event.mutable_manifest() = info->manifest();
      *event.mutable_origin() = info->origin();
      writer->Write(event);
      return grpc::Status::OK;
    }
  }
  v1::SessionEvent event;
  while (!ctx->IsCancelled()) {
    if (!queue->Next(&event, kWatchPoll)) {
      if (queue->closed()) break;
      continue;
    }
    if (!writer->Write(event)) break;
    if (!session.empty() && event.kind() == v1::SESSION_EVENT_KIND_FINISHED) break;
  }
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    Daemon* daemon, const std::string& bind, int port, const ServerSecurity& security,
    int max_watch_streams) {
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer());
  server->service_ =
      std::make_unique<CoordinatorServiceImpl>(daemon, security.authenticator, max_watch_streams);
  grpc::ServerBuilder builder;
  const std::string address =
      absl::StrCat(absl::StrContains(bind, ':') ? absl::StrCat("[", bind, "]") : bind, ":", port);
  builder.AddListeningPort(address, security.credentials, &server->port_);
  builder.RegisterService(server->service_.get());
  // Each call (a watch stream lasts as long as its session) holds a thread: bound them, so a
  // flood of calls is refused (RESOURCE_EXHAUSTED) instead of exhausting the daemon; watch
  // streams are capped lower (max_watch_streams), so they leave threads for the other calls.
  grpc::ResourceQuota quota("profctl-coordinator");
  quota.SetMaxThreads(kMaxServerThreads);
  builder.SetResourceQuota(quota);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  return server;
}

CoordinatorServer::~CoordinatorServer() { Shutdown(absl::ZeroDuration()); }

void CoordinatorServer::Shutdown(absl::Duration grace) {
  if (server_ == nullptr) return;
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
  server_.reset();
}

}  // namespace profctl::coordinator::service
