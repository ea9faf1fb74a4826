// The coordinator's capture fan-out, independent of transport and disk.
//
// Life of a capture (docs/life-of-a-capture.md):
//   1. prepare, all workers concurrently: Connect, GetInfo, clock offset (EstimateClockOffset);
//   2. pick one start instant on the coordinator's clock, late enough for the slowest worker;
//   3. capture, all prepared workers concurrently: Capture(start translated to the agent's
//      clock), validate the XSpace, write <host>.xplane.pb through the sink as soon as it arrives;
//   4. write the aligned pod timeline and the manifest (session.json).
// A failing worker never delays or fails the others; its error is recorded per host.
#ifndef PROFCTL_COORDINATOR_CAPTURE_ENGINE_H_
#define PROFCTL_COORDINATOR_CAPTURE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/agent_client.h"
#include "coordinator/session_writer.h"
#include "coordinator/worker.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

struct CapturePlan {
  std::vector<WorkerAddress> workers;
  int64_t duration_ms = 2000;
  std::string session;
  std::string logdir;  // recorded in the manifest
};

struct CaptureEngineOptions {
  int clock_sync_samples = 5;
  int64_t rpc_timeout_ms = 2000;  // GetInfo, SyncClock, Cancel
  // The common start is at least this far ahead, and at least 2 x the largest round trip + 50 ms.
  int64_t min_lead_ms = 200;
  // Extra time allowed after the window for stopping, collecting and transferring.
  int64_t transfer_timeout_ms = 60'000;
  // Threads for talking to workers concurrently.
  int max_parallel = 64;
  // While capturing, a progress line every this often.
  int64_t progress_tick_ms = 1000;
};

class CaptureEngine {
 public:
  struct Dependencies {
    const Clock* clock = nullptr;
    AgentClientFactory* clients = nullptr;
    TraceSink* sink = nullptr;
    // Human-readable progress lines; called from worker threads, one call at a time.
    std::function<void(const std::string&)> progress;
  };

  CaptureEngine(Dependencies deps, CaptureEngineOptions options)
      : deps_(std::move(deps)), options_(options) {}

  // Runs the whole capture. Per-host failures are in the manifest (status "partial"/"failed");
  // the returned error is only for a bad plan. Session-level write failures are listed in
  // manifest.errors. Call once per engine.
  absl::StatusOr<profctl::v1::SessionManifest> Run(const CapturePlan& plan);

  // Interrupts Run() from another thread (e.g. on Ctrl-C): hosts still capturing are sent
  // AgentService.Cancel and hand back what they recorded, which is saved as usual; hosts not yet
  // capturing are not asked to; manifest.errors says the session was interrupted.
  void Cancel();

 private:
  void Progress(const std::string& line);
  // Registers a client about to capture; false when the session is already cancelled.
  bool BeginCapture(AgentClient* client);
  void EndCapture(AgentClient* client);

  Dependencies deps_;
  CaptureEngineOptions options_;
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::string session_ ABSL_GUARDED_BY(mu_);
  std::vector<AgentClient*> capturing_ ABSL_GUARDED_BY(mu_);
};

// Picks each host's file stem: the agent's name when it has a valid one, else the address stem;
// a stem already taken falls back to the address stem, then gets "-2", "-3", ...
std::vector<std::string> AssignHostStems(const std::vector<WorkerAddress>& workers,
                                         const std::vector<std::string>& agent_names);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CAPTURE_ENGINE_H_
