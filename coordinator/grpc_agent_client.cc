#include "coordinator/grpc_agent_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "profctl/v1/agent.grpc.pb.h"

namespace profctl::coordinator {
namespace {

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

void SetDeadline(grpc::ClientContext* ctx, int64_t timeout_ms) {
  // gRPC deadlines are real time by nature; this transport is the one place that reads it.
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
}

class GrpcAgentClient final : public AgentClient {
 public:
  GrpcAgentClient(const WorkerAddress& worker, GrpcAgentClientOptions options) : options_(options) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(16 << 20);  // chunks are 1 MiB; leave room
    stub_ = profctl::v1::AgentService::NewStub(
        grpc::CreateCustomChannel(worker.target(), grpc::InsecureChannelCredentials(), args));
  }

  absl::StatusOr<AgentInfo> GetInfo(int64_t timeout_ms) override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, timeout_ms);
    profctl::v1::GetInfoResponse resp;
    if (grpc::Status s = stub_->GetInfo(&ctx, {}, &resp); !s.ok()) return FromGrpc(s, "GetInfo");
    AgentInfo info{resp.name(),
                   resp.hostname(),
                   resp.version(),
                   {resp.collectors().begin(), resp.collectors().end()},
                   static_cast<int64_t>(resp.max_duration_ms()),
                   resp.busy()};
    return info;
  }

  absl::StatusOr<ClockReading> SyncClock(int64_t timeout_ms) override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, timeout_ms);
    profctl::v1::SyncClockResponse resp;
    if (grpc::Status s = stub_->SyncClock(&ctx, {}, &resp); !s.ok()) {
      return FromGrpc(s, "SyncClock");
    }
    return ClockReading{resp.receive_ns(), resp.send_ns()};
  }

  absl::StatusOr<CaptureReply> Capture(const CaptureArgs& args, int64_t timeout_ms) override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, timeout_ms);
    profctl::v1::CaptureRequest req;
    req.set_session_id(args.session_id);
    req.set_start_at_ns(args.start_at_ns);
    req.set_duration_ms(static_cast<uint64_t>(args.duration_ms));
    std::unique_ptr<grpc::ClientReader<profctl::v1::CaptureChunk>> reader =
        stub_->Capture(&ctx, req);
    CaptureReply reply;
    StreamState stream;
    // A protocol violation seen while reading is the agent's fault: report it, not our cancel.
    const absl::Status violation = ReadStream(reader.get(), &reply, &stream);
    if (!violation.ok()) ctx.TryCancel();
    const grpc::Status s = reader->Finish();
    if (!violation.ok()) return violation;
    // A stream cut short by the deadline or a dying agent: the transport's status says why.
    if (!s.ok()) return FromGrpc(s, "Capture");
    // The agent claims success: the stream must then be complete.
    if (!stream.header) return absl::DataLossError("Capture: stream ended before its header");
    if (!stream.trailer || reply.xspace_bytes.size() != stream.total) {
      return absl::DataLossError(absl::StrCat("Capture: stream ended after ",
                                              reply.xspace_bytes.size(), " of ", stream.total,
                                              " bytes"));
    }
    return reply;
  }

  absl::Status Cancel(const std::string& session_id, int64_t timeout_ms) override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, timeout_ms);
    profctl::v1::CancelRequest req;
    req.set_session_id(session_id);
    profctl::v1::CancelResponse resp;
    return FromGrpc(stub_->Cancel(&ctx, req, &resp), "Cancel");
  }

 private:
  struct StreamState {
    bool header = false;
    bool trailer = false;
    uint64_t total = 0;
  };

  // Reads chunks until the stream ends; returns the first protocol violation (out-of-order
  // parts, more bytes than announced, a wrong chunk count, an oversized trace).
  absl::Status ReadStream(grpc::ClientReader<profctl::v1::CaptureChunk>* reader,
                          CaptureReply* reply, StreamState* st) {
    profctl::v1::CaptureChunk chunk;
    uint64_t chunks = 0;
    while (reader->Read(&chunk)) {
      switch (chunk.part_case()) {
        case profctl::v1::CaptureChunk::kHeader: {
          if (st->header) return absl::DataLossError("Capture: agent sent a second header");
          st->header = true;
          const auto& h = chunk.header();
          st->total = h.total_bytes();
          if (st->total > options_.max_trace_bytes) {
            return absl::ResourceExhaustedError(
                absl::StrCat("Capture: agent announced a ", st->total, "-byte trace; the limit is ",
                             options_.max_trace_bytes));
          }
          reply->xspace_bytes.reserve(st->total);
          reply->start_ns = h.start_ns();
          reply->stop_ns = h.stop_ns();
          reply->cancelled = h.cancelled();
          reply->name = h.name();
          reply->hostname = h.hostname();
          break;
        }
        case profctl::v1::CaptureChunk::kData:
          if (!st->header || st->trailer) {
            return absl::DataLossError("Capture: agent sent data outside header..trailer");
          }
          if (reply->xspace_bytes.size() + chunk.data().size() > st->total) {
            return absl::DataLossError(
                absl::StrCat("Capture: agent sent more than the announced ", st->total, " bytes"));
          }
          reply->xspace_bytes.append(chunk.data());
          ++chunks;
          break;
        case profctl::v1::CaptureChunk::kTrailer:
          if (!st->header || st->trailer) {
            return absl::DataLossError("Capture: agent sent a trailer out of order");
          }
          st->trailer = true;
          if (chunk.trailer().chunks() != chunks) {
            return absl::DataLossError(absl::StrCat("Capture: agent's trailer counts ",
                                                    chunk.trailer().chunks(), " chunks, received ",
                                                    chunks));
          }
          break;
        default:
          return absl::DataLossError("Capture: agent sent an empty chunk");
      }
    }
    return absl::OkStatus();
  }

  GrpcAgentClientOptions options_;
  std::unique_ptr<profctl::v1::AgentService::Stub> stub_;
};

}  // namespace

std::unique_ptr<AgentClient> GrpcAgentClientFactory::Connect(const WorkerAddress& worker) {
  return std::make_unique<GrpcAgentClient>(worker, options_);
}

}  // namespace profctl::coordinator
