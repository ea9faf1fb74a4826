#include "tests/fake_tsl_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "tensorflow/profiler/profiler_service.grpc.pb.h"
#include "tests/test_time.h"
#include "xspace/xspace.h"

namespace profctl::testkit {
namespace {

int64_t RealNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

using ::profctl::test_time::kMs;

// What a JAX process on a TPU host adds to its trace for [start_ns, stop_ns) on its own clock
// (the profile start is start_ns): per TPU core a plane with one jitted module every 10 ms on
// `XLA Modules` and its ops on `XLA Ops` (op metadata carrying stats, events with ref stats as
// TSL interns strings), and an input-pipeline thread on /host:CPU.
void AddTpuPlanes(int64_t start_ns, int64_t stop_ns, tensorflow::profiler::XSpace* space) {
  using xspace::XPlaneBuilder;
  struct Op {
    const char* name;
    const char* category;
    int64_t flops;
    int64_t duration_ns;
  };
  constexpr Op kOps[] = {{"fusion.1", "loop fusion", 1'000'000, 2 * kMs},
                         {"convolution.2", "convolution", 90'000'000, 4 * kMs},
                         {"all-reduce.3", "all-reduce", 0, 1 * kMs}};
  constexpr int64_t kPeriod = 10 * kMs;
  for (int64_t core = 0; core < 2; ++core) {
    XPlaneBuilder tpu(space->add_planes(), core + 1, absl::StrCat(xspace::kTpuPlanePrefix, core),
                      start_ns);
    tensorflow::profiler::XLine* modules = tpu.AddLine(1, "XLA Modules", start_ns);
    tensorflow::profiler::XLine* ops = tpu.AddLine(2, "XLA Ops", start_ns);
    const int64_t module_id = tpu.EventMetadataId("jit_train_step(42)");
    const int64_t hlo_module = tpu.StatMetadataId("hlo_module");
    const int64_t hlo_op = tpu.StatMetadataId("hlo_op");
    const int64_t program_id = tpu.StatMetadataId("program_id");
    const int64_t category = tpu.StatMetadataId("hlo_category");
    const int64_t flops = tpu.StatMetadataId("flops");
    const int64_t module_name = tpu.StatMetadataId("jit_train_step");
    for (int64_t t = start_ns + core * kMs; t + kPeriod <= stop_ns; t += kPeriod) {
      tensorflow::profiler::XEvent* m = tpu.AddEvent(modules, module_id, t, 8 * kMs);
      tpu.AddStat(m, program_id, int64_t{42});
      tensorflow::profiler::XStat* ref = m->add_stats();
      ref->set_metadata_id(hlo_module);
      ref->set_ref_value(static_cast<uint64_t>(module_name));
      int64_t at = t;
      for (const Op& op : kOps) {
        const int64_t id = tpu.EventMetadataId(op.name);
        tensorflow::profiler::XEventMetadata& md = (*tpu.plane()->mutable_event_metadata())[id];
        if (md.stats().empty()) {
          tensorflow::profiler::XStat* c = md.add_stats();
          c->set_metadata_id(category);
          c->set_str_value(op.category);
          tensorflow::profiler::XStat* f = md.add_stats();
          f->set_metadata_id(flops);
          f->set_int64_value(op.flops);
        }
        tensorflow::profiler::XEvent* e = tpu.AddEvent(ops, id, at, op.duration_ns);
        tensorflow::profiler::XStat* op_ref = e->add_stats();
        op_ref->set_metadata_id(hlo_op);
        op_ref->set_ref_value(static_cast<uint64_t>(tpu.StatMetadataId(op.name)));
        at += op.duration_ns;
      }
    }
  }
  tensorflow::profiler::XPlane* host = nullptr;
  for (tensorflow::profiler::XPlane& p : *space->mutable_planes()) {
    if (p.name() == xspace::kHostPlaneName) host = &p;
  }
  if (host == nullptr) host = space->add_planes();
  XPlaneBuilder h(host, host->id() != 0 ? host->id() : 49, xspace::kHostPlaneName, start_ns);
  tensorflow::profiler::XLine* line = h.AddLine(kTpuHostLineId, "tf_data_iterator", start_ns);
  const int64_t get_next = h.EventMetadataId("IteratorGetNext");
  const int64_t element = h.StatMetadataId("element_id");
  for (int64_t t = start_ns, i = 0; t + 3 * kMs <= stop_ns; t += kPeriod, ++i) {
    h.AddStat(h.AddEvent(line, get_next, t, 3 * kMs), element, i);
  }
}

void DropTaskEnvironment(tensorflow::profiler::XSpace* space) {
  auto* planes = space->mutable_planes();
  for (int i = planes->size() - 1; i >= 0; --i) {
    if (planes->Get(i).name() == xspace::kTaskEnvPlaneName) planes->DeleteSubrange(i, 1);
  }
}

// Line timestamps made absolute on the recording clock; the Task Environment plane dropped.
void MakeLineTimesAbsolute(tensorflow::profiler::XSpace* space) {
  const int64_t start = xspace::ProfileStartNs(*space);
  DropTaskEnvironment(space);
  for (tensorflow::profiler::XPlane& p : *space->mutable_planes()) {
    for (tensorflow::profiler::XLine& l : *p.mutable_lines()) {
      l.set_timestamp_ns(l.timestamp_ns() + start);
    }
  }
}

}  // namespace

class FakeTslServer::Service final : public tensorflow::ProfilerService::Service {
 public:
  explicit Service(FakeTslServerOptions options) : options_(std::move(options)) {}

  grpc::Status Profile(grpc::ServerContext*, const tensorflow::ProfileRequest* request,
                       tensorflow::ProfileResponse* response) override {
    // Read the clock before the request counts as received (AwaitRequests), so a test that
    // moves a fake clock after that cannot move this server's start.
    const int64_t now = NowNs();  // this server's clock
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
    int64_t start = now;
    if (honour && request->opts().start_timestamp_ns() > 0) {
      start = std::max(now, static_cast<int64_t>(request->opts().start_timestamp_ns()));
    }
    start += options_.stale_by_ns;
    int64_t stop = start + static_cast<int64_t>(duration_ms) * kMs;
    if (options_.hold) {
      const std::string id =
          request->session_id().empty() ? request->opts().session_id() : request->session_id();
      absl::MutexLock lock(&mu_);
      ++held_;
      auto answer_now = [this, &id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return released_ ||
               std::find(terminated_.begin(), terminated_.end(), id) != terminated_.end();
      };
      mu_.Await(absl::Condition(&answer_now));
      --held_;
      if (std::find(terminated_.begin(), terminated_.end(), id) != terminated_.end()) {
        stop = std::max(start, std::min(stop, NowNs()));
      }
    }
    const int64_t skew = options_.job.clock_skew_ns;
    tensorflow::profiler::XSpace space;
    if (options_.replay != nullptr) {
      space = *options_.replay;
      xspace::SetProfileWindow(&space, start, stop);
    } else {
      synthetic::SyntheticJob(options_.job).Generate(start - skew, stop - skew, &space);
    }
    if (options_.tpu_planes) AddTpuPlanes(start, stop, &space);
    if (options_.absolute_line_times) MakeLineTimesAbsolute(&space);
    if (options_.drop_task_environment) DropTaskEnvironment(&space);
    space.add_hostnames("fake-tsl");
    {
      absl::MutexLock lock(&mu_);
      last_start_ns_ = start;
      last_stop_ns_ = stop;
      last_space_ = space;
    }
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

  // This server's clock.
  int64_t NowNs() const {
    return (options_.clock != nullptr ? options_.clock->WallNs() : RealNowNs()) +
           options_.job.clock_skew_ns;
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
  int64_t last_stop_ns_ ABSL_GUARDED_BY(mu_) = 0;
  tensorflow::profiler::XSpace last_space_ ABSL_GUARDED_BY(mu_);
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;

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
  ReleaseHeld();  // else Shutdown would wait for the held calls forever
  if (server_ != nullptr) server_->Shutdown();
}

void FakeTslServer::ReleaseHeld() {
  absl::MutexLock lock(&service_->mu_);
  service_->released_ = true;
}

void FakeTslServer::AwaitRequests(size_t n) const {
  const Service* service = service_.get();
  absl::MutexLock lock(&service->mu_);
  auto enough = [service, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(service->mu_) {
    return service->requests_.size() >= n;
  };
  service->mu_.Await(absl::Condition(&enough));
}

void FakeTslServer::AwaitTerminated(size_t n) const {
  const Service* service = service_.get();
  absl::MutexLock lock(&service->mu_);
  auto enough = [service, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(service->mu_) {
    return service->terminated_.size() >= n;
  };
  service->mu_.Await(absl::Condition(&enough));
}

void FakeTslServer::AwaitHeld(int n) const {
  const Service* service = service_.get();
  absl::MutexLock lock(&service->mu_);
  auto enough = [service, n]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(service->mu_) { return service->held_ >= n; };
  service->mu_.Await(absl::Condition(&enough));
}

int64_t FakeTslServer::last_stop_ns() const {
  absl::MutexLock lock(&service_->mu_);
  return service_->last_stop_ns_;
}

tensorflow::profiler::XSpace FakeTslServer::last_space() const {
  absl::MutexLock lock(&service_->mu_);
  return service_->last_space_;
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

}  // namespace profctl::testkit
