// The agent's capture sessions, independent of any transport.
//
// One capture runs at a time. Begin() validates a request and claims the single slot without
// blocking; the returned Session's Run() blocks the calling (executor) thread while it waits for
// the start instant, records for the duration and collects; destroying the Session frees the slot.
// Cancel() (another thread) stops a running session early; Run() then returns what was recorded.
#ifndef PROFCTL_AGENT_CAPTURE_MANAGER_H_
#define PROFCTL_AGENT_CAPTURE_MANAGER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/collectors/collector.h"
#include "common/clock.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::agent {

struct CaptureSpec {
  std::string session_id;
  // Agent wall clock; 0 = at once.
  int64_t start_at_ns = 0;
  int64_t duration_ms = 0;
  // Empty = every collector.
  std::vector<std::string> collectors;
};

struct CaptureResult {
  std::string session_id;
  int64_t start_ns = 0;  // actual recording window, agent wall clock
  int64_t stop_ns = 0;
  bool cancelled = false;
  tensorflow::profiler::XSpace space;
};

struct CaptureManagerOptions {
  int64_t min_duration_ms = 1;
  int64_t max_duration_ms = 60'000;
  // How far in the future start_at may be.
  int64_t max_start_delay_ms = 60'000;
  // Goes into XSpace.hostnames: the agent's --name, else the machine's hostname.
  std::string host_name;
};

class CaptureManager {
 public:
  struct Dependencies {
    const Clock* clock = nullptr;
    // Not owned; outlive the manager.
    std::vector<Collector*> collectors;
  };

  class Session {
   public:
    ~Session();  // frees the capture slot
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Blocks until the capture is done (or cancelled). Call once.
    CaptureResult Run();
    // Stops the session early; thread-safe, idempotent.
    void Stop() { stop_.Stop(); }
    const std::string& id() const { return spec_.session_id; }

   private:
    friend class CaptureManager;
    Session(CaptureManager* manager, CaptureSpec spec, std::vector<Collector*> collectors)
        : manager_(manager), spec_(std::move(spec)), collectors_(std::move(collectors)) {}

    CaptureManager* manager_;
    CaptureSpec spec_;
    std::vector<Collector*> collectors_;
    StopSignal stop_;
  };

  CaptureManager(Dependencies deps, CaptureManagerOptions options);

  // INVALID_ARGUMENT for a bad request (never retry), ALREADY_EXISTS while another session runs.
  absl::StatusOr<std::unique_ptr<Session>> Begin(CaptureSpec spec);
  // NOT_FOUND when `session_id` is not running.
  absl::Status Cancel(const std::string& session_id);
  // Stops whatever session is running (agent shutdown); it still returns what it recorded.
  void CancelActive();
  bool busy() const;
  std::vector<std::string> collector_names() const;
  const CaptureManagerOptions& options() const { return options_; }

 private:
  void Release(Session* session);

  const Dependencies deps_;
  const CaptureManagerOptions options_;
  mutable absl::Mutex mu_;
  Session* active_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// A safe file stem (ValidateFileStem).
absl::Status ValidateSessionId(const std::string& id);

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_CAPTURE_MANAGER_H_
