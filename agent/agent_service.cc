#include "agent/agent_service.h"

#include <algorithm>
#include <memory>
#include <random>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/gzip.h"
#include "common/version.h"
#include "spdlog/spdlog.h"

namespace profctl::agent {
namespace {

using profctl::v1::CaptureChunk;

// Streams one capture: started (when recording begins), header, data chunks, trailer.
//
// Lifetime: created by Capture(), deleted in OnDone(), which gRPC calls only after Finish().
// Finish() is called exactly once: at once for a rejected request, else only after the session's
// on_done ran (the session's callbacks point at this reactor, so it must outlive them), when the
// last message was written or the client went away.
//
// Writes: gRPC allows one outstanding write per stream. Messages become ready on three threads
// (on_started on the session timeline, on_done on the collect executor, OnWriteDone on a gRPC
// thread); each of them calls Pump(), which under mu_ picks the next message in stream order
// only when no write is in flight, and issues StartWrite()/Finish() after releasing mu_ (gRPC
// may run OnDone(), deleting this, as soon as Finish() is called).
class CaptureReactor final : public grpc::ServerWriteReactor<CaptureChunk> {
 public:
  CaptureReactor(const AgentEndpoint& endpoint, const profctl::v1::CaptureRequest& request,
                 size_t chunk_bytes)
      : endpoint_(endpoint), chunk_bytes_(chunk_bytes) {
    CaptureSpec spec{request.session_id(),
                     request.start_at_ns(),
                     static_cast<int64_t>(std::min<uint64_t>(request.duration_ms(), INT64_MAX)),
                     {request.collectors().begin(), request.collectors().end()}};
    absl::StatusOr<std::unique_ptr<CaptureManager::Session>> session =
        endpoint.manager->Begin(std::move(spec));
    if (!session.ok()) {
      spdlog::info("{}capture '{}' rejected: {}", LogPrefix(), request.session_id(),
                   session.status().ToString());
      {
        absl::MutexLock lock(&mu_);
        finished_ = true;
      }
      Finish(ToGrpcStatus(session.status()));
      return;
    }
    spdlog::info("{}capture '{}' accepted: start_at={} duration={} ms", LogPrefix(),
                 request.session_id(), request.start_at_ns(), request.duration_ms());
    CaptureManager::Session* s = session->get();
    {
      absl::MutexLock lock(&mu_);
      session_ = std::move(*session);
    }
    // Messages written before gRPC has bound the reactor are held back by gRPC until it has.
    s->Run({.on_started = [this](int64_t start_ns) { OnStarted(start_ns); },
            .on_done = [this](CaptureResult result) { OnCaptureDone(std::move(result)); }});
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      write_in_flight_ = false;
      if (!ok) ClientGone();
    }
    Pump();
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      ClientGone();
    }
    Pump();
  }

  void OnDone() override { delete this; }

 private:
  std::string LogPrefix() const {
    return endpoint_.name.empty() ? std::string() : absl::StrCat(endpoint_.name, ": ");
  }

  // The capture goes on only for a client that listens.
  void ClientGone() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    client_gone_ = true;
    if (session_ != nullptr) session_->Stop();
  }

  // Session timeline: must not block.
  void OnStarted(int64_t start_ns) {
    {
      absl::MutexLock lock(&mu_);
      started_ns_ = start_ns;
    }
    Pump();
  }

  // Collect executor.
  void OnCaptureDone(CaptureResult result) {
    bool client_gone;
    {
      absl::MutexLock lock(&mu_);
      client_gone = client_gone_;
    }
    std::string data;
    if (!client_gone) {
      data = result.space.SerializeAsString();
      spdlog::info("{}capture '{}' done: {} bytes{}", LogPrefix(), result.session_id, data.size(),
                   result.cancelled ? " (cancelled early)" : "");
    }
    {
      absl::MutexLock lock(&mu_);
      data_ = std::move(data);
      header_.set_session_id(result.session_id);
      header_.set_start_ns(result.start_ns);
      header_.set_stop_ns(result.stop_ns);
      header_.set_total_bytes(data_.size());
      header_.set_cancelled(result.cancelled);
      header_.set_name(endpoint_.name);
      header_.set_hostname(endpoint_.hostname);
      crc32_ = Crc32(0, data_);
      done_ = true;
    }
    Pump();
  }

  // Issues the next write, or Finish, when that is due; see the class comment.
  void Pump() {
    enum class Action { kNothing, kWrite, kFinish } action = Action::kNothing;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (write_in_flight_ || finished_) return;
      chunk_.Clear();
      if (client_gone_) {
        if (!done_) return;  // OnCaptureDone pumps again
        finished_ = true;
        action = Action::kFinish;
        status = grpc::Status(grpc::StatusCode::CANCELLED, "capture cancelled by the client");
      } else if (started_ns_.has_value()) {
        chunk_.mutable_started()->set_start_ns(*started_ns_);
        started_ns_.reset();
        action = Action::kWrite;
      } else if (!done_) {
        return;
      } else if (!header_sent_) {
        *chunk_.mutable_header() = header_;
        header_sent_ = true;
        action = Action::kWrite;
      } else if (offset_ < data_.size()) {
        const size_t n = std::min(chunk_bytes_, data_.size() - offset_);
        chunk_.set_data(data_.substr(offset_, n));
        offset_ += n;
        ++chunks_;
        action = Action::kWrite;
      } else if (!trailer_sent_) {
        chunk_.mutable_trailer()->set_chunks(chunks_);
        chunk_.mutable_trailer()->set_crc32(crc32_);
        trailer_sent_ = true;
        action = Action::kWrite;
      } else {
        finished_ = true;
        action = Action::kFinish;
        status = grpc::Status::OK;
      }
      if (action == Action::kWrite) write_in_flight_ = true;
    }
    // chunk_ is not touched again until OnWriteDone clears write_in_flight_.
    if (action == Action::kWrite) {
      StartWrite(&chunk_);
    } else if (action == Action::kFinish) {
      Finish(status);
    }
  }

  const AgentEndpoint& endpoint_;
  const size_t chunk_bytes_;
  absl::Mutex mu_;
  // Kept until the reactor goes: Stop() on an ended session is harmless.
  std::unique_ptr<CaptureManager::Session> session_ ABSL_GUARDED_BY(mu_);
  std::optional<int64_t> started_ns_ ABSL_GUARDED_BY(mu_);  // a started message to send
  bool done_ ABSL_GUARDED_BY(mu_) = false;                  // on_done ran: header_, data_ set
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool header_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool trailer_sent_ ABSL_GUARDED_BY(mu_) = false;
  profctl::v1::CaptureHeader header_ ABSL_GUARDED_BY(mu_);
  std::string data_ ABSL_GUARDED_BY(mu_);
  size_t offset_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t chunks_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t crc32_ ABSL_GUARDED_BY(mu_) = 0;  // of data_, for the trailer
  // The message being written; owned by the write in flight while write_in_flight_.
  CaptureChunk chunk_;
};

// Answers a Capture that cannot be routed to an endpoint.
class FailedCaptureReactor final : public grpc::ServerWriteReactor<CaptureChunk> {
 public:
  explicit FailedCaptureReactor(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* ctx,
                                      const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

std::optional<int> AuthorityPort(absl::string_view authority) {
  const size_t colon = authority.rfind(':');
  if (colon == absl::string_view::npos) return std::nullopt;
  const size_t bracket = authority.rfind(']');
  if (bracket != absl::string_view::npos && bracket > colon) return std::nullopt;  // "[::1]"
  int port = 0;
  if (!absl::SimpleAtoi(authority.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

EndpointRouter::EndpointRouter(std::vector<AgentEndpoint> endpoints)
    : endpoints_(std::move(endpoints)) {}

void EndpointRouter::SetPorts(const std::vector<int>& ports) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < ports.size() && i < endpoints_.size(); ++i) {
    endpoint_by_port_[ports[i]] = i;
  }
  ports_set_ = true;
}

absl::StatusOr<const AgentEndpoint*> EndpointRouter::Route(
    const grpc::CallbackServerContext& ctx) const {
  if (endpoints_.size() == 1) return &endpoints_.front();
  const grpc::string_ref authority = ctx.ExperimentalGetAuthority();
  const absl::string_view text(authority.data(), authority.size());
  absl::MutexLock lock(&mu_);
  if (!ports_set_) return absl::UnavailableError("agent endpoints are still starting");
  const std::optional<int> port = AuthorityPort(text);
  auto it = port.has_value() ? endpoint_by_port_.find(*port) : endpoint_by_port_.end();
  if (it == endpoint_by_port_.end()) {
    return absl::NotFoundError(absl::StrCat(":authority '", text,
                                            "' names no port of this multi-endpoint agent (each "
                                            "endpoint is reached by the port it listens on)"));
  }
  return &endpoints_[it->second];
}

AgentServiceImpl::AgentServiceImpl(std::vector<AgentEndpoint> endpoints,
                                   AgentServiceOptions options)
    : router_(endpoints), options_(options) {
  std::random_device random;
  const uint64_t nonce = (static_cast<uint64_t>(random()) << 32) ^ random();
  for (size_t i = 0; i < endpoints.size(); ++i) {
    instance_ids_.emplace(endpoints[i].manager,
                          absl::StrCat(absl::Hex(nonce, absl::kZeroPad16), "-", i));
  }
}

grpc::ServerUnaryReactor* AgentServiceImpl::GetInfo(grpc::CallbackServerContext* ctx,
                                                    const profctl::v1::GetInfoRequest* /*request*/,
                                                    profctl::v1::GetInfoResponse* response) {
  absl::StatusOr<const AgentEndpoint*> endpoint = router_.Route(*ctx);
  if (!endpoint.ok()) return FinishUnary(ctx, ToGrpcStatus(endpoint.status()));
  const CaptureManager& manager = *(*endpoint)->manager;
  response->set_name((*endpoint)->name);
  response->set_hostname((*endpoint)->hostname);
  response->set_version(kVersion);
  for (const std::string& c : manager.collector_names()) response->add_collectors(c);
  response->set_max_duration_ms(static_cast<uint64_t>(manager.options().max_duration_ms));
  response->set_busy(manager.busy());
  if (auto it = instance_ids_.find(&manager); it != instance_ids_.end()) {
    response->set_instance_id(it->second);
  }
  return FinishUnary(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AgentServiceImpl::SyncClock(
    grpc::CallbackServerContext* ctx, const profctl::v1::SyncClockRequest* /*request*/,
    profctl::v1::SyncClockResponse* response) {
  absl::StatusOr<const AgentEndpoint*> endpoint = router_.Route(*ctx);
  if (!endpoint.ok()) return FinishUnary(ctx, ToGrpcStatus(endpoint.status()));
  const Clock& clock = *(*endpoint)->clock;
  response->set_receive_ns(clock.WallNs());
  response->set_send_ns(clock.WallNs());
  return FinishUnary(ctx, grpc::Status::OK);
}

grpc::ServerWriteReactor<CaptureChunk>* AgentServiceImpl::Capture(
    grpc::CallbackServerContext* ctx, const profctl::v1::CaptureRequest* request) {
  absl::StatusOr<const AgentEndpoint*> endpoint = router_.Route(*ctx);
  if (!endpoint.ok()) return new FailedCaptureReactor(ToGrpcStatus(endpoint.status()));
  return new CaptureReactor(**endpoint, *request, options_.chunk_bytes);
}

grpc::ServerUnaryReactor* AgentServiceImpl::Cancel(grpc::CallbackServerContext* ctx,
                                                   const profctl::v1::CancelRequest* request,
                                                   profctl::v1::CancelResponse* /*response*/) {
  absl::StatusOr<const AgentEndpoint*> endpoint = router_.Route(*ctx);
  if (!endpoint.ok()) return FinishUnary(ctx, ToGrpcStatus(endpoint.status()));
  absl::Status s = (*endpoint)->manager->Cancel(request->session_id());
  spdlog::info("{}{}cancel '{}': {}", (*endpoint)->name, (*endpoint)->name.empty() ? "" : ": ",
               request->session_id(), s.ToString());
  return FinishUnary(ctx, ToGrpcStatus(s));
}

}  // namespace profctl::agent
