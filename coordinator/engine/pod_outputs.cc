#include "coordinator/engine/pod_outputs.h"

#include <utility>

#include "absl/algorithm/container.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "analysis/hang_verdict.h"
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

// The hang verdict's record of each saved host (analysis/hang_verdict.h), made where its trace
// is decoded anyway: from its kept trace before the pod trace, else while the pod trace reads it
// back (so a trace past the kept budget is read once). Each job writes only its own host's.
struct HangRecords {
  std::optional<analysis::StepMatcher> matcher;  // absent: the step pattern does not compile
  std::vector<std::optional<analysis::RankCollectives>> records;
  bool all_ready() const {
    return absl::c_all_of(records, [](const auto& r) { return r.has_value(); });
  }
};

// Renders saved host i for the pod trace from its kept trace, else read back from disk, and
// makes its hang record if it has none yet.
absl::StatusOr<report::RenderedHost> RenderHost(PodOutputHost& h, size_t i, TraceSink& sink,
                                                int64_t base_ns, HangRecords& hang) {
  std::unique_ptr<DecodedTrace> decoded = std::move(h.space);
  if (decoded == nullptr) {
    decoded = std::make_unique<DecodedTrace>();
    absl::StatusOr<std::string> bytes = sink.Read(h.r->xplane_file());
    if (!bytes.ok() || !decoded->Parse(*bytes)) {
      return absl::DataLossError(
          absl::StrCat("cannot read back ", h.r->xplane_file(), "; that host is missing from it"));
    }
  }
  if (hang.matcher.has_value() && !hang.records[i].has_value()) {
    hang.records[i] = analysis::ReadRankCollectives(decoded->space(), *hang.matcher);
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
                   profctl::v1::SessionManifest& manifest, HangRecords& hang,
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
        slots[submitted].rendered = RenderHost(hosts[submitted], submitted, *in.sink, base, hang);
        continue;
      }
      in.pool->Submit([&hosts, &slots, &mu, &in, &hang, base, i = submitted] {
        absl::StatusOr<report::RenderedHost> r = RenderHost(hosts[i], i, *in.sink, base, hang);
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

// The hang records of the hosts whose trace is kept decoded, made on the pool (the others are
// made as the pod trace reads them back). No records at all when the session's step pattern
// does not compile (the breakdown names that).
HangRecords KeptHangRecords(const std::vector<PodOutputHost>& hosts, const PodOutputsInput& in,
                            const profctl::v1::SessionManifest& manifest) {
  HangRecords hang;
  absl::StatusOr<analysis::StepMatcher> matcher = analysis::StepMatcher::Create(
      manifest.step_pattern().empty() ? analysis::kDefaultStepPattern : manifest.step_pattern());
  if (!matcher.ok()) return hang;
  hang.matcher = *std::move(matcher);
  hang.records.resize(hosts.size());
  absl::BlockingCounter left(static_cast<int>(hosts.size()));
  for (size_t i = 0; i < hosts.size(); ++i) {
    // Each job reads its own host and writes its own record; `left` outlives them.
    OnPoolOrHere(in.pool, [&hosts, &hang, &left, i] {
      if (hosts[i].space != nullptr) {
        hang.records[i] = analysis::ReadRankCollectives(hosts[i].space->space(), *hang.matcher);
      }
      left.DecrementCount();
    });
  }
  left.Wait();
  return hang;
}

// The verdict over every worker of the request (a rank is its position), each with its saved
// host's record: absent records (not read back) and workers that saved nothing are unknown.
// Records whose trace was neither kept nor rendered (no pod trace) are read back here.
std::optional<analysis::HangReport> JudgePodHang(const std::vector<PodOutputHost>& hosts,
                                                 const PodOutputsInput& in,
                                                 const profctl::v1::SessionManifest& manifest,
                                                 HangRecords& hang) {
  if (!hang.matcher.has_value()) return std::nullopt;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (hang.records[i].has_value()) continue;
    absl::StatusOr<std::string> bytes = in.sink->Read(hosts[i].r->xplane_file());
    DecodedTrace decoded;
    if (bytes.ok() && decoded.Parse(*bytes)) {
      hang.records[i] = analysis::ReadRankCollectives(decoded.space(), *hang.matcher);
    }
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
      rank.trace = std::move(hang.records[i]);
      break;
    }
  }
  for (size_t i = 0; i < hosts.size(); ++i) {  // a host the request does not list (tests)
    if (placed[i]) continue;
    ranks.push_back({hosts[i].r->host(), static_cast<int64_t>(ranks.size()),
                     hosts[i].r->clock().offset_ns(), std::move(hang.records[i])});
  }
  return analysis::JudgeHang(ranks);
}

// The pod step breakdown and its files, built and rendered on the pool while the pod trace is
// written, since neither needs the other (but for the pod trace's step track, added last): the
// rendering only names the pod trace, assumed to be written; should it fail, Finish renders
// again without it.
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
    // WritePodTrace writes one whenever a host was saved (this one has) into a local folder.
    job->assumed_pod_trace_ = !in.sink->LocalPath(kPodTraceFileName).empty();
    if (job->assumed_pod_trace_) job->context_.session_files.push_back(kPodTraceFileName);
    job->context_.session_files.push_back(kManifestFileName);
    job->context_.report_path = absl::StrCat(manifest.session_dir(), "/", report::kReportHtmlFile);
    OnPoolOrHere(in.pool, [j = job.get()] {  // Finish waits for it: `job` outlives it
      j->breakdown_ = analysis::BuildPodBreakdown(j->summaries_);
      j->breakdown_->hang = std::move(j->hang_);
      j->Render();
      j->done_.Notify();
    });
    return job;
  }

  // Waits for the breakdown (it stays the job's until Finish).
  const analysis::PodBreakdown* Wait() {
    done_.WaitForNotification();
    return &*breakdown_;
  }

  // Waits for the job, writes its files, and returns the breakdown.
  // `late_hang`: the hang verdict when it could only be judged after the pod trace (a host's
  // trace was read back for it): the files are rendered again with it.
  std::optional<analysis::PodBreakdown> Finish(TraceSink& sink,
                                               profctl::v1::SessionManifest& manifest,
                                               std::optional<analysis::HangReport> late_hang) {
    done_.WaitForNotification();
    bool render = false;
    if (late_hang.has_value()) {
      breakdown_->hang = std::move(late_hang);
      render = true;
    }
    if (assumed_pod_trace_ && manifest.pod_trace_file().empty()) {
      // The pod trace failed after all: the files must not name it.
      std::erase(context_.session_files, std::string(kPodTraceFileName));
      render = true;
    }
    if (render) Render();
    const absl::Span<const report::BreakdownOutput> outputs = report::BreakdownOutputs();
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string name(outputs[i].file_name);
      absl::StatusOr<std::string> written = sink.Write(name, rendered_[i]);
      if (written.ok()) {
        manifest.add_breakdown_files(*written);
      } else {
        manifest.add_errors(absl::StrCat("breakdown: ", written.status().message()));
      }
    }
    return std::move(breakdown_);
  }

 private:
  void Render() {
    rendered_.clear();
    for (const report::BreakdownOutput& out : report::BreakdownOutputs()) {
      rendered_.push_back(out.render(*breakdown_, context_));
    }
  }

  // Read by the job only until `done_`.
  std::vector<analysis::HostSummary> summaries_;
  report::BreakdownContext context_;
  bool assumed_pod_trace_ = false;
  std::optional<analysis::HangReport> hang_;
  std::optional<analysis::PodBreakdown> breakdown_;
  std::vector<std::string> rendered_;  // one per report::BreakdownOutputs(), in order
  absl::Notification done_;
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
  // The hang records of the kept traces before the pod trace, which frees each as it renders it.
  // When every host's trace was kept, the verdict goes into the breakdown's files as they are
  // rendered; else it is judged once the pod trace read the others back, and the files are
  // rendered again with it.
  HangRecords hang = KeptHangRecords(hosts, in, manifest);
  std::optional<analysis::HangReport> early_hang;
  if (hang.all_ready()) {
    early_hang = JudgePodHang(hosts, in, manifest, hang);
    hang.matcher.reset();  // judged: the pod trace makes no records
  }
  const bool judged = early_hang.has_value();
  std::unique_ptr<BreakdownJob> breakdown =
      BreakdownJob::Start(hosts, in, manifest, std::move(early_hang));
  WritePodTrace(hosts, in, manifest, hang, [&breakdown]() -> const analysis::PodBreakdown* {
    return breakdown != nullptr ? breakdown->Wait() : nullptr;
  });
  std::optional<analysis::PodBreakdown> result;
  if (breakdown != nullptr) {
    std::optional<analysis::HangReport> late_hang;
    // An interrupt stops here too: reading back what the pod trace left is not worth it then.
    if (!judged && !(in.interrupted && in.interrupted())) {
      late_hang = JudgePodHang(hosts, in, manifest, hang);
    }
    result = breakdown->Finish(*in.sink, manifest, std::move(late_hang));
  }
  synced.WaitForNotification();
  if (!sync_status.ok()) manifest.add_errors(absl::StrCat("traces: ", sync_status.message()));
  return result;
}

}  // namespace profctl::coordinator
