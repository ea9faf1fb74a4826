// A test-only tensorflow.ProfilerService server on loopback, shaped like the TensorFlow/JAX/TSL
// servers profctl must capture (TSL_WIRE.md): it answers Profile in one of the three shapes real
// servers use, with the old (version 0: options ignored) or new option semantics, and reports
// itself busy on demand. It "records" at once: the answer is a synthetic job's trace for the
// window the request asked for (start_timestamp_ns on its own, skewed clock; now when 0 or
// ignored), so tests need no real waiting. Monitor answers UNIMPLEMENTED, as open-source servers
// do. For the agent's tsl collector it can also hold its answer until Terminate (a server still
// recording, or a slow one), add TPU-like planes, and write absolute line timestamps.
#ifndef PROFCTL_TESTS_FAKE_TSL_SERVER_H_
#define PROFCTL_TESTS_FAKE_TSL_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "synthetic/synthetic_job.h"
#include "tensorflow/profiler/profiler_service.pb.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace profctl::testkit {

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
  synthetic::SyntheticJobConfig job;
  // Where kSavedOnDisk writes instead of the request's repository_root ("" = the request's).
  std::string save_root_override = {};
  // The host clock this server reads (null: the real one); its own clock is that plus
  // job.clock_skew_ns. Not owned.
  const Clock* clock = nullptr;
  // Also record what a JAX process on a TPU host adds: planes /device:TPU:0 and /device:TPU:1
  // (ids 1 and 2) with `XLA Modules` and `XLA Ops` lines (op metadata with stats, events with ref
  // stats) and an input-pipeline thread (line kTpuHostLineId) on /host:CPU.
  bool tpu_planes = false;
  // Line timestamps absolute (ns since the epoch on this server's clock) and no `Task
  // Environment` plane, as older writers do.
  bool absolute_line_times = false;
  // A broken writer: relative line timestamps but no `Task Environment` plane to say from when.
  bool drop_task_environment = false;
  // Hold each Profile answer until Terminate(its session id) arrives (then the window ends at
  // that instant on this server's clock), ReleaseHeld() is called or the server goes away: a
  // server still recording its window, or a slow one.
  bool hold = false;
  // A stale answer: the trace of a window this much later (negative: earlier) than the one asked
  // for, as a server answering with an old recording does.
  int64_t stale_by_ns = 0;
  // Answer with this recorded trace (a real framework server's, e.g. the JAX fixture) in place of
  // the synthetic job's, as if it had been recorded over the window asked for: its Task
  // Environment says that window (TSL's line timestamps are relative to it, so every event moves
  // with it). Not owned; outlives the server.
  const tensorflow::profiler::XSpace* replay = nullptr;
};

inline constexpr int64_t kTpuHostLineId = 7001;

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
  int64_t last_stop_ns() const;
  // The last trace answered, before it was put into the answer's shape.
  tensorflow::profiler::XSpace last_space() const;
  // Block until `n` Profile requests, or `n` Terminate requests, have arrived.
  void AwaitRequests(size_t n) const;
  void AwaitTerminated(size_t n) const;
  // Blocks until `n` Profile calls are being held (hold mode).
  void AwaitHeld(int n) const;
  // Lets every held Profile answer now, with its whole window.
  void ReleaseHeld();

  class Service;

 private:
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_FAKE_TSL_SERVER_H_
