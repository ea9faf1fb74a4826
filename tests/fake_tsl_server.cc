#include "tests/fake_tsl_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "tensorflow/profiler/profiler_service.grpc.pb.h"

namespace profctl::testing {
namespace {

int64_t RealNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

class FakeTslServer::Service final : public tensorflow::ProfilerService::Service {
 public:
  explicit Service(FakeTslServerOptions options) : options_(std::move(options)) {}

  grpc::Status Profile(grpc::ServerContext*, const tensorflow::ProfileRequest* request,
                       tensorflow::ProfileResponse* response) override {
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(*request);
    }
    if (options_.busy) {
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "another profiling session is active");
    }
    const bool honour = !options_.ignore_options && request->opts().version() > 0;
    uint64_t duration_ms = request->duration_ms();
    if (honour && request->opts().duration_ms() > 0) duration_ms = request->opts().duration_ms();
    const int64_t skew = options_.job.clock_skew_ns;
    const int64_t now = RealNowNs() + skew;  // this server's clock
    int64_t start = now;
    if (honour && request->opts().start_timestamp_ns() > 0) {
      start = std::max(now, static_cast<int64_t>(request->opts().start_timestamp_ns()));
    }
    {
      absl::MutexLock lock(&mu_);
      last_start_ns_ = start;
    }
    tensorflow::profiler::XSpace space;
    agent::SyntheticJob(options_.job)
        .Generate(start - skew, start - skew + static_cast<int64_t>(duration_ms) * 1'000'000,
                  &space);
    space.add_hostnames("fake-tsl");
    using Shape = FakeTslServerOptions::Shape;
    switch (options_.shape) {
      case Shape::kInlineXSpace:
        if (request->emit_xspace()) {
          *response->mutable_xspace() = std::move(space);
          break;
        }
        [[fallthrough]];
      case Shape::kToolData: {
        tensorflow::ProfileToolData* tool = response->add_tool_data();
        tool->set_name("xplane.pb");
        tool->set_data(space.SerializeAsString());
        break;
      }
      case Shape::kSavedOnDisk: {
        const std::string root = options_.save_root_override.empty() ? request->repository_root()
                                                                     : options_.save_root_override;
        const std::string dir = JoinPath(root, request->session_id());
        if (absl::Status s = MakeDirs(dir); !s.ok()) {
          return grpc::Status(grpc::StatusCode::INTERNAL, std::string(s.message()));
        }
        if (absl::Status s =
                WriteFileAtomically(JoinPath(dir, absl::StrCat(request->host_name(), ".xplane.pb")),
                                    space.SerializeAsString());
            !s.ok()) {
          return grpc::Status(grpc::StatusCode::INTERNAL, std::string(s.message()));
        }
        break;
      }
      case Shape::kEmpty:
        response->set_empty_trace(true);
        return grpc::Status::OK;
    }
    response->set_empty_trace(false);
    return grpc::Status::OK;
  }

  grpc::Status Terminate(grpc::ServerContext*, const tensorflow::TerminateRequest* request,
                         tensorflow::TerminateResponse*) override {
    absl::MutexLock lock(&mu_);
    terminated_.push_back(request->session_id());
    return grpc::Status::OK;
  }

  grpc::Status Monitor(grpc::ServerContext*, const tensorflow::MonitorRequest*,
                       tensorflow::MonitorResponse*) override {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "Monitor is not implemented");
  }

  mutable absl::Mutex mu_;
  std::vector<tensorflow::ProfileRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> terminated_ ABSL_GUARDED_BY(mu_);
  int64_t last_start_ns_ ABSL_GUARDED_BY(mu_) = 0;

 private:
  const FakeTslServerOptions options_;
};

FakeTslServer::FakeTslServer(FakeTslServerOptions options)
    : service_(std::make_unique<Service>(std::move(options))) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.SetMaxSendMessageSize(INT32_MAX);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
}

FakeTslServer::~FakeTslServer() {
  if (server_ != nullptr) server_->Shutdown();
}

std::vector<tensorflow::ProfileRequest> FakeTslServer::requests() const {
  absl::MutexLock lock(&service_->mu_);
  return service_->requests_;
}

std::vector<std::string> FakeTslServer::terminated() const {
  absl::MutexLock lock(&service_->mu_);
  return service_->terminated_;
}

int64_t FakeTslServer::last_start_ns() const {
  absl::MutexLock lock(&service_->mu_);
  return service_->last_start_ns_;
}

}  // namespace profctl::testing
