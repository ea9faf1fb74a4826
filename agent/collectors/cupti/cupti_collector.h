// The `cupti` collector: GPU activity of every CUDA process on this host that runs the injection
// library (libprofctl_inject.so; docs/cupti.md), through the agent's inject server.
//
// Lifecycle (Collector):
//   Prepare  opens the server's window: every registered process (and every one registering
//            before Stop) is told to start recording at the planned start (CLOCK_REALTIME: the
//            agent's wall clock minus clock_skew_ns; at once when the capture starts at once) and
//            to stop by itself end_slack_ms after the planned end, should the agent vanish.
//   Start    remembers the actual start: the profile start.
//   Stop     Disable + Flush to every process of the window.
//   Collect  waits up to flush_timeout_ms for every process's batches (the only blocking step; it
//            runs on the agent's collect executor), parses them (record_batch.h), re-bases each
//            process's GPU clock onto the agent's wall clock with the calibration the process
//            measured at its window start, and builds the host's planes (cupti_xspace.h), merged
//            into the session's space. A process that is unavailable (another CUPTI subscriber),
//            fails to enable, leaves, stalls or sends unusable batches costs only its own data:
//            one XSpace.errors entry "cupti pid <n> (rank <r>): <reason>". Dropped records and
//            an empty host ("no CUDA process is connected") are XSpace.warnings.
//   Abort    tells the processes to stop and forgets the window.
// Devices: CUPTI numbers devices by the process's CUDA ordinals. When the process registered a
// CUDA_VISIBLE_DEVICES of plain indices ("2,3"), ordinal i becomes the i-th index (so ranks that
// each see "their" GPU as device 0 land on their own /device:GPU:<n> planes); UUID or MIG lists
// are left as they are (RemapVisibleDevices).
// Step signal: RecentSteps returns the NVTX step ranges the processes report between (and
// during) captures (InjectServer::RecentSteps), moved onto the agent's clock (CLOCK_REALTIME +
// clock_skew_ns).
// Thread-safety: lifecycle calls come one at a time (Collector's contract); RecentSteps and
// HasStepSignal may be called from any thread at any time (they read only the server, which is
// thread-safe, and const options).
#ifndef PROFCTL_AGENT_COLLECTORS_CUPTI_CUPTI_COLLECTOR_H_
#define PROFCTL_AGENT_COLLECTORS_CUPTI_CUPTI_COLLECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "agent/collectors/collector.h"
#include "agent/collectors/cupti/cupti_xspace.h"
#include "agent/collectors/cupti/inject_server.h"
#include "agent/collectors/cupti/record_batch.h"
#include "common/clock.h"

namespace profctl::agent::cupti {

struct CuptiCollectorOptions {
  // XSpace.hostnames entry of the built space (the session adds its own too).
  std::string hostname = {};
  // How long Collect waits for the processes' batches after Stop.
  int64_t flush_timeout_ms = 5'000;
  // The agent's injected clock skew (--clock-skew-ms): agent wall = CLOCK_REALTIME + skew.
  int64_t clock_skew_ns = 0;
  // How long after the planned end a process stops recording by itself.
  int64_t end_slack_ms = 2'000;
  std::string step_pattern = std::string(kDefaultNvtxStepPattern);
};

// Rewrites the device ids of `batch` from the process's CUDA ordinals to the host's device
// indices, when `visible_devices` (its CUDA_VISIBLE_DEVICES) is a comma-separated list of
// non-negative integers; otherwise (empty, UUIDs, MIG) leaves it. Ordinals past the list stay.
void RemapVisibleDevices(absl::string_view visible_devices, RecordBatch* batch);

class CuptiCollector final : public Collector {
 public:
  // `server` and `clock` (the agent's, possibly skewed) outlive the collector.
  CuptiCollector(InjectServer* server, CuptiCollectorOptions options, const Clock* clock);

  absl::string_view name() const override { return "cupti"; }
  absl::Status Prepare(const CaptureOptions& options) override;
  absl::Status Start(int64_t wall_ns) override;
  absl::Status Stop(int64_t wall_ns) override;
  absl::Status Collect(tensorflow::profiler::XSpace* space) override;
  void Abort() override;
  void RecentSteps(int64_t since_wall_ns, int64_t now_wall_ns, size_t max,
                   std::vector<StepSample>* out) const override;
  bool HasStepSignal() const override { return true; }

 private:
  InjectServer* const server_;
  const CuptiCollectorOptions options_;
  const Clock* const clock_;
  uint64_t token_ = 0;
  int64_t start_ns_ = 0;
  int64_t stop_ns_ = 0;
  bool running_ = false;
  bool stopped_ = false;
};

}  // namespace profctl::agent::cupti

#endif  // PROFCTL_AGENT_COLLECTORS_CUPTI_CUPTI_COLLECTOR_H_
