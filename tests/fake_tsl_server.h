// A test-only tensorflow.ProfilerService server on loopback, shaped like the TensorFlow/JAX/TSL
// servers profctl must capture (TSL_WIRE.md): it answers Profile in one of the three shapes real
// servers use, with the old (version 0: options ignored) or new option semantics, and reports
// itself busy on demand. It "records" at once: the answer is a synthetic job's trace for the
// window the request asked for (start_timestamp_ns on its own, skewed clock; now when 0 or
// ignored), so tests need no real waiting. Monitor answers UNIMPLEMENTED, as open-source servers
// do.
#ifndef PROFCTL_TESTS_FAKE_TSL_SERVER_H_
#define PROFCTL_TESTS_FAKE_TSL_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/collectors/synthetic_job.h"
#include "tensorflow/profiler/profiler_service.pb.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace profctl::testing {

struct FakeTslServerOptions {
  enum class Shape {
    kInlineXSpace,  // `xspace` when emit_xspace is set (newest servers), else as kToolData
    kToolData,      // tool_data {name: "xplane.pb"} (TensorFlow 2.x)
    kSavedOnDisk,   // writes <repository_root>/<session_id>/<host_name>.xplane.pb, answers only
                    // empty_trace=false (servers that can only save)
    kEmpty,         // empty_trace=true
  };
  Shape shape = Shape::kInlineXSpace;
  // Old servers: treat every request as version 0 (opts ignored: start now, request duration_ms).
  bool ignore_options = false;
  // Answer ALREADY_EXISTS (another session is running).
  bool busy = false;
  // The job this server's process runs; job.clock_skew_ns is its clock's offset from true time.
  agent::SyntheticJobConfig job;
  // Where kSavedOnDisk writes instead of the request's repository_root ("" = the request's).
  std::string save_root_override = {};
};

class FakeTslServer {
 public:
  explicit FakeTslServer(FakeTslServerOptions options);
  ~FakeTslServer();
  FakeTslServer(const FakeTslServer&) = delete;
  FakeTslServer& operator=(const FakeTslServer&) = delete;

  int port() const { return port_; }
  // Every Profile request received, in order.
  std::vector<tensorflow::ProfileRequest> requests() const;
  std::vector<std::string> terminated() const;
  // The window of the last trace answered, on the server's (skewed) clock.
  int64_t last_start_ns() const;

  class Service;

 private:
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace profctl::testing

#endif  // PROFCTL_TESTS_FAKE_TSL_SERVER_H_
