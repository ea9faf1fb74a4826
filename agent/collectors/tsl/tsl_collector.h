// The `tsl` collector: TPU and framework activity through the agent.
//
// TPU activity can only be recorded inside the process that owns the TPU (libtpu), which for
// JAX/TensorFlow is the framework's own profiler server (`jax.profiler.start_server(9999)`,
// `tf.profiler.experimental.server.start(6000)`). During the agent's window this collector
// captures such servers on this host (--tsl-local) through tensorflow.ProfilerService and merges
// their planes (/device:TPU:<n>, /device:GPU:<n>, /host:CPU threads, XLA Ops/XLA Modules lines)
// into the host's XSpace beside the other collectors' (xspace/xspace_merge.h), re-based onto the
// session's profile start. docs/tensorflow-interop.md, "The agent's tsl collector".
//
// Lifecycle (Collector):
//   Prepare  sends one `Profile` per server at once (gRPC callback API: no thread waits for it),
//            start_timestamp_ns = the planned start on the servers' clock (the agent's minus
//            clock_skew_ns; at once when the capture starts at once), both durations = the
//            window, the session id, emit_xspace. Each call's deadline is the planned end of the
//            window plus `grace_ms`.
//   Start    remembers the actual start (the profile start the planes are re-based onto).
//   Stop     before the end of the window (a cancelled capture): `Terminate(session_id)` to every
//            server still recording, so it stops too and answers with what it recorded.
//   Collect  waits for every answer up to its deadline (this is the only blocking step; it runs
//            on the agent's collect executor), re-bases and validates each server's planes and
//            merges them. A server that is absent, busy (ALREADY_EXISTS), slow (past its deadline),
//            empty or sends an unusable trace costs only its own planes: one XSpace.errors entry
//            "tsl <address>: <reason>", and one SHORTFALL_KIND_SOURCE_FAILED (TakeShortfalls), so
//            the host is INCOMPLETE, never "ok" without the planes it was asked for. The
//            framework's `Task Environment` plane is dropped (the
//            session's window is the authority); its errors and warnings are kept, prefixed.
//   Abort    (the session ended before its start instant): Terminate and cancel every call.
// Thread-safety: lifecycle calls come one at a time (possibly from different threads, handed
// over by executor posts); gRPC callbacks only fill their own call's state and signal it.
#ifndef PROFCTL_AGENT_COLLECTORS_TSL_TSL_COLLECTOR_H_
#define PROFCTL_AGENT_COLLECTORS_TSL_TSL_COLLECTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "agent/collectors/collector.h"
#include "agent/collectors/collector_names.h"
#include "common/clock.h"
#include "xspace/tsl_profile.h"

namespace profctl::agent {

inline constexpr int64_t kDefaultTslGraceMs = 10'000;
// The coordinator waits 60 s past the window for an agent's trace; the grace must leave room for
// the transfer.
inline constexpr int64_t kMaxTslGraceMs = 30'000;

struct TslCollectorOptions {
  // gRPC targets of the framework profiler servers on this host, as ParseTslAddress returns them
  // ("localhost:9999", "[::1]:9999").
  std::vector<std::string> servers;
  // How long past the planned end of the window a server may take to answer (it stops its
  // tracers and serializes the trace) before it is given up; 0..kMaxTslGraceMs.
  int64_t grace_ms = kDefaultTslGraceMs;
  // The agent's injected clock skew (--clock-skew-ms): agent wall time = the servers' wall time +
  // clock_skew_ns. 0 on a real host, where the agent and the servers read the same clock.
  int64_t clock_skew_ns = 0;
  // Deadline of each Terminate.
  int64_t terminate_timeout_ms = 2'000;
};

// One --tsl-local entry: `host:port`, `[ipv6]:port`, an optional `grpc://` prefix dropped; port
// 1..65535. Returns the gRPC target ("host:port", "[ipv6]:port"). INVALID_ARGUMENT names the entry
// and what is wrong with it.
absl::StatusOr<std::string> ParseTslAddress(absl::string_view text);
// A comma-separated list of them (whitespace around entries ignored); empty entries and the same
// target twice are INVALID_ARGUMENT. An empty `text` is an empty list.
absl::StatusOr<std::vector<std::string>> ParseTslAddressList(absl::string_view text);

class TslCollector final : public Collector {
 public:
  // `clock` is the agent's (skewed) clock; it outlives the collector.
  TslCollector(TslCollectorOptions options, const Clock* clock);
  // Cancels the calls in flight and waits for their callbacks.
  ~TslCollector() override;
  TslCollector(const TslCollector&) = delete;
  TslCollector& operator=(const TslCollector&) = delete;

  absl::string_view name() const override { return kTslCollector; }
  absl::Status Prepare(const CaptureOptions& options) override;
  absl::Status Start(int64_t wall_ns) override;
  absl::Status Stop(int64_t wall_ns) override;
  absl::Status Collect(tensorflow::profiler::XSpace* space) override;
  void Abort() override;
  void TakeShortfalls(std::vector<profctl::v1::Shortfall>* out) override;

  const TslCollectorOptions& options() const { return options_; }

  struct Server;
  struct ProfileCall;
  class Tracker;

 private:
  // Sends Terminate(session_id_) to the servers whose Profile is still running.
  void TerminatePending();
  // Merges one answered call into `space`, or says why it cannot.
  absl::Status MergeAnswer(ProfileCall* call, tensorflow::profiler::XSpace* space) const;

  const TslCollectorOptions options_;
  const Clock* const clock_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::shared_ptr<Tracker> tracker_;
  // The current session.
  std::string session_id_;
  int64_t duration_ns_ = 0;
  tsl::TracerLevels tracer_levels_;
  int64_t start_ns_ = 0;
  int64_t stop_ns_ = 0;
  bool running_ = false;
  std::vector<std::shared_ptr<ProfileCall>> calls_;
  // The servers the last Collect got nothing usable from (TakeShortfalls, which may come from
  // another thread).
  absl::Mutex shortfalls_mu_;
  std::vector<profctl::v1::Shortfall> shortfalls_ ABSL_GUARDED_BY(shortfalls_mu_);
};

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_COLLECTORS_TSL_TSL_COLLECTOR_H_
