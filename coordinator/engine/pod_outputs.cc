#include "coordinator/engine/pod_outputs.h"

#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "analysis/hang_verdict.h"
#include "coordinator/engine/step_signal.h"
#include "report/breakdown_writers.h"
#include "report/pod_perfetto_trace.h"
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

// Host i's trace: kept decoded since saving it, else read back from disk and decoded.
absl::StatusOr<std::unique_ptr<DecodedTrace>> DecodedOf(PodTraceHost& h) {
  std::unique_ptr<DecodedTrace> decoded = std::move(h.space);
  if (decoded == nullptr) {
    decoded = std::make_unique<DecodedTrace>();
    absl::StatusOr<std::string> bytes = h.read();
    if (!bytes.ok() || !decoded->Parse(*bytes)) {
      return absl::DataLossError(
          absl::StrCat("cannot read back ", h.file, "; that host is missing from it"));
    }
  }
  return decoded;
}

// What WritePodTraceFile does in each format: open the writer, render a host (on the pool, so
// only its arguments are touched) and add it in host order.
struct ChromeJsonFormat {
  using Writer = report::PodTraceWriter;
  using Rendered = report::RenderedHost;
  static absl::StatusOr<Writer> Open(const std::string& path, int64_t start_at_ns) {
    return Writer::Open(path, start_at_ns);
  }
  // Every host is rendered here, from its decoded trace: on the pool.
  static bool Ready(const PodTraceHost&) { return false; }
  static absl::StatusOr<Rendered> Render(PodTraceHost& h, size_t i, int64_t base_ns) {
    absl::StatusOr<std::unique_ptr<DecodedTrace>> decoded = DecodedOf(h);
    if (!decoded.ok()) return decoded.status();
    return Writer::Render(h.host, (*decoded)->space(), h.offset_ns, base_ns,
                          static_cast<int64_t>(i));
  }
  static int64_t BaseNs(const Writer& w) { return w.base_ns(); }
  static absl::Status Add(Writer& w, absl::StatusOr<Rendered> r, size_t i, const PodTraceHost& h,
                          int64_t base_ns, std::vector<std::string>& errors) {
    if (!r.ok()) {  // a host that cannot be read back is left out; the writer's numbering stays
      errors.push_back(absl::StrCat("pod trace: ", r.status().message()));
      report::RenderedHost empty;
      empty.host_index = static_cast<int64_t>(i);
      empty.base_ns = base_ns;
      r = std::move(empty);
    } else if (r->planes_skipped > 0) {
      errors.push_back(absl::StrCat("pod trace: ", h.host, ": ", r->planes_skipped,
                                    " planes past the first ", Writer::kPidsPerHost - 1,
                                    " left out"));
    }
    return w.AddRendered(*r);
  }
};

struct PerfettoFormat {
  using Writer = report::PodPerfettoWriter;
  using Rendered = report::PerfettoHostFragment;
  static absl::StatusOr<Writer> Open(const std::string& path, int64_t start_at_ns) {
    return Writer::Open(path, start_at_ns);
  }
  // The host's part was rendered as it was saved (or failed then): taking it costs nothing.
  static bool Ready(const PodTraceHost& h) {
    return h.fragment != nullptr || !h.fragment_error.empty();
  }
  // The host's part rendered as it was saved, else rendered here from its trace.
  static absl::StatusOr<Rendered> Render(PodTraceHost& h, size_t i, int64_t) {
    if (h.fragment != nullptr) return std::move(*h.fragment);
    if (!h.fragment_error.empty()) return absl::InternalError(h.fragment_error);
    absl::StatusOr<std::unique_ptr<DecodedTrace>> decoded = DecodedOf(h);
    if (!decoded.ok()) return decoded.status();
    return report::RenderPerfettoHost(h.host, (*decoded)->space(), static_cast<int64_t>(i));
  }
  static int64_t BaseNs(const Writer&) { return 0; }
  static absl::Status Add(Writer& w, absl::StatusOr<Rendered> r, size_t, const PodTraceHost& h,
                          int64_t, std::vector<std::string>& errors) {
    if (!r.ok()) {  // left out, named
      errors.push_back(absl::StrCat("pod trace: ", h.host, " left out: ", r.status().message()));
      return absl::OkStatus();
    }
    if (r->planes_skipped > 0 || r->events_skipped > 0) {
      errors.push_back(absl::StrCat("pod trace: ", h.host, ": ", r->planes_skipped,
                                    " planes past the first ", Writer::kPlanesPerHost - 1, " and ",
                                    r->events_skipped,
                                    " events past the tracks a host or line may have, left out"));
    }
    return w.AddHost(*r, h.offset_ns);
  }
};

// Each host is rendered and compressed on the pool, at most kPodTraceHostsInFlight at once, and
// joined into the file in host order here; without a pool, one at a time here (memory: at most
// that many decoded traces more). Each job owns its host's kept trace and frees it; no two jobs
// share a host.
template <typename Format>
PodTraceOutcome WriteInFormat(std::vector<PodTraceHost> hosts, const std::string& path,
                              int64_t start_at_ns, WorkPool* pool,
                              const std::function<bool()>& interrupted,
                              absl::FunctionRef<const analysis::PodBreakdown*()> breakdown) {
  using Rendered = typename Format::Rendered;
  PodTraceOutcome outcome;
  absl::StatusOr<typename Format::Writer> writer = Format::Open(path, start_at_ns);
  if (!writer.ok()) {
    outcome.errors.push_back(absl::StrCat("pod trace: ", writer.status().message()));
    return outcome;
  }
  struct Slot {
    std::optional<absl::StatusOr<Rendered>> rendered;
  };
  std::vector<Slot> slots(hosts.size());
  absl::Mutex mu;
  const int64_t base = Format::BaseNs(*writer);
  size_t submitted = 0;
  const auto submit_up_to = [&](size_t limit) {
    for (; submitted < std::min(limit, slots.size()); ++submitted) {
      // A part rendered already is taken here: a pool job for each would cost more than it (at
      // 1,024 hosts about half of joining the pod trace went into the hand-offs).
      if (pool == nullptr || Format::Ready(hosts[submitted])) {
        absl::StatusOr<Rendered> r = Format::Render(hosts[submitted], submitted, base);
        absl::MutexLock lock(&mu);
        slots[submitted].rendered = std::move(r);
        continue;
      }
      pool->Submit([&hosts, &slots, &mu, base, i = submitted] {
        absl::StatusOr<Rendered> r = Format::Render(hosts[i], i, base);
        absl::MutexLock lock(&mu);
        slots[i].rendered = std::move(r);
      });
    }
  };
  absl::Status status = absl::OkStatus();
  for (size_t i = 0; i < slots.size(); ++i) {
    if (interrupted && interrupted()) {
      // Jobs still rendering hold references to these locals: wait for them (at most
      // kPodTraceHostsInFlight hosts, one render each). The writer, unfinished, leaves no file.
      for (size_t j = i; j < submitted; ++j) {
        mu.LockWhen(absl::Condition(
            +[](Slot* slot) { return slot->rendered.has_value(); }, &slots[j]));
        mu.Unlock();
      }
      outcome.interrupted = true;
      return outcome;
    }
    submit_up_to(i + kPodTraceHostsInFlight);
    // Every submitted job finishes before this returns: they hold references to these locals.
    mu.LockWhen(absl::Condition(
        +[](Slot* slot) { return slot->rendered.has_value(); }, &slots[i]));
    absl::StatusOr<Rendered> r = *std::move(slots[i].rendered);
    slots[i].rendered.reset();
    mu.Unlock();
    absl::Status added = Format::Add(*writer, std::move(r), i, hosts[i], base, outcome.errors);
    if (status.ok()) status = added;
  }
  if (const analysis::PodBreakdown* b = status.ok() ? breakdown() : nullptr; b != nullptr) {
    status = writer->AddPodSteps(*b);
  }
  if (status.ok()) status = writer->Finish();
  outcome.written = status.ok();
  if (!status.ok()) outcome.errors.push_back(absl::StrCat("pod trace: ", status.message()));
  return outcome;
}

}  // namespace

PodTraceOutcome WritePodTraceFile(std::vector<PodTraceHost> hosts, const std::string& path,
                                  int64_t start_at_ns, WorkPool* pool,
                                  const std::function<bool()>& interrupted,
                                  absl::FunctionRef<const analysis::PodBreakdown*()> breakdown,
                                  PodTraceFormat format) {
  return format == PodTraceFormat::kPerfetto
             ? WriteInFormat<PerfettoFormat>(std::move(hosts), path, start_at_ns, pool, interrupted,
                                             breakdown)
             : WriteInFormat<ChromeJsonFormat>(std::move(hosts), path, start_at_ns, pool,
                                               interrupted, breakdown);
}

namespace {

// The pod trace of the session's saved hosts, into the session folder: Perfetto's, joined from
// the parts rendered as the hosts were saved, and, when the request asked for it, the Chrome
// JSON one, rendered from the kept decoded traces (else read back). False when an interrupt
// stopped the Perfetto one.
bool WritePodTrace(std::vector<PodOutputHost>& hosts, const PodOutputsInput& in,
                   profctl::v1::SessionManifest& manifest,
                   absl::FunctionRef<const analysis::PodBreakdown*()> breakdown) {
  const std::string path = in.sink->LocalPath(kPodTraceFileName);
  if (hosts.empty() || path.empty()) return true;  // not a local folder (tests' in-memory sink)
  const auto trace_hosts = [&](PodTraceFormat format) {
    std::vector<PodTraceHost> out;
    out.reserve(hosts.size());
    for (PodOutputHost& h : hosts) {
      const std::string& file = h.r->xplane_file();
      PodTraceHost& t = out.emplace_back();
      t.host = h.r->host();
      t.offset_ns = h.r->clock().offset_ns();
      t.file = file;
      t.read = [sink = in.sink, file] { return sink->Read(file); };
      if (format == PodTraceFormat::kPerfetto) {
        t.fragment = std::move(h.pod_trace);
        t.fragment_error = std::move(h.pod_trace_error);
      } else {
        t.space = std::move(h.space);
      }
    }
    return out;
  };
  PodTraceOutcome outcome = WritePodTraceFile(trace_hosts(PodTraceFormat::kPerfetto), path,
                                              in.start_at_ns, in.pool, in.interrupted, breakdown);
  for (std::string& e : outcome.errors) manifest.add_errors(std::move(e));
  if (outcome.written) manifest.set_pod_trace_file(kPodTraceFileName);
  if (outcome.interrupted) return false;
  if (!manifest.request().pod_trace_json()) return true;
  PodTraceOutcome json = WritePodTraceFile(
      trace_hosts(PodTraceFormat::kChromeJson), in.sink->LocalPath(kPodTraceJsonFileName),
      in.start_at_ns, in.pool, in.interrupted, breakdown, PodTraceFormat::kChromeJson);
  for (std::string& e : json.errors) manifest.add_errors(absl::StrCat("(JSON) ", e));
  if (json.interrupted) manifest.add_errors("pod trace (JSON): interrupted, not written");
  if (json.written) manifest.set_pod_trace_json_file(kPodTraceJsonFileName);
  return true;
}

// What the hang verdict judges: every worker of the request (a rank is its position), each with
// its saved host's record (made as it was saved); workers that saved nothing are unknown. Absent
// when no saved host has a record (the step pattern does not compile: the breakdown names that).
// The verdict itself is judged on the pool, beside the pod trace (BreakdownJob).
std::optional<std::vector<analysis::HangRankInput>> PodHangRanks(
    std::vector<PodOutputHost>& hosts, const profctl::v1::SessionManifest& manifest) {
  if (absl::c_none_of(hosts, [](const PodOutputHost& h) { return h.collectives.has_value(); })) {
    return std::nullopt;
  }
  std::vector<analysis::HangRankInput> ranks;
  std::vector<bool> placed(hosts.size(), false);
  // Each worker takes the first host not placed yet with its address, found by address (a pass
  // over the hosts for every worker compared 1 M addresses at 1,024 hosts, 17 M at 4,096).
  struct SameAddress {
    std::vector<size_t> hosts;  // in host order
    size_t next = 0;
  };
  absl::flat_hash_map<absl::string_view, SameAddress> by_address;
  by_address.reserve(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) by_address[hosts[i].r->address()].hosts.push_back(i);
  const auto& workers = manifest.request().workers();
  for (int w = 0; w < workers.size(); ++w) {
    analysis::HangRankInput& rank = ranks.emplace_back();
    rank.host = workers[w];
    rank.rank = w;
    const auto it = by_address.find(workers[w]);
    if (it == by_address.end() || it->second.next == it->second.hosts.size()) continue;
    const size_t i = it->second.hosts[it->second.next++];
    placed[i] = true;
    rank.host = hosts[i].r->host();
    rank.offset_ns = hosts[i].r->clock().offset_ns();
    rank.trace = std::move(hosts[i].collectives);
    rank.signal = HangSignalOf(hosts[i].r->step_signal());
  }
  for (size_t i = 0; i < hosts.size(); ++i) {  // a host the request does not list (tests)
    if (placed[i]) continue;
    ranks.push_back({hosts[i].r->host(), static_cast<int64_t>(ranks.size()),
                     hosts[i].r->clock().offset_ns(), std::move(hosts[i].collectives),
                     HangSignalOf(hosts[i].r->step_signal())});
  }
  for (PodOutputHost& h : hosts) h.collectives.reset();
  return ranks;
}

// The pod step breakdown, built on the pool while the pod trace is written (only the pod trace's
// step track, added last, waits for it), and its files, rendered once the pod trace's fate is
// known, each on the pool.
class BreakdownJob {
 public:
  // Takes the hosts' summaries. Null when no host has one.
  static std::unique_ptr<BreakdownJob> Start(
      std::vector<PodOutputHost>& hosts, const PodOutputsInput& in,
      const profctl::v1::SessionManifest& manifest,
      std::optional<std::vector<analysis::HangRankInput>> hang) {
    auto job = std::make_unique<BreakdownJob>();
    job->hang_ranks_ = std::move(hang);
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
      if (j->hang_ranks_.has_value()) {
        j->inputs_.hang = analysis::JudgeHang(*j->hang_ranks_);
        j->hang_ranks_.reset();
      }
      j->breakdown_ = analysis::BuildPodBreakdown(j->summaries_, j->inputs_);
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
  // manifest.pod_trace_file says it was written), and returns the breakdown. After an interrupt
  // no file is rendered: their names go into *skipped.
  std::optional<analysis::PodBreakdown> Finish(const PodOutputsInput& in,
                                               profctl::v1::SessionManifest& manifest,
                                               std::vector<std::string>* skipped) {
    built_.WaitForNotification();
    if (in.interrupted && in.interrupted()) {
      for (const report::BreakdownOutput& out : report::BreakdownOutputs()) {
        skipped->emplace_back(out.file_name);
      }
      return std::move(breakdown_);
    }
    for (const std::string* f : {&manifest.pod_trace_file(), &manifest.pod_trace_json_file()}) {
      if (!f->empty()) context_.session_files.push_back(*f);
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
  std::optional<std::vector<analysis::HangRankInput>> hang_ranks_;  // judged by the build job
  analysis::PodInputs inputs_;  // the hang verdict, an input of the pod's verdicts
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
  std::optional<analysis::PodBreakdown> result;
  std::vector<std::string> skipped;  // what an interrupt left out
  const bool pod_trace_wanted = !hosts.empty() && !in.sink->LocalPath(kPodTraceFileName).empty();
  if (in.interrupted && in.interrupted()) {
    // Interrupted before the outputs began: none of them (the hang verdict, the breakdown and
    // the pod trace are all rebuilt from the saved traces by profctl analyze).
    if (pod_trace_wanted) skipped.emplace_back(kPodTraceFileName);
    if (absl::c_any_of(hosts, [](const PodOutputHost& h) { return h.summary.has_value(); })) {
      for (const report::BreakdownOutput& out : report::BreakdownOutputs()) {
        skipped.emplace_back(out.file_name);
      }
    }
  } else {
    std::unique_ptr<BreakdownJob> breakdown =
        BreakdownJob::Start(hosts, in, manifest, PodHangRanks(hosts, manifest));
    if (!WritePodTrace(hosts, in, manifest, [&breakdown]() -> const analysis::PodBreakdown* {
          return breakdown != nullptr ? breakdown->Wait() : nullptr;
        })) {
      skipped.emplace_back(kPodTraceFileName);
    }
    if (breakdown != nullptr) result = breakdown->Finish(in, manifest, &skipped);
  }
  if (!skipped.empty()) {
    manifest.add_errors(InterruptedOutputsError(skipped, manifest.session_dir()));
  }
  synced.WaitForNotification();
  if (!sync_status.ok()) manifest.add_errors(absl::StrCat("traces: ", sync_status.message()));
  return result;
}

std::string InterruptedOutputsError(const std::vector<std::string>& skipped,
                                    const std::string& session_dir) {
  const bool pod_trace = absl::c_linear_search(skipped, kPodTraceFileName);
  return absl::StrCat("interrupted: not written: ", absl::StrJoin(skipped, ", "),
                      "; every saved host's trace is kept; build ",
                      skipped.size() == 1 ? "it" : "them", " with: profctl analyze ",
                      session_dir.empty() ? "SESSION_FOLDER" : session_dir,
                      pod_trace ? " --pod-trace" : "");
}

}  // namespace profctl::coordinator
