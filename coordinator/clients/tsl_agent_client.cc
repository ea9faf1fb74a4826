#include "coordinator/clients/tsl_agent_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "coordinator/clients/grpc_calls.h"
#include "tensorflow/profiler/profiler_service.grpc.pb.h"
#include "xspace/xspace.h"

namespace profctl::coordinator {
namespace {

using grpc_calls::CallRegistry;
using grpc_calls::CallStatus;
using grpc_calls::LocalCancel;
using grpc_calls::UnaryCall;
using tensorflow::ProfilerService;

constexpr size_t kChunkBytes = 1 << 20;

class TslAgentClient final : public AgentClient {
 public:
  TslAgentClient(WorkerAddress worker, const GrpcAgentClientOptions& options)
      : worker_(std::move(worker)),
        max_trace_bytes_(options.max_trace_bytes),
        clock_(options.clock != nullptr ? options.clock : &real_clock_) {
    grpc::ChannelArguments args;
    // The whole XSpace comes in one message (TSL's protocol): allow up to the trace limit.
    args.SetMaxReceiveMessageSize(
        static_cast<int>(std::min<uint64_t>(max_trace_bytes_ + (1 << 20), INT_MAX)));
    if (options.authority_for_testing) {
      if (std::string authority = options.authority_for_testing(worker_); !authority.empty()) {
        args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, authority);
      }
    }
    stub_ = ProfilerService::NewStub(grpc::CreateCustomChannel(
        worker_.channel_target(), grpc::InsecureChannelCredentials(), args));
  }

  ~TslAgentClient() override {
    calls_.CancelAll(/*captures_only=*/false, LocalCancel::kClientDestroyed);
    calls_.AwaitIdle();
  }

  TslAgentClient(const TslAgentClient&) = delete;
  TslAgentClient& operator=(const TslAgentClient&) = delete;

  bool MeasuresClock() const override { return false; }

  // A TSL server cannot reserve: the reservation is ignored.
  void GetInfo(const Reservation& /*reserve*/, int64_t timeout_ms,
               Callback<AgentInfo> done) override {
    Probe(timeout_ms, [worker = worker_, done = std::move(done)](absl::Status s) mutable {
      if (!s.ok()) {
        std::move(done)(std::move(s));
        return;
      }
      AgentInfo info;
      info.name = worker.address;
      info.hostname = worker.host;
      info.version = std::string(kTslAgentVersion);
      info.collectors = {"tsl"};
      std::move(done)(std::move(info));
    });
  }

  void SyncClock(int64_t timeout_ms, Callback<ClockReading> done) override {
    Probe(timeout_ms, [done = std::move(done)](absl::Status s) mutable {
      if (s.ok()) {
        s = absl::UnimplementedError(
            "SyncClock: a TSL profiler server's clock cannot be measured by RPC");
      }
      std::move(done)(std::move(s));
    });
  }

  void Capture(const CaptureArgs& args, int64_t timeout_ms, CaptureStream* stream) override {
    using Call = UnaryCall<tensorflow::ProfileRequest, tensorflow::ProfileResponse>;
    const int64_t duration_ns = args.duration_ms * 1'000'000;
    const int64_t start_at_ns = args.start_at_ns;
    grpc_calls::StartUnary<Call>(
        &calls_, clock_, timeout_ms, MakeTslProfileRequest(args, worker_),
        [this](grpc::ClientContext* ctx, const auto* req, auto* resp, auto cb) {
          stub_->async()->Profile(ctx, req, resp, std::move(cb));
        },
        [this, stream, start_at_ns, duration_ns](const grpc::Status& s, Call& call) {
          if (!s.ok()) {
            stream->OnDone(CallStatus(s, *call.call, "Profile"));
            return;
          }
          Deliver(call.request, call.response, start_at_ns, duration_ns, stream);
        },
        /*capture=*/true);
  }

  // TSL's Terminate has no key: any client may stop a session there.
  void Cancel(const std::string& session_id, const std::string& /*session_key*/, int64_t timeout_ms,
              DoneCallback done) override {
    using Call = UnaryCall<tensorflow::TerminateRequest, tensorflow::TerminateResponse>;
    tensorflow::TerminateRequest request;
    request.set_session_id(session_id);
    grpc_calls::StartUnary<Call>(
        &calls_, clock_, timeout_ms, std::move(request),
        [this](grpc::ClientContext* ctx, const auto* req, auto* resp, auto cb) {
          stub_->async()->Terminate(ctx, req, resp, std::move(cb));
        },
        [done = std::move(done)](const grpc::Status& s, Call& call) mutable {
          std::move(done)(CallStatus(s, *call.call, "Terminate"));
        });
  }

  void AbortCapture() override {
    calls_.CancelAll(/*captures_only=*/true, LocalCancel::kAbortCapture);
  }

 private:
  // One Monitor round trip; OK when the server answered at all (UNIMPLEMENTED included).
  void Probe(int64_t timeout_ms, absl::AnyInvocable<void(absl::Status) &&> done) {
    using Call = UnaryCall<tensorflow::MonitorRequest, tensorflow::MonitorResponse>;
    grpc_calls::StartUnary<Call>(
        &calls_, clock_, timeout_ms, {},
        [this](grpc::ClientContext* ctx, const auto* req, auto* resp, auto cb) {
          stub_->async()->Monitor(ctx, req, resp, std::move(cb));
        },
        [done = std::move(done)](const grpc::Status& s, Call& call) mutable {
          if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
            std::move(done)(absl::OkStatus());
            return;
          }
          std::move(done)(CallStatus(s, *call.call, "Monitor"));
        });
  }

  // Hands a Profile answer to the stream as a Capture would arrive.
  void Deliver(const tensorflow::ProfileRequest& request,
               const tensorflow::ProfileResponse& response, int64_t start_at_ns,
               int64_t duration_ns, CaptureStream* stream) const {
    std::string shape;
    absl::StatusOr<std::string> bytes = TraceFromProfileResponse(response, request, &shape);
    if (!bytes.ok()) {
      stream->OnDone(bytes.status());
      return;
    }
    // A server that could only save wrote into the session folder, under the name TensorBoard
    // lists (*.xplane.pb). Its copy must not stay there beside ours: once the bytes are in the
    // stream it is removed (the session writes them again under the same name, or as
    // `.invalid` when they are rejected); when we refuse them here it is renamed `.invalid`.
    const std::string server_copy =
        response.has_xspace() || !shape.starts_with("saved by the server")
            ? ""
            : JoinPath(JoinPath(request.repository_root(), request.session_id()),
                       absl::StrCat(request.host_name(), ".", tsl::kTslXPlaneTool));
    auto refuse = [&](absl::Status status) {
      if (!server_copy.empty() &&
          std::rename(server_copy.c_str(), (server_copy + ".invalid").c_str()) == 0) {
        status = absl::Status(status.code(), absl::StrCat(status.message(),
                                                          "; the server's copy "
                                                          "was renamed ",
                                                          server_copy, ".invalid"));
      }
      stream->OnDone(std::move(status));
    };
    if (bytes->size() > max_trace_bytes_) {
      refuse(absl::ResourceExhaustedError(absl::StrCat("Profile: the server sent a ", bytes->size(),
                                                       "-byte trace; the limit is ",
                                                       max_trace_bytes_)));
      return;
    }
    // The recorded window, when the server says (TSL's Task Environment plane); else the one
    // asked for. A trace whose lines are absolute (no profile start) is re-based onto the window
    // asked for by the rule the agent's tsl collector uses (tsl::RebaseTslSpace), so both paths
    // accept the same answers.
    int64_t start_ns = start_at_ns;
    int64_t stop_ns = start_at_ns + duration_ns;
    tensorflow::profiler::XSpace window;
    if (response.has_xspace() || window.ParseFromString(*bytes)) {
      const tensorflow::profiler::XSpace& space =
          response.has_xspace() ? response.xspace() : window;
      if (const int64_t s = xspace::ProfileStartNs(space); s > 0) {
        start_ns = s;
        stop_ns = std::max(s, xspace::ProfileStopNs(space).value_or(s + duration_ns));
      } else if (start_at_ns > 0) {
        if (response.has_xspace()) window = response.xspace();
        if (absl::Status rebased = tsl::RebaseTslSpace(&window, start_at_ns, /*clock_skew_ns=*/0);
            !rebased.ok()) {
          refuse(
              absl::InvalidArgumentError(absl::StrCat("Profile: the server ", rebased.message())));
          return;
        }
        xspace::SetProfileWindow(&window, start_ns, stop_ns);
        bytes = window.SerializeAsString();
      }
    }
    window.Clear();
    stream->OnStarted(start_ns);
    stream->OnHeader(
        {start_ns, stop_ns, bytes->size(), /*cancelled=*/false, worker_.address, worker_.host});
    for (size_t at = 0; at < bytes->size(); at += kChunkBytes) {
      const std::string_view chunk =
          std::string_view(*bytes).substr(at, std::min(kChunkBytes, bytes->size() - at));
      if (absl::Status s = stream->OnData(chunk); !s.ok()) {
        stream->OnDone(std::move(s));
        return;
      }
    }
    // Before OnDone: the session may commit its own copy under the same name as soon as it runs.
    if (!server_copy.empty()) std::remove(server_copy.c_str());
    stream->OnDone(absl::OkStatus());
  }

  const WorkerAddress worker_;
  const uint64_t max_trace_bytes_;
  const RealClock real_clock_;
  const Clock* const clock_;
  std::unique_ptr<ProfilerService::Stub> stub_;
  CallRegistry calls_;
};

}  // namespace

tensorflow::ProfileRequest MakeTslProfileRequest(const CaptureArgs& args,
                                                 const WorkerAddress& worker) {
  return tsl::MakeTslProfileRequest({.session_id = args.session_id,
                                     .start_at_ns = args.start_at_ns,
                                     .duration_ms = args.duration_ms,
                                     .host_name = worker.file_stem(),
                                     .repository_root = args.repository_root,
                                     .tracer_levels = args.tracer_levels});
}

std::unique_ptr<AgentClient> MakeTslAgentClient(const WorkerAddress& worker,
                                                const GrpcAgentClientOptions& options) {
  return std::make_unique<TslAgentClient>(worker, options);
}

}  // namespace profctl::coordinator
