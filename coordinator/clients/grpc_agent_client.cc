#include "coordinator/clients/grpc_agent_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/gzip.h"
#include "coordinator/clients/capture_framing.h"
#include "coordinator/clients/grpc_calls.h"
#include "coordinator/clients/handshake_probe.h"
#include "coordinator/clients/tsl_agent_client.h"
#include "profctl/v1/agent.grpc.pb.h"

namespace profctl::coordinator {
namespace {

using grpc_calls::CallHandle;
using grpc_calls::CallRegistry;
using grpc_calls::CallStatus;
using grpc_calls::LocalCancel;
using grpc_calls::UnaryCall;

using profctl::v1::AgentService;
using profctl::v1::CaptureChunk;

// The ReservationConflict an agent attached to a refused GetInfo (its trailing metadata), if any.
std::optional<ReservationConflict> ConflictFromTrailers(const grpc::ClientContext& ctx) {
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find(kReservationConflictMetadataKey);
  if (it == trailers.end()) return std::nullopt;
  profctl::v1::ReservationConflict proto;
  if (!proto.ParseFromArray(it->second.data(), static_cast<int>(it->second.size()))) {
    return std::nullopt;
  }
  return ReservationConflict{
      {proto.holder().session_start_ns(), proto.holder().ticket()},
      static_cast<int64_t>(std::min<uint64_t>(proto.remaining_ms(), 3'600'000))};
}

// Receives one Capture or Fetch stream, checks its framing (CaptureFramer) and hands it to a
// CaptureStream. Lifetime: created by Capture()/Fetch(), deletes itself in OnDone() (gRPC's last
// call into a reactor).
//
// Threading: gRPC calls OnReadDone and OnDone one at a time; only one read is outstanding, and
// the next starts after the CaptureStream has taken the current chunk, so the framing state
// needs no lock.
class ChunkStreamCall final : public grpc::ClientReadReactor<CaptureChunk> {
 public:
  ChunkStreamCall(CallRegistry* registry, std::shared_ptr<CallHandle> call, const char* rpc,
                  uint64_t max_trace_bytes, CaptureStream* stream)
      : registry_(registry),
        call_(std::move(call)),
        rpc_(rpc),
        stream_(stream),
        framer_(rpc, max_trace_bytes, stream) {}

  // Starts the call: `start(ctx, reactor)` issues the stub's async Capture or Fetch.
  template <typename StartRpc>
  void Start(StartRpc start) {
    start(&call_->ctx, this);
    StartRead(&chunk_);
    StartCall();
  }

  // Holds the request for the call's whole life (gRPC reads it after the stub call returns).
  void KeepAlive(std::shared_ptr<const google::protobuf::Message> request) {
    request_ = std::move(request);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone says how
    absl::Status status = framer_.Accept(chunk_);
    if (!status.ok()) {
      // The first violation wins over whatever status the cancelled call ends with.
      violation_ = std::move(status);
      call_->ctx.TryCancel();
      return;
    }
    StartRead(&chunk_);
  }

  void OnDone(const grpc::Status& s) override {
    stream_->OnDone(Outcome(s));
    CallRegistry* registry = registry_;
    const uint64_t id = call_->id;
    delete this;
    registry->End(id);
  }

 private:
  absl::Status Outcome(const grpc::Status& s) const {
    if (!violation_.ok()) return violation_;
    // A stream cut short by the deadline, a dying agent or AbortCapture: the transport's status
    // says why.
    if (!s.ok()) return CallStatus(s, *call_, rpc_);
    // The agent claims success: the stream must then be complete.
    return framer_.Finish();
  }

  CallRegistry* const registry_;
  const std::shared_ptr<CallHandle> call_;
  const char* const rpc_;
  CaptureStream* const stream_;
  CaptureFramer framer_;
  std::shared_ptr<const google::protobuf::Message> request_;
  CaptureChunk chunk_;  // the one chunk being read or handed on
  absl::Status violation_;
};

class GrpcAgentClient final : public AgentClient {
 public:
  // `prober` (may be null: no handshake probe) is shared: the last of the factory and its
  // clients to go stops it.
  GrpcAgentClient(const WorkerAddress& worker, const GrpcAgentClientOptions& options,
                  std::shared_ptr<HandshakeProber> prober)
      : target_(worker.target()),
        max_trace_bytes_(options.max_trace_bytes),
        clock_(options.clock != nullptr ? options.clock : &real_clock_) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(16 << 20);  // chunks are 1 MiB; leave room
    // gRPC's default reconnect backoff (1 s, x1.6, up to 2 min) would fail every retry of a
    // restarted agent at once, for seconds after it is back: reconnect about as fast as the
    // engine retries (CaptureEngineOptions::retry_*_backoff_ms). Not the *minimum* backoff: it
    // is also gRPC's connect timeout, and a peer that accepts and says nothing must still end
    // as DEADLINE_EXCEEDED at the call's deadline, not as a 100 ms connect failure.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    // Each client owns the only channel to its worker, so sharing subchannels between channels
    // buys nothing, and gRPC's global pool costs every new channel a search that compares whole
    // channel-argument sets against the others' (5 % of a 1,024-host prepare). channelz's
    // per-call counters serve a debug service profctl does not run.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_ENABLE_CHANNELZ, 0);
    // gRPC's retry filter stays on (docs/perf.md, "Where a host's coordinator memory goes"): its
    // transparent retries resend a call that never reached the agent (a connection closed
    // between the pick and the stream, REFUSED_STREAM) at once, which the engine's own retries
    // would turn into a Fetch, a backoff and a late host, and Cancel and GetStepSignal are not
    // retried by the engine at all.
    if (options.authority_for_testing) {
      if (std::string authority = options.authority_for_testing(worker); !authority.empty()) {
        args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, authority);
      }
    }
    // The token goes only where it may (SendsTokenTo): to a worker beyond loopback without TLS
    // and without --insecure-token the calls carry none, and the agent refuses them.
    std::shared_ptr<const AgentCredentials> credentials = options.credentials;
    if (credentials != nullptr && !credentials->token.empty() &&
        !SendsTokenTo(*credentials, worker)) {
      auto without_token = std::make_shared<AgentCredentials>(*credentials);
      without_token->token.clear();
      credentials = std::move(without_token);
    }
    channel_ = CreateAgentChannel(worker.channel_target(), credentials.get(), args);
    stub_ = AgentService::NewStub(channel_);
    if (options.handshake_for_testing) {
      handshake_for_testing_ = options.handshake_for_testing(worker);
    } else if (prober != nullptr) {
      prober_ = std::move(prober);
      probe_.emplace(prober_.get(), worker.host, worker.port);
    }
  }

  ~GrpcAgentClient() override {
    calls_.CancelAll(/*captures_only=*/false, LocalCancel::kClientDestroyed);
    calls_.AwaitIdle();
  }

  GrpcAgentClient(const GrpcAgentClient&) = delete;
  GrpcAgentClient& operator=(const GrpcAgentClient&) = delete;

  void GetInfo(const Reservation& reserve, int64_t timeout_ms, Callback<AgentInfo> done) override {
    using Call = UnaryCall<profctl::v1::GetInfoRequest, profctl::v1::GetInfoResponse>;
    profctl::v1::GetInfoRequest request;
    if (!reserve.session_id.empty()) {
      request.mutable_reserve()->set_session_id(reserve.session_id);
      request.mutable_reserve()->set_session_key(reserve.session_key);
      request.mutable_reserve()->set_ttl_ms(
          static_cast<uint64_t>(std::max<int64_t>(0, reserve.ttl_ms)));
      if (reserve.priority.set()) {
        profctl::v1::ReservationPriority* p = request.mutable_reserve()->mutable_priority();
        p->set_session_start_ns(reserve.priority.session_start_ns);
        p->set_ticket(reserve.priority.ticket);
      }
    }
    StartUnary<Call>(
        timeout_ms, std::move(request),
        [this](grpc::ClientContext* ctx, const auto* req, auto* resp, auto cb) {
          stub_->async()->GetInfo(ctx, req, resp, std::move(cb));
        },
        [this, done = std::move(done)](const grpc::Status& s, Call& call) mutable {
          if (!s.ok()) {
            absl::Status status =
                ExplainGetInfoError(target_, CallStatus(s, *call.call, "GetInfo"));
            if (std::optional<ReservationConflict> c = ConflictFromTrailers(call.call->ctx)) {
              status = WithReservationConflict(std::move(status), *c);
            }
            std::move(done)(std::move(status));
            return;
          }
          const profctl::v1::GetInfoResponse& r = call.response;
          std::move(done)(AgentInfo{r.name(),
                                    r.hostname(),
                                    r.version(),
                                    {r.collectors().begin(), r.collectors().end()},
                                    static_cast<int64_t>(r.max_duration_ms()),
                                    r.busy(),
                                    r.instance_id()});
        });
  }

  void SyncClock(int64_t timeout_ms, Callback<ClockReading> done) override {
    using Call = UnaryCall<profctl::v1::SyncClockRequest, profctl::v1::SyncClockResponse>;
    StartUnary<Call>(
        timeout_ms, {},
        [this](grpc::ClientContext* ctx, const auto* req, auto* resp, auto cb) {
          stub_->async()->SyncClock(ctx, req, resp, std::move(cb));
        },
        [done = std::move(done)](const grpc::Status& s, Call& call) mutable {
          if (!s.ok()) {
            std::move(done)(CallStatus(s, *call.call, "SyncClock"));
            return;
          }
          std::move(done)(ClockReading{call.response.receive_ns(), call.response.send_ns(),
                                       call.local_send_ns, call.local_receive_ns});
        });
  }

  void GetStepSignal(const StepSignalQuery& query, int64_t timeout_ms,
                     Callback<profctl::v1::GetStepSignalResponse> done) override {
    using Call = UnaryCall<profctl::v1::GetStepSignalRequest, profctl::v1::GetStepSignalResponse>;
    profctl::v1::GetStepSignalRequest request;
    request.set_since_ns(query.since_ns);
    request.set_max_samples(query.max_samples);
    request.set_summary_only(query.summary_only);
    StartUnary<Call>(
        timeout_ms, std::move(request),
        [this](grpc::ClientContext* ctx, const auto* req, auto* resp, auto cb) {
          stub_->async()->GetStepSignal(ctx, req, resp, std::move(cb));
        },
        [done = std::move(done)](const grpc::Status& s, Call& call) mutable {
          if (!s.ok()) {
            std::move(done)(CallStatus(s, *call.call, "GetStepSignal"));
            return;
          }
          std::move(done)(std::move(call.response));
        });
  }

  void Capture(const CaptureArgs& args, int64_t timeout_ms, CaptureStream* stream) override {
    auto request = std::make_shared<profctl::v1::CaptureRequest>();
    request->set_session_id(args.session_id);
    request->set_start_at_ns(args.start_at_ns);
    request->set_duration_ms(static_cast<uint64_t>(args.duration_ms));
    request->set_session_key(args.session_key);
    request->set_past_ms(static_cast<uint64_t>(args.past_ms));
    request->set_host_tracer_level(args.tracer_levels.host);
    request->set_device_tracer_level(args.tracer_levels.device);
    request->set_python_tracer_level(args.tracer_levels.python);
    auto* call = new ChunkStreamCall(&calls_, calls_.Begin(/*capture=*/true, timeout_ms), "Capture",
                                     max_trace_bytes_, stream);
    call->Start([this, request](grpc::ClientContext* ctx, ChunkStreamCall* reactor) {
      reactor->KeepAlive(request);
      stub_->async()->Capture(ctx, request.get(), reactor);
    });
  }

  void Fetch(const FetchArgs& args, int64_t timeout_ms, CaptureStream* stream) override {
    auto request = std::make_shared<profctl::v1::FetchRequest>();
    request->set_session_id(args.session_id);
    request->set_session_key(args.session_key);
    auto* call = new ChunkStreamCall(&calls_, calls_.Begin(/*capture=*/true, timeout_ms), "Fetch",
                                     max_trace_bytes_, stream);
    call->Start([this, request](grpc::ClientContext* ctx, ChunkStreamCall* reactor) {
      reactor->KeepAlive(request);
      stub_->async()->Fetch(ctx, request.get(), reactor);
    });
  }

  bool CanFetch() const override { return true; }

  bool Connected() const override {
    return channel_->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY;
  }

  void ProbeHandshake(int64_t timeout_ms, Callback<int64_t> done) override {
    if (!probe_.has_value()) {
      std::move(done)(handshake_for_testing_);
      return;
    }
    probe_->Start(timeout_ms, std::move(done));
  }

  void Cancel(const std::string& session_id, const std::string& session_key, int64_t timeout_ms,
              DoneCallback done) override {
    using Call = UnaryCall<profctl::v1::CancelRequest, profctl::v1::CancelResponse>;
    profctl::v1::CancelRequest request;
    request.set_session_id(session_id);
    request.set_session_key(session_key);
    StartUnary<Call>(
        timeout_ms, std::move(request),
        [this](grpc::ClientContext* ctx, const auto* req, auto* resp, auto cb) {
          stub_->async()->Cancel(ctx, req, resp, std::move(cb));
        },
        [done = std::move(done)](const grpc::Status& s, Call& call) mutable {
          std::move(done)(CallStatus(s, *call.call, "Cancel"));
        });
  }

  void AbortCapture() override {
    calls_.CancelAll(/*captures_only=*/true, LocalCancel::kAbortCapture);
  }

 private:
  template <typename Call, typename Start>
  void StartUnary(int64_t timeout_ms, decltype(Call::request) request, Start start,
                  typename Call::Finish finish) {
    grpc_calls::StartUnary<Call>(&calls_, clock_, timeout_ms, std::move(request), std::move(start),
                                 std::move(finish));
  }

  const std::string target_;  // for errors
  const uint64_t max_trace_bytes_;
  const RealClock real_clock_;
  const Clock* const clock_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<AgentService::Stub> stub_;
  CallRegistry calls_;
  // ProbeHandshake's (on the factory's prober, kept alive while this client is), or the test's
  // answer instead.
  std::shared_ptr<HandshakeProber> prober_;
  std::optional<HandshakeProbe> probe_;
  absl::StatusOr<int64_t> handshake_for_testing_ = absl::UnimplementedError("not probed");
};

}  // namespace

absl::Status ExplainGetInfoError(absl::string_view target, absl::Status status) {
  if (status.code() != absl::StatusCode::kUnimplemented) return status;
  return absl::UnimplementedError(
      absl::StrCat(target,
                   " answered but is not a profctl agent (UNIMPLEMENTED GetInfo); is it "
                   "the coordinator's port? (",
                   status.message(), ")"));
}

namespace {
// The probers' clock: they may outlive their factory. Never destroyed.
const Clock* ProberClock() {
  static const Clock* const clock = new RealClock();
  return clock;
}
}  // namespace

GrpcAgentClientFactory::GrpcAgentClientFactory(GrpcAgentClientOptions options)
    : options_(std::move(options)) {}

GrpcAgentClientFactory::~GrpcAgentClientFactory() = default;

std::unique_ptr<AgentClient> GrpcAgentClientFactory::Connect(const WorkerAddress& worker) {
  if (worker.protocol == WorkerAddress::Protocol::kTsl) return MakeTslAgentClient(worker, options_);
  std::shared_ptr<HandshakeProber> prober;
  if (!options_.handshake_for_testing) {
    absl::MutexLock lock(&prober_mu_);
    // Real time whatever options_.clock is: a handshake takes the network's time.
    if (prober_ == nullptr) prober_ = std::make_shared<HandshakeProber>(ProberClock());
    prober = prober_;
  }
  return std::make_unique<GrpcAgentClient>(worker, options_, prober);
}

}  // namespace profctl::coordinator
