// The coordinator's capture fan-out: one state machine per host, all driven by one Executor.
// Independent of transport (AgentClient) and disk (TraceSink). No thread per host and no
// blocking: every wait is a timer task or an RPC callback posted to the executor, so a handful
// of threads (the executor's and the transport's) drives 1,024+ hosts in one window.
//
// Life of a capture (docs/life-of-a-capture.md), one class per phase (capture_session.h):
//   1. Prepare (PreparePhase): GetInfo, then up to `clock_sync_samples` SyncClock round trips per
//      host (none for a peer whose clock cannot be measured: a grpc:// TSL server, marked
//      `unmeasured`), all hosts at once, each sample with a short timeout, inside a prepare
//      budget (plan.prepare_timeout_ms, or derived from the measured round trips, and pushed
//      out for a host whose answers are arriving over a slow link). A host not ready in time
//      never moves the others' window: the late policy decides its fate.
//   2. Choose the start (PreparePhase::End): one instant on the coordinator's clock, far enough
//      ahead that every Capture arrives before it; each agent is sent it translated into its
//      clock.
//   3. Capture (RunPhase): chunks stream into a temporary file per host; the agent reports its
//      actual start, giving each host's lateness; failed attempts are retried or fetched.
//   4. Collect (CollectPhase): a complete trace is validated, renamed to <host>.xplane.pb and
//      decoded once into what the outputs need, as soon as it arrives; once every host is done,
//      offsets from clock sync are refined from collective ends in the traces.
//   5. Finish (FinishJob, on its own input): the hang verdict, the aligned pod timeline host by
//      host, the pod step breakdown (BuildPodBreakdown over the hosts' summaries) as
//      pod_step_breakdown.json/.csv and report.html; session.json last.
// A failing host never delays or fails the others; its error is recorded per host with the
// step it failed in.
#ifndef PROFCTL_COORDINATOR_ENGINE_CAPTURE_ENGINE_H_
#define PROFCTL_COORDINATOR_ENGINE_CAPTURE_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/breakdown.h"
#include "analysis/op_classify.h"
#include "common/executor.h"
#include "coordinator/clients/agent_client.h"
#include "coordinator/clients/worker.h"
#include "coordinator/engine/clock_sync.h"
#include "coordinator/engine/host_trace.h"
#include "coordinator/plan/capture_plan.h"
#include "coordinator/session/session_writer.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

struct CaptureEngineOptions {
  // Clock-sync round trips per host: at most `clock_sync_samples`; sampling stops after
  // `min_clock_sync_samples` once two samples in a row did not beat the best round trip.
  int clock_sync_samples = 5;
  int min_clock_sync_samples = 3;
  int64_t sample_timeout_ms = 1000;  // each SyncClock
  int64_t rpc_timeout_ms = 2000;     // GetInfo, Cancel
  // The derived prepare budget: 4 x the median prepare time of the first half of the hosts to
  // be ready, within [min, max]. An explicit plan.prepare_timeout_ms replaces it.
  int64_t min_prepare_budget_ms = 250;
  int64_t max_prepare_budget_ms = 10'000;
  // With --late=capture, once 90 % of the hosts are ready, preparing also ends when no other host
  // got ready for a quarter of the time the last one took, and at least this long; or this long
  // when no host left has answered anything (dead or hung: none is on its way).
  int64_t min_prepare_quiet_ms = 50;
  // A host silent and not connected while preparing is waited for up to its GetInfo's timeout
  // (rpc_timeout_ms), as a slow link may be; unless a TCP handshake with its host
  // (AgentClient::ProbeHandshake) answered in r: then for frozen_host_wait_ms from its GetInfo,
  // or frozen_host_handshakes x r, or 4 x the slowest GetInfo answer of the pod, whichever is
  // longest (a slow link's own handshakes; a coordinator too busy to finish its handshakes),
  // and no longer: its kernel answers, its agent does not (frozen, stopped, stuck).
  int64_t frozen_host_wait_ms = 500;
  int frozen_host_handshakes = 8;
  // The common start is this far after preparing ends, at least (a floor, not a margin): else
  // 2 x the largest round trip plus, per ready host, twice the measured cost of one RPC on a
  // connected channel (at least 20 us), since sending every Capture takes time too.
  int64_t min_lead_ms = 100;
  // A host whose realized start is later than this after the common start is late.
  int64_t late_tolerance_ms = 5;
  // Extra time allowed after the window for stopping, collecting, transferring and retrying,
  // when the plan sets no deadline.
  int64_t transfer_timeout_ms = 60'000;
  // Retry backoff: attempt n waits min(max, initial * 2^(n-1)), jittered to 50..100% of it.
  int64_t retry_initial_backoff_ms = 100;
  int64_t retry_max_backoff_ms = 2000;
  // Seeds the jitter (tests); 0: random.
  uint64_t retry_jitter_seed = 0;
  // Wait-die between captures of one pod (docs/life-of-a-capture.md): a session that finds an
  // agent reserved by a younger session asks again after a jittered backoff, starting at the
  // initial wait and doubling up to the max, until it gets the agent or its prepare budget
  // (plan.prepare_timeout_ms, else max_prepare_budget_ms) runs out; one that finds an older
  // session's reservation, or a running capture, gives up whole at once.
  int64_t reservation_wait_initial_ms = 25;
  int64_t reservation_wait_max_ms = 250;
  // The session's ReservationPriority ticket (tests); 0: random.
  uint64_t reservation_ticket = 0;
  // Reservations are leases (reservation_leases.h): each asks for this long (agents hold one at
  // most 2 s from each grant or renewal, whatever is asked), and the session renews each host's
  // this long after its last grant was asked for, until the host's capture started or it is done
  // (0: never). A third of the lease: one renewal lost or slow still leaves the next in time.
  int64_t reservation_lease_ms = 2000;
  int64_t reservation_renew_ms = 600;
  // While capturing, a progress line every this often.
  int64_t progress_tick_ms = 1000;
  // session.json is rewritten (status RUNNING) at most this often while hosts finish.
  int64_t manifest_flush_ms = 1000;
  // After an interrupt (Cancel), hosts get this long to send what they recorded; then the rest
  // are abandoned (reported hung, or still sending) and the session ends with what was saved:
  // an interrupt writes no pod output not yet written (pod_outputs.h), so `profctl capture`
  // exits within about this long plus the saves in flight.
  int64_t interrupt_grace_ms = 1500;
  // Collective ends kept per host for alignment: a memory bound (8 bytes each; 32 MiB at 1,024
  // hosts). Refinement needs a few dozen matched steps; 4,096 is ~7 minutes of 100 ms steps.
  size_t max_collective_ends = 4096;
  // Traces kept decoded from saving them until the pod trace is written, so it need not read and
  // decode them again: at most this many bytes of serialized trace (decoded, about 5 x that in
  // memory, docs/perf.md). Past it, the pod trace reads the rest back from disk.
  uint64_t kept_trace_budget_bytes = 32ULL << 20;
};

class CaptureEngine {
 public:
  struct Dependencies {
    Executor* executor = nullptr;
    // Where finished traces are validated, saved and summarized; null = on the executor (tests).
    // Must outlive the engine.
    WorkPool* pool = nullptr;
    // Where the finish phase runs (the pod trace, the breakdown files, session.json): it waits on
    // the disk and on `pool`'s jobs, so it must be another pool than `pool` (its waits would hold
    // threads `pool`'s jobs need). The executor stays free meanwhile: other sessions on it go on.
    // Null: on the executor, which then runs nothing else until it is done (one session alone:
    // `profctl capture`; tests). Must outlive the engine.
    WorkPool* finisher = nullptr;
    AgentClientFactory* clients = nullptr;
    TraceSink* sink = nullptr;  // unused with plan.prepare_only
    // Human-readable progress lines, called on the executor.
    std::function<void(const std::string&)> progress = nullptr;
    // The pod step breakdown, once, on the executor, right before `done` (not with prepare_only).
    std::function<void(const analysis::PodBreakdown&)> breakdown = nullptr;
    // The final session.json text, once, on the executor, after it was written and right before
    // `done` (not when writing it failed, nor with prepare_only): `done`'s manifest prints as
    // exactly this, so a caller that shows it (--json) need not print it again.
    std::function<void(std::string)> manifest_written = nullptr;
    // Reads each saved host's trace, once, on `pool` (host_trace.h); null: the XSpace wire
    // reader's one pass (analysis::DecodeXSpaceHost). Tests count the decodes through it.
    HostDecoder decode = nullptr;
  };
  using DoneCallback = absl::AnyInvocable<void(absl::StatusOr<profctl::v1::SessionManifest>) &&>;

  CaptureEngine(Dependencies deps, CaptureEngineOptions options);
  // Waits until the session is gone: RPCs still in flight (hosts abandoned by the late policy)
  // are cancelled and their callbacks ignored. The executor must outlive the engine. Do not
  // destroy the engine from inside one of its own callbacks or tasks (it would wait forever).
  ~CaptureEngine();
  CaptureEngine(const CaptureEngine&) = delete;
  CaptureEngine& operator=(const CaptureEngine&) = delete;

  // Starts the capture; `done` runs once, on the executor, with the manifest (per-host failures
  // are in it: status partial/failed) or an error for a bad plan. Session-level write failures
  // are listed in manifest.errors. Call once.
  void Start(const CapturePlan& plan, DoneCallback done);

  // Thread-safe (e.g. from a signal watcher): hosts still capturing are sent AgentService.Cancel
  // and hand back what they recorded within options.interrupt_grace_ms, which is saved as usual;
  // hosts not yet capturing are not asked to; manifest.errors says the session was interrupted.
  // An interrupted session writes no pod output not yet written (the pod trace, the breakdown's
  // files): once every host is done, it stops the pod trace between two hosts (at most one
  // render per pool thread to wait for) and renders no breakdown file; manifest.errors names
  // what was left out and the `profctl analyze` command that builds it from the saved traces.
  // The hosts' statuses stand; session.json is written.
  void Cancel();

  class Session;  // the per-capture state machine (capture_session.h)

 private:
  Dependencies deps_;
  CaptureEngineOptions options_;
  std::shared_ptr<Session> session_;
  // Cancel's count, shared with the session and its finish job.
  std::shared_ptr<std::atomic<int>> cancels_;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_CAPTURE_ENGINE_H_
