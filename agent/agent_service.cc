#include "agent/agent_service.h"

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/post.hpp"
#include "common/version.h"
#include "spdlog/spdlog.h"

namespace profctl::agent {
namespace {

using profctl::v1::CaptureChunk;

// Streams one capture: header, data chunks, trailer. Lifetime: created by Capture(), deleted in
// OnDone() (which gRPC calls only after Finish()). Finish() is called exactly once, either at
// once (rejected request) or after the capture ran on the executor and was written or failed.
class CaptureReactor final : public grpc::ServerWriteReactor<CaptureChunk> {
 public:
  CaptureReactor(CaptureManager* manager, boost::asio::thread_pool* executor,
                 const profctl::v1::CaptureRequest& request, const AgentServiceOptions& options)
      : options_(options) {
    CaptureSpec spec{request.session_id(),
                     request.start_at_ns(),
                     static_cast<int64_t>(std::min<uint64_t>(request.duration_ms(), INT64_MAX)),
                     {request.collectors().begin(), request.collectors().end()}};
    absl::StatusOr<std::unique_ptr<CaptureManager::Session>> session =
        manager->Begin(std::move(spec));
    if (!session.ok()) {
      spdlog::info("capture '{}' rejected: {}", request.session_id(), session.status().ToString());
      Finish(ToGrpcStatus(session.status()));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      session_ = std::move(*session);
    }
    spdlog::info("capture '{}' accepted: start_at={} duration={} ms", request.session_id(),
                 request.start_at_ns(), request.duration_ms());
    boost::asio::post(*executor, [this] { RunCapture(); });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away during transfer"));
      return;
    }
    WriteNext();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (session_ != nullptr) session_->Stop();
  }

  void OnDone() override { delete this; }

 private:
  void RunCapture() {
    CaptureManager::Session* session;
    {
      absl::MutexLock lock(&mu_);
      session = session_.get();
    }
    CaptureResult result = session->Run();
    bool cancelled;
    {
      absl::MutexLock lock(&mu_);
      session_.reset();  // frees the agent for the next capture while this one streams back
      cancelled = cancelled_;
    }
    // Finish() and StartWrite() are called without mu_ held: gRPC may run OnDone() (which
    // deletes this reactor) as soon as Finish() is called.
    if (cancelled) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "capture cancelled by the client"));
      return;
    }
    data_ = result.space.SerializeAsString();
    spdlog::info("capture '{}' done: {} bytes{}", result.session_id, data_.size(),
                 result.cancelled ? " (cancelled early)" : "");
    auto* header = chunk_.mutable_header();
    header->set_session_id(result.session_id);
    header->set_start_ns(result.start_ns);
    header->set_stop_ns(result.stop_ns);
    header->set_total_bytes(data_.size());
    header->set_cancelled(result.cancelled);
    header->set_name(options_.name);
    header->set_hostname(options_.hostname);
    StartWrite(&chunk_);
  }

  // Called after each completed write, on a gRPC thread; never blocks.
  void WriteNext() {
    chunk_.Clear();
    if (offset_ < data_.size()) {
      const size_t n = std::min(options_.chunk_bytes, data_.size() - offset_);
      chunk_.set_data(data_.substr(offset_, n));
      offset_ += n;
      ++chunks_;
      StartWrite(&chunk_);
    } else if (!trailer_sent_) {
      trailer_sent_ = true;
      chunk_.mutable_trailer()->set_chunks(chunks_);
      StartWrite(&chunk_);
    } else {
      Finish(grpc::Status::OK);
    }
  }

  const AgentServiceOptions& options_;
  absl::Mutex mu_;
  std::unique_ptr<CaptureManager::Session> session_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  // Touched by one write at a time (gRPC serializes OnWriteDone with StartWrite).
  std::string data_;
  size_t offset_ = 0;
  uint64_t chunks_ = 0;
  bool trailer_sent_ = false;
  CaptureChunk chunk_;
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

AgentServiceImpl::AgentServiceImpl(CaptureManager* manager, const Clock* clock,
                                   boost::asio::thread_pool* executor, AgentServiceOptions options)
    : manager_(manager), clock_(clock), executor_(executor), options_(std::move(options)) {}

grpc::ServerUnaryReactor* AgentServiceImpl::GetInfo(grpc::CallbackServerContext* ctx,
                                                    const profctl::v1::GetInfoRequest* /*request*/,
                                                    profctl::v1::GetInfoResponse* response) {
  response->set_name(options_.name);
  response->set_hostname(options_.hostname);
  response->set_version(kVersion);
  for (const std::string& c : manager_->collector_names()) response->add_collectors(c);
  response->set_max_duration_ms(static_cast<uint64_t>(manager_->options().max_duration_ms));
  response->set_busy(manager_->busy());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* AgentServiceImpl::SyncClock(
    grpc::CallbackServerContext* ctx, const profctl::v1::SyncClockRequest* /*request*/,
    profctl::v1::SyncClockResponse* response) {
  response->set_receive_ns(clock_->WallNs());
  response->set_send_ns(clock_->WallNs());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<CaptureChunk>* AgentServiceImpl::Capture(
    grpc::CallbackServerContext* /*ctx*/, const profctl::v1::CaptureRequest* request) {
  return new CaptureReactor(manager_, executor_, *request, options_);
}

grpc::ServerUnaryReactor* AgentServiceImpl::Cancel(grpc::CallbackServerContext* ctx,
                                                   const profctl::v1::CancelRequest* request,
                                                   profctl::v1::CancelResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(manager_->Cancel(request->session_id())));
  return reactor;
}

}  // namespace profctl::agent
