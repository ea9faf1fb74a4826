// The last phase of a capture (capture_session.h): the pod outputs and the final session.json,
// from a FinishInput the session moves into the job once every host has its outcome and the
// saved hosts are aligned. The session never touches what it moved; the job shares nothing with
// it but the thread-safe objects the input names (the snapshot writer, the cancel count), so it
// may run on any thread: Dependencies::finisher, or the executor when there is none. A slow disk
// or a big pod trace never stalls the executor that way.
#ifndef PROFCTL_COORDINATOR_ENGINE_FINISH_JOB_H_
#define PROFCTL_COORDINATOR_ENGINE_FINISH_JOB_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "analysis/breakdown.h"
#include "common/executor.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/engine/manifest_snapshots.h"
#include "coordinator/engine/pod_outputs.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

struct FinishInput {
  std::string session;        // the session's name, for the breakdown's files
  int64_t start_at_ns = 0;    // the common start: the pod trace's time base
  bool prepare_only = false;  // a dry run: no outputs, no session.json
  // Every host's final result, in the request's order (moved into manifest.hosts last), and what
  // each saved host contributes to the outputs (PodOutputHost::r is set by the job).
  std::vector<profctl::v1::HostResult> results;
  std::vector<PodOutputHost> outputs;     // one per result; empty for hosts not saved
  profctl::v1::SessionManifest manifest;  // concluded (status, alignment), hosts not yet added
  TraceSink* sink = nullptr;
  WorkPool* pool = nullptr;
  // Where `done` and the callbacks are posted; its clock times the outputs.
  Executor* executor = nullptr;
  // Asked before and between the outputs' steps (any thread may make it true): the session was
  // interrupted, before the hand-off or since. Null: never.
  std::function<bool()> interrupted;
  std::shared_ptr<ManifestSnapshots> snapshots;  // closed before the final session.json
  CaptureEngine::DoneCallback done;
  std::function<void(const analysis::PodBreakdown&)> on_breakdown;
  std::function<void(std::string)> on_manifest_written;
  // Held until the job ends (~CaptureEngine waits for it).
  std::shared_ptr<const void> lifetime;
};

class FinishJob {
 public:
  explicit FinishJob(FinishInput in) : in_(std::move(in)) {}

  // Writes the pod outputs (WritePodOutputs) and session.json, then posts to the executor, in
  // this order: the breakdown, the session.json text as written, and `done` with the manifest.
  // Call once.
  void Run() &&;

 private:
  FinishInput in_;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_FINISH_JOB_H_
