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
// Devices: CUPTI numbers devices by the process's CUDA ordinals; they are moved onto the host's
// indices (nvidia-smi's, host_gpus.h) so that ranks that each see "their" GPU as device 0 land on
// their own /device:GPU:<n> planes (MapProcessDevices): by the device UUID the injection library
// reports when the host's GPU table (read from /proc/driver/nvidia/gpus) knows it, else by the
// process's CUDA_VISIBLE_DEVICES entry (a plain index, a GPU UUID or unique UUID prefix, a
// "MIG-GPU-<uuid>/.." naming its parent). A device that cannot be placed keeps its ordinal, with
// one XSpace.warnings entry per process and device.
// Step signal: RecentSteps returns the NVTX step ranges the processes report between (and
// during) captures (InjectServer::RecentSteps), moved onto the agent's clock (CLOCK_REALTIME +
// clock_skew_ns).
// Flight recorder (docs/flight-recorder.md, docs/cupti.md "The always-on level"): the light level
// is the step signal the processes send anyway, plus their NCCL kernel launches, which
// StartRecorder asks of them (InjectServer::SetCollectiveLaunches: CUPTI's launch callbacks in
// each process). RecordUntil pulls the step ranges that ended and the launches made since its
// last pull (and the kLateStepNs before it, for those that reach the server late, each kept once)
// into one FlightRing of whole steps and launches. Snapshot writes the held steps of its window
// as a capture writes NVTX step ranges (BuildCuptiXSpace: step roots on each process's /host:CPU
// line) and each launch as an "nccl<Op>" event on its thread's line (collective_launches.h),
// says in XSpace.warnings that the past holds only those, and when it holds less than asked. The
// full activity stays inside an explicit capture; a snapshot during a capture reads only the ring
// and leaves the capture's window alone. Thread-safety: lifecycle calls come one at a time
// (Collector's contract); RecentSteps and HasStepSignal may be called from any thread at any time
// (they read only the server, which is thread-safe, and const options).
#ifndef PROFCTL_AGENT_COLLECTORS_CUPTI_CUPTI_COLLECTOR_H_
#define PROFCTL_AGENT_COLLECTORS_CUPTI_CUPTI_COLLECTOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "agent/collectors/collector.h"
#include "agent/collectors/collector_names.h"
#include "agent/collectors/cupti/cupti_xspace.h"
#include "agent/collectors/cupti/host_gpus.h"
#include "agent/collectors/cupti/inject_server.h"
#include "agent/collectors/cupti/record_batch.h"
#include "agent/collectors/flight_ring.h"
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
  // Where the host's GPU table is read from (host_gpus.h): at the first Collect with data, and
  // again at later ones while it is empty or missing (the driver may load after the agent).
  std::string nvidia_gpus_dir = kNvidiaGpusProcDir;
  // The flight recorder asks the processes for their NCCL launches too (false: steps only).
  bool recorder_launches = true;
  // How long a snapshot waits for the processes to send the steps and launches they hold
  // (InjectServer::RequestPending: the last second before its instant); 0: it does not ask.
  int64_t snapshot_pending_wait_ms = 500;
};

// How one process's CUDA ordinals map onto the host's device indices.
struct ProcessDeviceMap {
  absl::flat_hash_map<uint32_t, uint32_t> host_index;  // ordinal -> host index; others stay
  // One per device that could not be placed, e.g. "device 0 (UUID MIG-...) is not a GPU of this
  // host's table; its plane keeps the process's ordinal".
  std::vector<std::string> warnings;
};

// Maps the ordinals used in one process's `batches`. Per ordinal, first match wins:
//   1. its DeviceRecord's UUID, when `host` knows it (a MIG instance whose record carries its
//      parent GPU's UUID lands on that GPU's plane);
//   2. the ordinal-th entry of `visible_devices` (the process's CUDA_VISIBLE_DEVICES): a plain
//      index; "GPU-<uuid>" or a unique prefix of one that `host` knows; "MIG-GPU-<uuid>/<gi>/<ci>"
//      (the pre-R470 form naming the parent GPU) that `host` knows. A list holding anything else
//      (garbage, empty or negative entries) is not used at all;
//   3. none: the ordinal stays. A warning is added when something suggested it should move: its
//      DeviceRecord names a UUID (or MIG instance) and `host` is not empty, or its
//      CUDA_VISIBLE_DEVICES entry is a UUID ("GPU-..." or "MIG-...").
ProcessDeviceMap MapProcessDevices(absl::string_view visible_devices,
                                   const std::vector<RecordBatch>& batches,
                                   const HostGpuTable& host);

// Rewrites every device id of `batch` through `map` (ids it does not name stay).
void ApplyDeviceMap(const ProcessDeviceMap& map, RecordBatch* batch);

// MapProcessDevices with no host table, applied: only plain index lists are used.
void RemapVisibleDevices(absl::string_view visible_devices, RecordBatch* batch);

class CuptiCollector final : public Collector {
 public:
  // `server` and `clock` (the agent's, possibly skewed) outlive the collector.
  CuptiCollector(InjectServer* server, CuptiCollectorOptions options, const Clock* clock);

  absl::string_view name() const override { return kCuptiCollector; }
  absl::Status Prepare(const CaptureOptions& options) override;
  absl::Status Start(int64_t wall_ns) override;
  absl::Status Stop(int64_t wall_ns) override;
  absl::Status Collect(tensorflow::profiler::XSpace* space) override;
  void Abort() override;
  void RecentSteps(int64_t since_wall_ns, int64_t now_wall_ns, size_t max,
                   std::vector<StepSample>* out) const override;
  bool HasStepSignal() const override { return true; }

  // How late after its end a step sample may reach the server and still be recorded.
  static constexpr int64_t kLateStepNs = 2'000'000'000;
  absl::Status StartRecorder(const RecorderLimits& limits, int64_t now_wall_ns) override;
  bool Recording() const override;
  void RecordUntil(int64_t now_wall_ns) override;
  void TakeShortfalls(std::vector<profctl::v1::Shortfall>* out) override;
  absl::Status Snapshot(int64_t from_wall_ns, int64_t to_wall_ns,
                        tensorflow::profiler::XSpace* space) override;
  RecorderStats recorder_stats() const override;

  // What the last Collect received from the processes, and the most record bytes it held at once
  // (raw batches not yet parsed plus parsed records, HeldBytes): raw batches are released as they
  // are parsed, so this stays near `received`, never raw + parsed of the whole window.
  struct CollectAccounting {
    int64_t received_bytes = 0;
    int64_t peak_record_bytes = 0;
  };
  const CollectAccounting& last_collect() const { return last_collect_; }

 private:
  // host_gpus_, read now if not yet (or empty).
  const HostGpuTable& HostGpus();

  InjectServer* const server_;
  const CuptiCollectorOptions options_;
  const Clock* const clock_;
  uint64_t token_ = 0;
  int64_t start_ns_ = 0;
  int64_t stop_ns_ = 0;
  bool running_ = false;
  bool stopped_ = false;
  // The host's GPUs (options_.nvidia_gpus_dir), read by Collect (lifecycle calls come one at a
  // time, so no lock); nullopt until read, re-read while empty.
  std::optional<HostGpuTable> host_gpus_;
  CollectAccounting last_collect_;

  // One recorded step, or one NCCL kernel launch (kernel_name set; start = end = its time), of
  // one process (agent clock).
  struct RecordedEvent {
    uint32_t pid = 0;
    uint32_t tid = 0;  // a launch's thread
    int64_t start_wall_ns = 0;
    int64_t end_wall_ns = 0;
    int64_t number = -1;  // a step's number, a launch's sequence number
    std::shared_ptr<const std::string> kernel_name;
  };
  // (end, pid, is a launch, number) of a recorded event: late ones already recorded are skipped.
  using EventKey = std::tuple<int64_t, uint32_t, bool, int64_t>;
  // What the last Collect or Snapshot lacks (TakeShortfalls).
  void SetShortfalls(std::vector<profctl::v1::Shortfall> found);
  absl::Mutex shortfalls_mu_;
  std::vector<profctl::v1::Shortfall> shortfalls_ ABSL_GUARDED_BY(shortfalls_mu_);

  mutable absl::Mutex recorder_mu_;
  std::unique_ptr<FlightRing<RecordedEvent>> ring_ ABSL_GUARDED_BY(recorder_mu_);
  int64_t recorder_start_ns_ ABSL_GUARDED_BY(recorder_mu_) = 0;
  int64_t pulled_until_ns_ ABSL_GUARDED_BY(recorder_mu_) = 0;
  // Keys of the events recorded that ended after pulled_until_ns_ - kLateStepNs.
  std::set<EventKey> recent_keys_ ABSL_GUARDED_BY(recorder_mu_);
};

}  // namespace profctl::agent::cupti

#endif  // PROFCTL_AGENT_COLLECTORS_CUPTI_CUPTI_COLLECTOR_H_
