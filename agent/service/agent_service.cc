#include "agent/service/agent_service.h"

#include <malloc.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/bounded_text.h"
#include "common/gzip.h"
#include "common/reservation.h"
#include "common/version.h"
#include "spdlog/spdlog.h"
#include "xspace/tsl_profile.h"

namespace profctl::agent {
namespace {

using profctl::v1::CaptureChunk;

// Streams one trace: started (Capture only, when recording begins), header, data chunks,
// trailer. Capture and Fetch differ only in where the trace comes from (subclasses below).
//
// Lifetime: created by the handler, deleted in OnDone(), which gRPC calls only after Finish().
// Finish() is called exactly once: at once for a rejected request (Reject), else only after the
// trace (or an error) was delivered (the session's or the store's callbacks point at this
// reactor, so it must outlive them), when the last message was written or the client went away.
//
// Writes: gRPC allows one outstanding write per stream. Messages become ready on several threads
// (on_started on the session timeline, the trace on the collect executor or a store callback,
// OnWriteDone on a gRPC thread); each of them calls Pump(), which under mu_ picks the next message
// in stream order only when no write is in flight, and issues StartWrite()/Finish() after
// releasing mu_ (gRPC may run OnDone(), deleting this, as soon as Finish() is called).
//
// Idle streams: each write arms (at most one) timer on the endpoint's executor; a write still in
// flight stream_idle_timeout_ms after it began gets the call cancelled (TryCancel), which ends
// the write with !ok and so the stream. The timer shares only IdleWatch with the reactor, whose
// context pointer OnDone clears first (gRPC never runs OnDone inline from TryCancel).
class TraceStreamReactor : public grpc::ServerWriteReactor<CaptureChunk> {
 public:
  void OnWriteDone(bool ok) final {
    {
      absl::MutexLock lock(&idle_->mu);
      idle_->in_flight = false;
    }
    {
      absl::MutexLock lock(&mu_);
      write_in_flight_ = false;
      if (!ok) ClientGone();
    }
    Pump();
  }

  void OnCancel() final {
    {
      absl::MutexLock lock(&mu_);
      ClientGone();
    }
    Pump();
  }

  void OnDone() final {
    {
      absl::MutexLock lock(&idle_->mu);
      idle_->ctx = nullptr;
    }
    delete this;
  }

 protected:
  TraceStreamReactor(grpc::CallbackServerContext* ctx, const AgentEndpoint& endpoint,
                     const AgentServiceOptions& options, const char* what)
      : endpoint_(endpoint),
        metrics_(options.metrics),
        chunk_bytes_(options.chunk_bytes),
        what_(what) {
    idle_->ctx = ctx;
    idle_->executor = endpoint.executor;
    idle_->timeout_ns = options.stream_idle_timeout_ms * kNanosPerMilli;
    idle_->what = absl::StrCat(LogPrefix(), what);
  }
  ~TraceStreamReactor() override = default;

  std::string LogPrefix() const {
    return endpoint_.name.empty() ? std::string() : absl::StrCat(endpoint_.name, ": ");
  }

  // Finishes at once with `status`, for a request refused before anything was sent. Only from
  // the constructor of a subclass, instead of any delivery.
  void Reject(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    Count(status, 0);
    Finish(status);
  }

  void CountAdmitted() {
    if (metrics_ != nullptr) metrics_->CaptureAdmitted();
  }

  // Any thread; at most once, before the trace.
  void DeliverStarted(int64_t start_ns) {
    {
      absl::MutexLock lock(&mu_);
      started_ns_ = start_ns;
    }
    Pump();
  }

  // Any thread; once (or DeliverError). Null: nothing to send (the client is gone).
  void DeliverTrace(std::shared_ptr<const StoredTrace> trace) {
    {
      absl::MutexLock lock(&mu_);
      if (trace != nullptr) {
        header_.set_session_id(trace->session_id);
        header_.set_start_ns(trace->start_ns);
        header_.set_stop_ns(trace->stop_ns);
        header_.set_total_bytes(trace->data->size());
        header_.set_cancelled(trace->cancelled);
        header_.set_cancel_reason(ToProto(trace->cancel_reason));
        header_.set_dropped_events(trace->dropped_events);
        for (const profctl::v1::Shortfall& f : trace->shortfalls) *header_.add_shortfalls() = f;
        header_.set_name(endpoint_.name);
        header_.set_hostname(endpoint_.hostname);
        if (endpoint_.store != nullptr && !finished_) {
          hold_ = endpoint_.store->HoldBuffer(trace->data);
        }
      }
      trace_ = std::move(trace);
      done_ = true;
    }
    Pump();
  }

  // Any thread; once, instead of DeliverTrace: finishes with `status` (unless the client is gone).
  void DeliverError(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      error_ = status;
      done_ = true;
    }
    Pump();
  }

  // Under mu_, once, the first time the client is seen gone.
  virtual void OnClientGoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {}

  bool client_gone() {
    absl::MutexLock lock(&mu_);
    return client_gone_;
  }

  const AgentEndpoint& endpoint_;
  absl::Mutex mu_;

 private:
  void Count(const grpc::Status& status, uint64_t bytes) {
    if (metrics_ == nullptr) return;
    metrics_->StreamFinished(
        what_, absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())), bytes);
  }

  // What the idle timer shares with the reactor (see the class comment).
  struct IdleWatch {
    absl::Mutex mu;
    grpc::CallbackServerContext* ctx ABSL_GUARDED_BY(mu) = nullptr;  // null once OnDone ran
    bool in_flight ABSL_GUARDED_BY(mu) = false;
    bool armed ABSL_GUARDED_BY(mu) = false;
    int64_t write_started_mono ABSL_GUARDED_BY(mu) = 0;
    Executor* executor = nullptr;
    int64_t timeout_ns = 0;
    std::string what;  // log prefix
  };

  static void ArmIdleTimer(const std::shared_ptr<IdleWatch>& watch) {
    if (watch->executor == nullptr || watch->timeout_ns <= 0) return;
    absl::MutexLock lock(&watch->mu);
    watch->in_flight = true;
    watch->write_started_mono = watch->executor->clock().MonoNs();
    if (watch->armed) return;
    watch->armed = true;
    watch->executor->PostAt(watch->write_started_mono + watch->timeout_ns,
                            [watch] { CheckIdle(watch); });
  }

  static void CheckIdle(const std::shared_ptr<IdleWatch>& watch) {
    absl::MutexLock lock(&watch->mu);
    watch->armed = false;
    if (watch->ctx == nullptr || !watch->in_flight) return;
    const int64_t deadline = watch->write_started_mono + watch->timeout_ns;
    if (watch->executor->clock().MonoNs() >= deadline) {
      spdlog::warn("{} stream cancelled: the client has not read for {} ms", watch->what,
                   watch->timeout_ns / kNanosPerMilli);
      watch->ctx->TryCancel();
      return;
    }
    watch->armed = true;
    watch->executor->PostAt(deadline, [watch] { CheckIdle(watch); });
  }

  void ClientGone() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (client_gone_) return;
    client_gone_ = true;
    OnClientGoneLocked();
  }

  // Issues the next write, or Finish, when that is due; see the class comment.
  void Pump() {
    enum class Action { kNothing, kWrite, kFinish } action = Action::kNothing;
    grpc::Status status;
    TraceStore::Hold released;  // the trace's memory stops counting once the stream is over
    uint64_t sent = 0;
    {
      absl::MutexLock lock(&mu_);
      if (write_in_flight_ || finished_) return;
      chunk_.Clear();
      if (client_gone_) {
        if (!done_) return;  // the delivery pumps again
        action = Action::kFinish;
        status = grpc::Status(grpc::StatusCode::CANCELLED,
                              absl::StrCat(what_, " cancelled by the client"));
      } else if (error_.has_value()) {
        action = Action::kFinish;
        status = *error_;
      } else if (started_ns_.has_value()) {
        chunk_.mutable_started()->set_start_ns(*started_ns_);
        started_ns_.reset();
        action = Action::kWrite;
      } else if (!done_) {
        return;
      } else if (trace_ == nullptr) {  // nothing to send: only with the client gone
        action = Action::kFinish;
        status = grpc::Status(grpc::StatusCode::CANCELLED,
                              absl::StrCat(what_, " cancelled by the client"));
      } else if (!header_sent_) {
        *chunk_.mutable_header() = header_;
        header_sent_ = true;
        action = Action::kWrite;
      } else if (offset_ < trace_->data->size()) {
        const size_t n = std::min(chunk_bytes_, trace_->data->size() - offset_);
        chunk_.set_data(trace_->data->data() + offset_, n);
        offset_ += n;
        ++chunks_;
        action = Action::kWrite;
      } else if (!trailer_sent_) {
        chunk_.mutable_trailer()->set_chunks(chunks_);
        chunk_.mutable_trailer()->set_crc32(trace_->crc32);
        trailer_sent_ = true;
        action = Action::kWrite;
      } else {
        action = Action::kFinish;
        status = grpc::Status::OK;
      }
      if (action == Action::kWrite) write_in_flight_ = true;
      if (action == Action::kFinish) {
        finished_ = true;
        released = std::move(hold_);
        sent = offset_;
      }
    }
    // chunk_ is not touched again until OnWriteDone clears write_in_flight_.
    if (action == Action::kWrite) {
      ArmIdleTimer(idle_);
      StartWrite(&chunk_);
    } else if (action == Action::kFinish) {
      Count(status, sent);
      Finish(status);
    }
  }

  AgentMetrics* const metrics_;
  const size_t chunk_bytes_;
  const char* const what_;  // "capture" or "fetch"
  const std::shared_ptr<IdleWatch> idle_ = std::make_shared<IdleWatch>();
  std::optional<int64_t> started_ns_ ABSL_GUARDED_BY(mu_);  // a started message to send
  bool done_ ABSL_GUARDED_BY(mu_) = false;                  // the trace or an error was delivered
  std::shared_ptr<const StoredTrace> trace_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> error_ ABSL_GUARDED_BY(mu_);
  TraceStore::Hold hold_ ABSL_GUARDED_BY(mu_);
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool header_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool trailer_sent_ ABSL_GUARDED_BY(mu_) = false;
  profctl::v1::CaptureHeader header_ ABSL_GUARDED_BY(mu_);
  size_t offset_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t chunks_ ABSL_GUARDED_BY(mu_) = 0;
  // The message being written; owned by the write in flight while write_in_flight_.
  CaptureChunk chunk_;
};

// Traces at least this big are followed by malloc_trim(0) once their XSpace is freed: the
// XSpace is many small blocks that glibc would otherwise keep in its arenas after a big capture.
constexpr size_t kTrimAfterBytes = size_t{16} << 20;

// Runs one capture session and streams its trace.
class CaptureReactor final : public TraceStreamReactor {
 public:
  CaptureReactor(grpc::CallbackServerContext* ctx, const AgentEndpoint& endpoint,
                 const profctl::v1::CaptureRequest& request, const AgentServiceOptions& options)
      : TraceStreamReactor(ctx, endpoint, options, "capture"),
        keyed_(!request.session_key().empty() && endpoint.store != nullptr) {
    const std::string id = BoundedForLog(request.session_id());
    absl::Status admitted =
        endpoint.store != nullptr ? endpoint.store->CheckCapacity() : absl::OkStatus();
    absl::StatusOr<std::unique_ptr<CaptureManager::Session>> session;
    const tsl::TracerLevels defaults;
    const tsl::TracerLevels levels{
        request.has_host_tracer_level() ? request.host_tracer_level() : defaults.host,
        request.has_device_tracer_level() ? request.device_tracer_level() : defaults.device,
        request.has_python_tracer_level() ? request.python_tracer_level() : defaults.python};
    if (admitted.ok()) {
      admitted = tsl::ValidateTracerLevels(
          levels.host, levels.device, levels.python,
          {"host_tracer_level", "device_tracer_level", "python_tracer_level"});
    }
    if (!admitted.ok()) {
      session = std::move(admitted);
    } else {
      session = endpoint.manager->Begin(
          {request.session_id(),
           request.start_at_ns(),
           static_cast<int64_t>(std::min<uint64_t>(request.duration_ms(), INT64_MAX)),
           {request.collectors().begin(), request.collectors().end()},
           request.session_key(),
           SessionOrigin::kAgentService,
           static_cast<int64_t>(std::min<uint64_t>(request.past_ms(), INT64_MAX)),
           levels});
    }
    if (!session.ok()) {
      LogRequest(
          absl::StrCat("capture rejected ", absl::StatusCodeToString(session.status().code())),
          absl::StrCat(LogPrefix(), "capture '", id, "' rejected: ", session.status().ToString()));
      Reject(ToGrpcStatus(session.status()));
      return;
    }
    CountAdmitted();
    spdlog::info("{}capture '{}' accepted: start_at={} duration={} ms{}{}", LogPrefix(), id,
                 request.start_at_ns(), request.duration_ms(),
                 request.past_ms() > 0 ? " (a snapshot of the past)" : "",
                 keyed_ ? ", keyed (retained for Fetch)" : "");
    if (keyed_) {
      ticket_ =
          endpoint.store->Expect(endpoint.manager, request.session_id(), request.session_key());
    }
    CaptureManager::Session* s = session->get();
    {
      absl::MutexLock lock(&mu_);
      session_ = std::move(*session);
    }
    // Messages written before gRPC has bound the reactor are held back by gRPC until it has.
    s->Run({.on_started = [this](int64_t start_ns) { DeliverStarted(start_ns); },
            .on_done = [this](CaptureResult result) { OnCaptureDone(std::move(result)); }});
  }

 private:
  // A keyless capture goes on only for a client that listens; a keyed one records to the end
  // of its window and is retained for Fetch.
  void OnClientGoneLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (session_ == nullptr) return;
    if (keyed_) {
      spdlog::info(
          "{}capture '{}': the client went away; recording on to the end of the window "
          "for Fetch",
          LogPrefix(), session_->id());
    } else {
      session_->Stop();
    }
  }

  // Collect executor.
  void OnCaptureDone(CaptureResult result) {
    const bool gone = client_gone();
    std::shared_ptr<const StoredTrace> trace;
    if (!gone || keyed_) {
      auto data = std::make_shared<std::string>();
      result.space.SerializeToString(data.get());
      result.arena.reset();  // the trace, now serialized (result.space is gone with it)
      if (data->size() >= kTrimAfterBytes) malloc_trim(0);
      auto stored = std::make_shared<StoredTrace>();
      stored->session_id = result.session_id;
      stored->start_ns = result.start_ns;
      stored->stop_ns = result.stop_ns;
      stored->cancelled = result.cancelled;
      stored->cancel_reason = result.cancel_reason;
      stored->dropped_events = result.dropped_events;
      stored->shortfalls = std::move(result.shortfalls);
      stored->crc32 = Crc32(0, *data);
      stored->data = std::move(data);
      trace = std::move(stored);
      spdlog::info("{}capture '{}' done: {} bytes{}{}", LogPrefix(), result.session_id,
                   trace->data->size(), result.cancelled ? " (cancelled early)" : "",
                   gone ? ", kept for Fetch (the client went away)" : "");
    }
    if (ticket_ != nullptr) endpoint_.store->Complete(ticket_, trace);
    if (gone) trace.reset();  // nobody to send it to (kept in the store when keyed)
    DeliverTrace(std::move(trace));
  }

  const bool keyed_;           // and a store to retain it in
  TraceStore::Ticket ticket_;  // set before Run, then read only
  // Kept until the reactor goes: Stop() on an ended session is harmless.
  std::unique_ptr<CaptureManager::Session> session_ ABSL_GUARDED_BY(mu_);
};

// Streams a retained trace again, waiting (a store callback) while it is being recorded.
class FetchReactor final : public TraceStreamReactor {
 public:
  FetchReactor(grpc::CallbackServerContext* ctx, const AgentEndpoint& endpoint,
               const profctl::v1::FetchRequest& request, const AgentServiceOptions& options)
      : TraceStreamReactor(ctx, endpoint, options, "fetch") {
    const std::string id = BoundedForLog(request.session_id());
    absl::Status valid = ValidateSessionId(request.session_id());
    if (valid.ok()) valid = ValidateSessionKey(request.session_key());
    if (!valid.ok()) {
      LogRequest("fetch rejected",
                 absl::StrCat(LogPrefix(), "fetch '", id, "' rejected: ", valid.ToString()));
      Reject(ToGrpcStatus(valid));
      return;
    }
    if (endpoint.store == nullptr || request.session_key().empty()) {
      LogRequest("fetch nothing retained",
                 absl::StrCat(
                     LogPrefix(), "fetch '", id, "': nothing retained",
                     endpoint.store == nullptr ? " (this agent retains no traces)" : " (no key)"));
      Reject(grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "this agent holds no trace for that session id and key (never "
                          "recorded with a key, expired, evicted, or another key)"));
      return;
    }
    spdlog::info("{}fetch '{}'", LogPrefix(), id);
    endpoint.store->Fetch(
        endpoint.manager, request.session_id(), request.session_key(),
        [this, id](absl::StatusOr<std::shared_ptr<const StoredTrace>> trace) {
          if (trace.ok()) {
            spdlog::info("{}fetch '{}': {} bytes", LogPrefix(), id, (*trace)->data->size());
            DeliverTrace(*std::move(trace));
          } else {
            spdlog::info("{}fetch '{}': {}", LogPrefix(), id, trace.status().ToString());
            DeliverError(ToGrpcStatus(trace.status()));
          }
        });
  }
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

LogLimiter& RequestLogLimiter() {
  static RealClock* const clock = new RealClock();
  static LogLimiter* const limiter = new LogLimiter(clock);
  return *limiter;
}

void LogRequest(absl::string_view kind, const std::string& line) {
  if (std::optional<std::string> note = RequestLogLimiter().Admit(kind)) {
    spdlog::info("{}{}", line, *note);
  }
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  constexpr size_t kMaxMessageBytes = 2048;
  absl::string_view message = status.message();
  std::string text(message.substr(0, kMaxMessageBytes));
  if (message.size() > kMaxMessageBytes) absl::StrAppend(&text, "...(", message.size(), " bytes)");
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), text);
}

profctl::v1::CancelReason ToProto(CancelReason reason) {
  switch (reason) {
    case CancelReason::kNone:
      return profctl::v1::CANCEL_REASON_UNSPECIFIED;
    case CancelReason::kClient:
      return profctl::v1::CANCEL_REASON_CLIENT;
    case CancelReason::kAgentShutdown:
      return profctl::v1::CANCEL_REASON_AGENT_SHUTDOWN;
    case CancelReason::kOtherClient:
      return profctl::v1::CANCEL_REASON_OTHER_CLIENT;
    case CancelReason::kClientGone:
      return profctl::v1::CANCEL_REASON_CLIENT_GONE;
  }
  return profctl::v1::CANCEL_REASON_UNSPECIFIED;
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
  if (!endpoints_.empty() && endpoints_.front().authenticator != nullptr) {
    if (absl::Status s = endpoints_.front().authenticator->Check(ctx); !s.ok()) return s;
  }
  if (endpoints_.size() == 1) return &endpoints_.front();
  const grpc::string_ref authority = ctx.ExperimentalGetAuthority();
  const absl::string_view text(authority.data(), authority.size());
  absl::MutexLock lock(&mu_);
  if (!ports_set_) return absl::UnavailableError("agent endpoints are still starting");
  const std::optional<int> port = AuthorityPort(text);
  auto it = port.has_value() ? endpoint_by_port_.find(*port) : endpoint_by_port_.end();
  if (it == endpoint_by_port_.end()) {
    return absl::NotFoundError(absl::StrCat(":authority '", BoundedForLog(text),
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

namespace {

// The caller's address without its port ("ipv4:10.0.0.1"): whom a reservation came from.
std::string PeerHost(const std::string& peer) {
  if (absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:")) {
    const size_t colon = peer.rfind(':');
    if (colon > 5) return peer.substr(0, colon);
  }
  return peer;
}

}  // namespace

grpc::ServerUnaryReactor* AgentServiceImpl::GetInfo(grpc::CallbackServerContext* ctx,
                                                    const profctl::v1::GetInfoRequest* request,
                                                    profctl::v1::GetInfoResponse* response) {
  absl::StatusOr<const AgentEndpoint*> endpoint = router_.Route(*ctx);
  if (!endpoint.ok()) return FinishUnary(ctx, ToGrpcStatus(endpoint.status()));
  CaptureManager& manager = *(*endpoint)->manager;
  if (request->has_reserve() && !request->reserve().session_id().empty()) {
    const profctl::v1::Reservation& r = request->reserve();
    const int64_t ttl_ms =
        static_cast<int64_t>(std::min<uint64_t>(r.ttl_ms(), std::numeric_limits<int64_t>::max()));
    const ReservationPriority priority{r.priority().session_start_ns(), r.priority().ticket()};
    int64_t granted_ms = 0;
    if (absl::Status s = manager.Reserve(r.session_id(), r.session_key(), ttl_ms, priority,
                                         PeerHost(ctx->peer()), &granted_ms);
        !s.ok()) {
      // Whose reservation refused it travels in the trailers (agent.proto, GetInfoRequest).
      if (std::optional<ReservationConflict> c = ReservationConflictOf(s)) {
        profctl::v1::ReservationConflict conflict;
        conflict.mutable_holder()->set_session_start_ns(c->holder.session_start_ns);
        conflict.mutable_holder()->set_ticket(c->holder.ticket);
        conflict.set_remaining_ms(static_cast<uint64_t>(std::max<int64_t>(0, c->remaining_ms)));
        ctx->AddTrailingMetadata(kReservationConflictMetadataKey, conflict.SerializeAsString());
      }
      return FinishUnary(ctx, ToGrpcStatus(s));
    }
  }
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
  // The reference a capture's start is checked against for a clock step (CaptureHeader.shortfalls).
  (*endpoint)->manager->NoteClockSync();
  return FinishUnary(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AgentServiceImpl::GetStepSignal(
    grpc::CallbackServerContext* ctx, const profctl::v1::GetStepSignalRequest* request,
    profctl::v1::GetStepSignalResponse* response) {
  absl::StatusOr<const AgentEndpoint*> endpoint = router_.Route(*ctx);
  if (!endpoint.ok()) return FinishUnary(ctx, ToGrpcStatus(endpoint.status()));
  // At most CaptureManager's step-signal window and samples, whatever the caller asks.
  constexpr uint32_t kDefaultSamples = 1024;
  constexpr auto kMaxSamples = static_cast<uint32_t>(CaptureManager::kMaxStepSignalSamples);
  const int64_t now = (*endpoint)->clock->WallNs();
  response->set_now_ns(now);
  if (request->summary_only() && (*endpoint)->hang != nullptr) {
    // Each source's state from the hang detector, which keeps it anyway: no samples copied.
    std::vector<std::string> sources;
    (*endpoint)->manager->RecentSteps(now, now, 0, &sources);  // the names alone
    for (std::string& s : sources) response->add_sources(std::move(s));
    AddStepSummaries((*endpoint)->hang->Poll(*(*endpoint)->manager, now), response);
    return FinishUnary(ctx, grpc::Status::OK);
  }
  const int64_t since = std::max(request->since_ns(), now - CaptureManager::kStepSignalWindowNs);
  const uint32_t max =
      request->max_samples() == 0 ? kDefaultSamples : std::min(request->max_samples(), kMaxSamples);
  std::vector<std::string> sources;
  const std::vector<StepSample> steps =
      (*endpoint)->manager->RecentSteps(since, now, max, &sources);
  for (std::string& s : sources) response->add_sources(std::move(s));
  AddStepSamples(steps, response);
  if ((*endpoint)->hang != nullptr) {
    for (const StepSourceStatus& st :
         Stalled((*endpoint)->hang->Poll(*(*endpoint)->manager, now))) {
      AddStepStall(st, response);
    }
  }
  return FinishUnary(ctx, grpc::Status::OK);
}

grpc::ServerWriteReactor<CaptureChunk>* AgentServiceImpl::Capture(
    grpc::CallbackServerContext* ctx, const profctl::v1::CaptureRequest* request) {
  absl::StatusOr<const AgentEndpoint*> endpoint = router_.Route(*ctx);
  if (!endpoint.ok()) return new FailedCaptureReactor(ToGrpcStatus(endpoint.status()));
  return new CaptureReactor(ctx, **endpoint, *request, options_);
}

grpc::ServerUnaryReactor* AgentServiceImpl::Cancel(grpc::CallbackServerContext* ctx,
                                                   const profctl::v1::CancelRequest* request,
                                                   profctl::v1::CancelResponse* /*response*/) {
  absl::StatusOr<const AgentEndpoint*> endpoint = router_.Route(*ctx);
  if (!endpoint.ok()) return FinishUnary(ctx, ToGrpcStatus(endpoint.status()));
  absl::Status s = (*endpoint)->manager->Cancel(request->session_id(), request->session_key());
  LogRequest(absl::StrCat("cancel ", absl::StatusCodeToString(s.code())),
             absl::StrCat((*endpoint)->name, (*endpoint)->name.empty() ? "" : ": ", "cancel '",
                          BoundedForLog(request->session_id()), "': ", s.ToString()));
  return FinishUnary(ctx, ToGrpcStatus(s));
}

grpc::ServerWriteReactor<CaptureChunk>* AgentServiceImpl::Fetch(
    grpc::CallbackServerContext* ctx, const profctl::v1::FetchRequest* request) {
  absl::StatusOr<const AgentEndpoint*> endpoint = router_.Route(*ctx);
  if (!endpoint.ok()) return new FailedCaptureReactor(ToGrpcStatus(endpoint.status()));
  return new FetchReactor(ctx, **endpoint, *request, options_);
}

}  // namespace profctl::agent
