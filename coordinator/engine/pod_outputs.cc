#include "coordinator/engine/pod_outputs.h"

#include <utility>

#include "absl/algorithm/container.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "analysis/hang_verdict.h"
#include "coordinator/engine/step_signal.h"
#include "report/breakdown_writers.h"
#include "report/pod_trace_writer.h"

namespace profctl::coordinator {
namespace {

// Hosts of the pod trace read back and rendered at once on the pool.
constexpr size_t kPodTraceHostsInFlight = 8;

// Runs `job` on the pool, or here when there is none (it is then done on return).
void OnPoolOrHere(WorkPool* pool, Executor::Task job) {
  if (pool != nullptr) {
    pool->Submit(std::move(job));
  } else {
    std::move(job)();
  }
}

// Renders saved host i for the pod trace from its kept trace, else read back from disk.
absl::StatusOr<report::RenderedHost> RenderHost(PodOutputHost& h, size_t i, TraceSink& sink,
                                                int64_t base_ns) {
  std::unique_ptr<DecodedTrace> decoded = std::move(h.space);
  if (decoded == nullptr) {
    decoded = std::make_unique<DecodedTrace>();
    absl::StatusOr<std::string> bytes = sink.Read(h.r->xplane_file());
    if (!bytes.ok() || !decoded->Parse(*bytes)) {
      return absl::DataLossError(
          absl::StrCat("cannot read back ", h.r->xplane_file(), "; that host is missing from it"));
    }
  }
  return report::PodTraceWriter::Render(h.r->host(), decoded->space(), h.r->clock().offset_ns(),
                                        base_ns, static_cast<int64_t>(i));
}

// Each host is rendered and compressed on the pool, at most kPodTraceHostsInFlight at once, and
// joined into the file in host order here; without a pool, one at a time here (memory: at most
// that many decoded traces more). Each job owns its host's kept trace and frees it; no two jobs
// share a host.
// `breakdown`: waits for the pod step breakdown (null: none) for the pod's step track.
void WritePodTrace(std::vector<PodOutputHost>& hosts, const PodOutputsInput& in,
                   profctl::v1::SessionManifest& manifest,
                   absl::FunctionRef<const analysis::PodBreakdown*()> breakdown) {
  const std::string path = in.sink->LocalPath(kPodTraceFileName);
  if (hosts.empty() || path.empty()) return;  // not a local folder (tests' in-memory sink)
  absl::StatusOr<report::PodTraceWriter> writer =
      report::PodTraceWriter::Open(path, in.start_at_ns);
  if (!writer.ok()) {
    manifest.add_errors(absl::StrCat("pod trace: ", writer.status().message()));
    return;
  }
  struct Slot {
    std::optional<absl::StatusOr<report::RenderedHost>> rendered;
  };
  std::vector<Slot> slots(hosts.size());
  absl::Mutex mu;
  const int64_t base = writer->base_ns();
  size_t submitted = 0;
  const auto submit_up_to = [&](size_t limit) {
    for (; submitted < std::min(limit, slots.size()); ++submitted) {
      if (in.pool == nullptr) {
        slots[submitted].rendered = RenderHost(hosts[submitted], submitted, *in.sink, base);
        continue;
      }
      in.pool->Submit([&hosts, &slots, &mu, &in, base, i = submitted] {
        absl::StatusOr<report::RenderedHost> r = RenderHost(hosts[i], i, *in.sink, base);
        absl::MutexLock lock(&mu);
        slots[i].rendered = std::move(r);
      });
    }
  };
  absl::Status status = absl::OkStatus();
  for (size_t i = 0; i < slots.size(); ++i) {
    if (in.interrupted && in.interrupted()) {
      // Jobs still rendering hold references to these locals: wait for them (at most
      // kPodTraceHostsInFlight hosts, one render each). The writer, unfinished, leaves no file.
      for (size_t j = i; j < submitted; ++j) {
        mu.LockWhen(absl::Condition(
            +[](Slot* slot) { return slot->rendered.has_value(); }, &slots[j]));
        mu.Unlock();
      }
      manifest.add_errors(absl::StrCat(
          "pod trace: interrupted after ", i, " of ", slots.size(),
          " hosts; not written (every saved host's trace is in the folder: profctl analyze "
          "reads them)"));
      return;
    }
    submit_up_to(i + kPodTraceHostsInFlight);
    // Every submitted job finishes before this returns: they hold references to these locals.
    mu.LockWhen(absl::Condition(
        +[](Slot* slot) { return slot->rendered.has_value(); }, &slots[i]));
    absl::StatusOr<report::RenderedHost> r = *std::move(slots[i].rendered);
    slots[i].rendered.reset();
    mu.Unlock();
    if (!r.ok()) {  // a host that cannot be read back is left out; the writer's numbering stays
      manifest.add_errors(absl::StrCat("pod trace: ", r.status().message()));
      report::RenderedHost empty;
      empty.host_index = static_cast<int64_t>(i);
      empty.base_ns = base;
      r = std::move(empty);
    } else if (r->planes_skipped > 0) {
      manifest.add_errors(absl::StrCat("pod trace: ", hosts[i].r->host(), ": ", r->planes_skipped,
                                       " planes past the first ",
                                       report::PodTraceWriter::kPidsPerHost - 1, " left out"));
    }
    if (status.ok()) status = writer->AddRendered(*r);
  }
  if (const analysis::PodBreakdown* b = status.ok() ? breakdown() : nullptr; b != nullptr) {
    status = writer->AddPodSteps(*b);
  }
  if (status.ok()) status = writer->Finish();
  if (status.ok()) manifest.set_pod_trace_file(kPodTraceFileName);
  if (!status.ok()) manifest.add_errors(absl::StrCat("pod trace: ", status.message()));
}

// The verdict over every worker of the request (a rank is its position), each with its saved
// host's record (made as it was saved); workers that saved nothing are unknown. Absent when no
// saved host has a record (the step pattern does not compile: the breakdown names that).
std::optional<analysis::HangReport> JudgePodHang(std::vector<PodOutputHost>& hosts,
                                                 const profctl::v1::SessionManifest& manifest) {
  if (absl::c_none_of(hosts, [](const PodOutputHost& h) { return h.collectives.has_value(); })) {
    return std::nullopt;
  }
  std::vector<analysis::HangRankInput> ranks;
  std::vector<bool> placed(hosts.size(), false);
  const auto& workers = manifest.request().workers();
  for (int w = 0; w < workers.size(); ++w) {
    analysis::HangRankInput& rank = ranks.emplace_back();
    rank.host = workers[w];
    rank.rank = w;
    for (size_t i = 0; i < hosts.size(); ++i) {
      if (placed[i] || hosts[i].r->address() != workers[w]) continue;
      placed[i] = true;
      rank.host = hosts[i].r->host();
      rank.offset_ns = hosts[i].r->clock().offset_ns();
      rank.trace = std::move(hosts[i].collectives);
      rank.signal = HangSignalOf(hosts[i].r->step_signal());
      break;
    }
  }
  for (size_t i = 0; i < hosts.size(); ++i) {  // a host the request does not list (tests)
    if (placed[i]) continue;
    ranks.push_back({hosts[i].r->host(), static_cast<int64_t>(ranks.size()),
                     hosts[i].r->clock().offset_ns(), std::move(hosts[i].collectives),
                     HangSignalOf(hosts[i].r->step_signal())});
  }
  for (PodOutputHost& h : hosts) h.collectives.reset();
  return analysis::JudgeHang(ranks);
}

// The pod step breakdown, built on the pool while the pod trace is written (only the pod trace's
// step track, added last, waits for it), and its files, rendered once the pod trace's fate is
// known, each on the pool.
class BreakdownJob {
 public:
  // Takes the hosts' summaries. Null when no host has one.
  static std::unique_ptr<BreakdownJob> Start(std::vector<PodOutputHost>& hosts,
                                             const PodOutputsInput& in,
                                             const profctl::v1::SessionManifest& manifest,
                                             std::optional<analysis::HangReport> hang) {
    auto job = std::make_unique<BreakdownJob>();
    job->hang_ = std::move(hang);
    job->context_.session = in.session;
    job->context_.source = report::BreakdownSource::kCapture;
    for (PodOutputHost& h : hosts) {
      if (!h.summary.has_value()) continue;
      job->context_.host_files[h.r->host()].push_back(h.r->xplane_file());
      job->summaries_.push_back(*std::move(h.summary));
      h.summary.reset();
    }
    if (job->summaries_.empty()) return nullptr;
    job->context_.report_path = absl::StrCat(manifest.session_dir(), "/", report::kReportHtmlFile);
    job->context_.snapshot_past_ms = static_cast<int64_t>(manifest.request().past_ms());
    OnPoolOrHere(in.pool, [j = job.get()] {  // Finish waits for it: `job` outlives it
      j->breakdown_ = analysis::BuildPodBreakdown(j->summaries_);
      j->breakdown_->hang = std::move(j->hang_);
      j->summaries_.clear();
      j->built_.Notify();
    });
    return job;
  }

  // Waits for the breakdown (it stays the job's until Finish).
  const analysis::PodBreakdown* Wait() {
    built_.WaitForNotification();
    return &*breakdown_;
  }

  // Waits for the breakdown, renders and writes its files (naming the pod trace when
  // manifest.pod_trace_file says it was written), and returns the breakdown.
  std::optional<analysis::PodBreakdown> Finish(const PodOutputsInput& in,
                                               profctl::v1::SessionManifest& manifest) {
    built_.WaitForNotification();
    if (!manifest.pod_trace_file().empty()) {
      context_.session_files.push_back(manifest.pod_trace_file());
    }
    context_.session_files.push_back(kManifestFileName);
    const absl::Span<const report::BreakdownOutput> outputs = report::BreakdownOutputs();
    std::vector<std::string> rendered(outputs.size());
    absl::BlockingCounter left(static_cast<int>(outputs.size()));
    for (size_t i = 0; i < outputs.size(); ++i) {
      // Each job writes its own string; `left` outlives them.
      OnPoolOrHere(in.pool, [this, &outputs, &rendered, &left, i] {
        rendered[i] = outputs[i].render(*breakdown_, context_);
        left.DecrementCount();
      });
    }
    left.Wait();
    for (size_t i = 0; i < outputs.size(); ++i) {
      absl::StatusOr<std::string> written =
          in.sink->Write(std::string(outputs[i].file_name), rendered[i]);
      if (written.ok()) {
        manifest.add_breakdown_files(*written);
      } else {
        manifest.add_errors(absl::StrCat("breakdown: ", written.status().message()));
      }
    }
    return std::move(breakdown_);
  }

 private:
  // Read by the build job only until `built_`.
  std::vector<analysis::HostSummary> summaries_;
  std::optional<analysis::HangReport> hang_;
  std::optional<analysis::PodBreakdown> breakdown_;
  report::BreakdownContext context_;
  absl::Notification built_;
};

}  // namespace

std::optional<analysis::PodBreakdown> WritePodOutputs(std::vector<PodOutputHost> hosts,
                                                      const PodOutputsInput& in,
                                                      profctl::v1::SessionManifest& manifest) {
  // The saved traces are made durable (their fsyncs, a device flush each) on the pool while the
  // pod outputs are rendered: at 1,024 hosts that was 0.15-0.2 s of the collect phase, one trace
  // at a time. The caller writes session.json after this.
  absl::Notification synced;
  absl::Status sync_status;
  OnPoolOrHere(in.pool, [&in, &synced, &sync_status] {  // waited for below
    sync_status = in.sink->SyncCommitted();
    synced.Notify();
  });
  std::unique_ptr<BreakdownJob> breakdown =
      BreakdownJob::Start(hosts, in, manifest, JudgePodHang(hosts, manifest));
  WritePodTrace(hosts, in, manifest, [&breakdown]() -> const analysis::PodBreakdown* {
    return breakdown != nullptr ? breakdown->Wait() : nullptr;
  });
  std::optional<analysis::PodBreakdown> result;
  if (breakdown != nullptr) result = breakdown->Finish(in, manifest);
  synced.WaitForNotification();
  if (!sync_status.ok()) manifest.add_errors(absl::StrCat("traces: ", sync_status.message()));
  return result;
}

}  // namespace profctl::coordinator
