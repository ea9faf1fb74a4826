#include "coordinator/grpc_agent_client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cassert>
#include <chrono>
#include <functional>
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
#include "coordinator/grpc_calls.h"
#include "coordinator/tsl_agent_client.h"
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

// Receives one Capture stream, checks its framing and hands it to a CaptureStream. Lifetime:
// created by Capture(), deletes itself in OnDone() (gRPC's last call into a reactor).
//
// Threading: gRPC calls OnReadDone and OnDone one at a time; only one read is outstanding, and
// the next starts after the CaptureStream has taken the current chunk, so the framing state
// below needs no lock.
class CaptureCall final : public grpc::ClientReadReactor<CaptureChunk> {
 public:
  CaptureCall(CallRegistry* registry, std::shared_ptr<CallHandle> call, const CaptureArgs& args,
              uint64_t max_trace_bytes, CaptureStream* stream)
      : registry_(registry),
        call_(std::move(call)),
        max_trace_bytes_(max_trace_bytes),
        stream_(stream) {
    request_.set_session_id(args.session_id);
    request_.set_start_at_ns(args.start_at_ns);
    request_.set_duration_ms(static_cast<uint64_t>(args.duration_ms));
  }

  void Start(AgentService::Stub* stub) {
    stub->async()->Capture(&call_->ctx, &request_, this);
    StartRead(&chunk_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone says how
    absl::Status status = Consume();
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
  // Checks the chunk just read against the stream so far and hands it on. Returns the first
  // protocol violation, or OnData's error.
  absl::Status Consume() {
    switch (chunk_.part_case()) {
      case CaptureChunk::kStarted:
        if (header_) return absl::DataLossError("Capture: agent sent 'started' after the header");
        if (started_) return absl::DataLossError("Capture: agent sent a second 'started'");
        started_ = true;
        stream_->OnStarted(chunk_.started().start_ns());
        return absl::OkStatus();
      case CaptureChunk::kHeader: {
        if (header_) return absl::DataLossError("Capture: agent sent a second header");
        header_ = true;
        const profctl::v1::CaptureHeader& h = chunk_.header();
        total_ = h.total_bytes();
        if (total_ > max_trace_bytes_) {
          return absl::ResourceExhaustedError(absl::StrCat("Capture: agent announced a ", total_,
                                                           "-byte trace; the limit is ",
                                                           max_trace_bytes_));
        }
        stream_->OnHeader(
            {h.start_ns(), h.stop_ns(), total_, h.cancelled(), h.name(), h.hostname()});
        return absl::OkStatus();
      }
      case CaptureChunk::kData: {
        if (!header_ || trailer_) {
          return absl::DataLossError("Capture: agent sent data outside header..trailer");
        }
        const std::string& data = chunk_.data();
        if (data.size() > total_ - received_) {
          return absl::DataLossError(absl::StrCat("Capture: agent sent more than the announced ",
                                                  total_, " bytes (", received_ + data.size(),
                                                  " so far)"));
        }
        received_ += data.size();
        ++chunks_;
        crc32_ = Crc32(crc32_, data);
        return stream_->OnData(data);
      }
      case CaptureChunk::kTrailer:
        if (!header_ || trailer_) {
          return absl::DataLossError("Capture: agent sent a trailer out of order");
        }
        trailer_ = true;
        if (chunk_.trailer().chunks() != chunks_) {
          return absl::DataLossError(absl::StrCat("Capture: agent's trailer counts ",
                                                  chunk_.trailer().chunks(), " chunks, received ",
                                                  chunks_));
        }
        if (chunk_.trailer().has_crc32() && chunk_.trailer().crc32() != crc32_) {
          return absl::DataLossError(
              absl::StrCat("Capture: checksum mismatch: the agent's CRC-32 is ",
                           absl::Hex(chunk_.trailer().crc32(), absl::kZeroPad8), ", the ",
                           received_, " bytes received give ", absl::Hex(crc32_, absl::kZeroPad8),
                           " (corrupted in transit)"));
        }
        return absl::OkStatus();
      case CaptureChunk::PART_NOT_SET:
        break;
    }
    return absl::DataLossError("Capture: agent sent an empty chunk");
  }

  absl::Status Outcome(const grpc::Status& s) const {
    if (!violation_.ok()) return violation_;
    // A stream cut short by the deadline, a dying agent or AbortCapture: the transport's status
    // says why.
    if (!s.ok()) return CallStatus(s, *call_, "Capture");
    // The agent claims success: the stream must then be complete.
    if (!header_) return absl::DataLossError("Capture: stream ended before its header");
    if (!trailer_ || received_ != total_) {
      return absl::DataLossError(
          absl::StrCat("Capture: stream ended after ", received_, " of ", total_, " bytes"));
    }
    return absl::OkStatus();
  }

  CallRegistry* const registry_;
  const std::shared_ptr<CallHandle> call_;
  const uint64_t max_trace_bytes_;
  CaptureStream* const stream_;
  profctl::v1::CaptureRequest request_;
  CaptureChunk chunk_;  // the one chunk being read or handed on
  bool started_ = false;
  bool header_ = false;
  bool trailer_ = false;
  uint64_t total_ = 0;
  uint64_t received_ = 0;
  uint64_t chunks_ = 0;
  uint32_t crc32_ = 0;  // of the data received so far
  absl::Status violation_;
};

class GrpcAgentClient final : public AgentClient {
 public:
  GrpcAgentClient(const WorkerAddress& worker, const GrpcAgentClientOptions& options)
      : max_trace_bytes_(options.max_trace_bytes),
        clock_(options.clock != nullptr ? options.clock : &real_clock_) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(16 << 20);  // chunks are 1 MiB; leave room
    if (options.authority_for_testing) {
      if (std::string authority = options.authority_for_testing(worker); !authority.empty()) {
        args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, authority);
      }
    }
    stub_ = AgentService::NewStub(
        grpc::CreateCustomChannel(worker.target(), grpc::InsecureChannelCredentials(), args));
  }

  ~GrpcAgentClient() override {
    calls_.CancelAll(/*captures_only=*/false, LocalCancel::kClientDestroyed);
    calls_.AwaitIdle();
  }

  GrpcAgentClient(const GrpcAgentClient&) = delete;
  GrpcAgentClient& operator=(const GrpcAgentClient&) = delete;

  void GetInfo(int64_t timeout_ms, Callback<AgentInfo> done) override {
    using Call = UnaryCall<profctl::v1::GetInfoRequest, profctl::v1::GetInfoResponse>;
    StartUnary<Call>(
        timeout_ms, {},
        [this](grpc::ClientContext* ctx, const auto* req, auto* resp, auto cb) {
          stub_->async()->GetInfo(ctx, req, resp, std::move(cb));
        },
        [done = std::move(done)](const grpc::Status& s, Call& call) mutable {
          if (!s.ok()) {
            std::move(done)(CallStatus(s, *call.call, "GetInfo"));
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

  void Capture(const CaptureArgs& args, int64_t timeout_ms, CaptureStream* stream) override {
    auto* call = new CaptureCall(&calls_, calls_.Begin(/*capture=*/true, timeout_ms), args,
                                 max_trace_bytes_, stream);
    call->Start(stub_.get());
  }

  void Cancel(const std::string& session_id, int64_t timeout_ms, DoneCallback done) override {
    using Call = UnaryCall<profctl::v1::CancelRequest, profctl::v1::CancelResponse>;
    profctl::v1::CancelRequest request;
    request.set_session_id(session_id);
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

  const uint64_t max_trace_bytes_;
  const RealClock real_clock_;
  const Clock* const clock_;
  std::unique_ptr<AgentService::Stub> stub_;
  CallRegistry calls_;
};

}  // namespace

std::unique_ptr<AgentClient> GrpcAgentClientFactory::Connect(const WorkerAddress& worker) {
  if (worker.protocol == WorkerAddress::Protocol::kTsl) return MakeTslAgentClient(worker, options_);
  return std::make_unique<GrpcAgentClient>(worker, options_);
}

}  // namespace profctl::coordinator
