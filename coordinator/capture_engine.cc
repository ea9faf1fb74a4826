#include "coordinator/capture_engine.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "boost/asio/post.hpp"
#include "boost/asio/thread_pool.hpp"
#include "common/file_util.h"
#include "common/gzip.h"
#include "common/version.h"
#include "common/xspace.h"
#include "coordinator/clock_sync.h"
#include "coordinator/trace_json.h"

namespace profctl::coordinator {
namespace {

using profctl::v1::HostResult;
using profctl::v1::SessionManifest;
using tensorflow::profiler::XSpace;

constexpr char kOk[] = "ok";
constexpr char kFailed[] = "failed";

// Runs fn(i) for i in [0, n) on `pool` and waits for all. While waiting, calls tick() every
// tick_ns of `clock` time when a tick is given.
template <typename Fn>
void ParallelFor(boost::asio::thread_pool& pool, size_t n, Fn fn, const Clock& clock,
                 int64_t tick_ns = 0, const std::function<void()>& tick = {}) {
  if (n == 0) return;
  // Shared: the last task may still be inside Stop() when the waiter wakes and returns.
  auto done = std::make_shared<StopSignal>();
  auto left = std::make_shared<std::atomic<size_t>>(n);
  for (size_t i = 0; i < n; ++i) {
    boost::asio::post(pool, [&fn, done, left, i] {
      fn(i);
      if (left->fetch_sub(1) == 1) done->Stop();
    });
  }
  if (tick) {
    for (int64_t next = clock.MonoNs() + tick_ns; clock.WaitUntil(next, *done); next += tick_ns) {
      tick();
    }
  }
  done->Wait(
      +[](const void*) { return false; }, nullptr, absl::InfiniteDuration());
}

double Millis(int64_t ns) { return static_cast<double>(ns) / kNanosPerMilli; }

int64_t CountSteps(const XSpace& space) {
  const xspace::XPlane* host = xspace::FindPlane(space, xspace::kHostPlaneName);
  if (host == nullptr) return 0;
  // Several threads (one per GPU process) mark the same step: count distinct step numbers.
  const xspace::XPlaneReader reader(*host);
  absl::flat_hash_set<int64_t> steps;
  reader.ForEachEvent([&](const xspace::XLine&, const xspace::XEvent& e) {
    if (reader.IntStat(e, xspace::kStatIsRoot).value_or(0) != 1) return;
    if (std::optional<int64_t> num = reader.IntStat(e, xspace::kStatStepNum)) steps.insert(*num);
  });
  return static_cast<int64_t>(steps.size());
}

struct HostState {
  std::unique_ptr<AgentClient> client;
  AgentInfo info;
  bool prepared = false;
  XSpace space;  // parsed trace, for the pod timeline
};

}  // namespace

std::vector<std::string> AssignHostStems(const std::vector<WorkerAddress>& workers,
                                         const std::vector<std::string>& agent_names) {
  std::vector<std::string> stems;
  absl::flat_hash_set<std::string> taken;
  for (size_t i = 0; i < workers.size(); ++i) {
    const std::string& name = i < agent_names.size() ? agent_names[i] : std::string();
    std::string stem =
        (!name.empty() && ValidateFileStem("name", name).ok()) ? name : workers[i].file_stem();
    if (taken.contains(stem)) stem = workers[i].file_stem();
    const std::string base = stem;
    for (int n = 2; taken.contains(stem); ++n) stem = absl::StrCat(base, "-", n);
    taken.insert(stem);
    stems.push_back(stem);
  }
  return stems;
}

bool CaptureEngine::BeginCapture(AgentClient* client) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return false;
  capturing_.push_back(client);
  return true;
}

void CaptureEngine::EndCapture(AgentClient* client) {
  absl::MutexLock lock(&mu_);  // waits for a Cancel() in progress, which may use the client
  capturing_.erase(std::find(capturing_.begin(), capturing_.end(), client));
}

void CaptureEngine::Cancel() {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return;
  cancelled_ = true;
  // All at once, so hosts that do not answer cost one deadline in total, not one each. The lock
  // stays held until every call returns: capture tasks cannot finish (and free their clients)
  // meanwhile. A failed Cancel leaves that host to finish its window: nothing is lost either way.
  std::vector<std::thread> calls;
  calls.reserve(capturing_.size());
  for (AgentClient* client : capturing_) {
    calls.emplace_back([this, client]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      (void)client->Cancel(session_, options_.rpc_timeout_ms);
    });
  }
  for (std::thread& t : calls) t.join();
}

void CaptureEngine::Progress(const std::string& line) {
  if (deps_.progress) deps_.progress(line);
}

absl::StatusOr<SessionManifest> CaptureEngine::Run(const CapturePlan& plan) {
  if (plan.workers.empty()) return absl::InvalidArgumentError("no workers to capture");
  if (plan.duration_ms < 1) {
    return absl::InvalidArgumentError(absl::StrCat("duration_ms=", plan.duration_ms, " < 1"));
  }
  const Clock& clock = *deps_.clock;
  const size_t n = plan.workers.size();
  {
    absl::MutexLock lock(&mu_);
    session_ = plan.session;
  }
  auto cancelled = [&] {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  };

  SessionManifest manifest;
  manifest.set_profctl_version(kVersion);
  auto* req = manifest.mutable_request();
  for (const WorkerAddress& w : plan.workers) req->add_workers(w.address);
  req->set_duration_ms(static_cast<uint64_t>(plan.duration_ms));
  req->set_logdir(plan.logdir);
  req->set_session(plan.session);
  manifest.set_session_dir(deps_.sink->location());
  std::vector<HostState> state(n);
  std::vector<HostResult> results(n);
  for (size_t i = 0; i < n; ++i) {
    results[i].set_address(plan.workers[i].address);
    results[i].set_status(kFailed);
    results[i].set_attempts(1);
  }
  boost::asio::thread_pool pool(
      static_cast<size_t>(std::clamp<int64_t>(static_cast<int64_t>(n), 1, options_.max_parallel)));
  std::mutex progress_mu;
  auto progress = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(progress_mu);
    Progress(line);
  };

  // 1. Prepare: identity and clock offset of every worker.
  ParallelFor(
      pool, n,
      [&](size_t i) {
        HostState& h = state[i];
        HostResult& r = results[i];
        if (cancelled()) {
          r.set_error("interrupted before capture");
          return;
        }
        const int64_t t0 = clock.MonoNs();
        h.client = deps_.clients->Connect(plan.workers[i]);
        absl::StatusOr<AgentInfo> info = h.client->GetInfo(options_.rpc_timeout_ms);
        if (!info.ok()) {
          r.set_error(absl::StrCat("prepare: ", info.status().ToString()));
        } else {
          h.info = *info;
          r.set_agent_name(info->name);
          r.set_agent_hostname(info->hostname);
          r.set_agent_version(info->version);
          absl::StatusOr<ClockOffset> offset = EstimateClockOffset(
              *h.client, clock, options_.clock_sync_samples, options_.rpc_timeout_ms);
          if (!offset.ok()) {
            r.set_error(absl::StrCat("clock sync: ", offset.status().ToString()));
          } else if (plan.duration_ms > info->max_duration_ms && info->max_duration_ms > 0) {
            r.set_error(absl::StrCat("prepare: agent accepts captures of at most ",
                                     info->max_duration_ms, " ms, asked for ", plan.duration_ms));
          } else {
            auto* c = r.mutable_clock();
            c->set_offset_ns(offset->offset_ns);
            c->set_rtt_ns(offset->rtt_ns);
            c->set_samples(static_cast<uint32_t>(offset->samples));
            h.prepared = true;
          }
        }
        r.set_prepare_ms(Millis(clock.MonoNs() - t0));
        progress(h.prepared
                     ? absl::StrFormat("%s: clock offset %+.3f ms (rtt %.3f ms)",
                                       plan.workers[i].address, Millis(r.clock().offset_ns()),
                                       Millis(r.clock().rtt_ns()))
                     : absl::StrCat(plan.workers[i].address, ": FAILED ", r.error()));
      },
      clock);

  std::vector<std::string> names;
  names.reserve(n);
  for (const HostState& h : state) names.push_back(h.info.name);
  const std::vector<std::string> stems = AssignHostStems(plan.workers, names);
  int64_t max_rtt = 0;
  for (size_t i = 0; i < n; ++i) {
    results[i].set_host(stems[i]);
    if (state[i].prepared) max_rtt = std::max(max_rtt, results[i].clock().rtt_ns());
  }

  // 2. One start instant for everyone, on the coordinator's clock.
  const int64_t lead_ns =
      std::max(options_.min_lead_ms * kNanosPerMilli, 2 * max_rtt + 50 * kNanosPerMilli);
  const int64_t start_at = clock.WallNs() + lead_ns;
  manifest.set_start_at_ns(start_at);
  const size_t prepared = static_cast<size_t>(
      std::count_if(state.begin(), state.end(), [](const HostState& h) { return h.prepared; }));
  if (prepared > 0) {
    progress(absl::StrFormat("capturing %d of %d workers: window starts in %d ms, lasts %d ms",
                             prepared, n, lead_ns / kNanosPerMilli, plan.duration_ms));
  }

  // 3. Capture everyone prepared; save each trace as it arrives. Tick while waiting.
  const int64_t window_start_mono = clock.MonoNs() + lead_ns;
  const int64_t window_end_mono = window_start_mono + plan.duration_ms * kNanosPerMilli;
  std::atomic<size_t> pending{prepared};
  auto tick = [&] {
    const int64_t now = clock.MonoNs();
    if (now < window_start_mono) return;
    if (now < window_end_mono) {
      progress(absl::StrFormat("recording: %.0f of %.0f s", Millis(now - window_start_mono) / 1000,
                               static_cast<double>(plan.duration_ms) / 1000));
    } else {
      progress(absl::StrFormat("waiting for %d host(s) to send their traces", pending.load()));
    }
  };
  ParallelFor(
      pool, n,
      [&](size_t i) {
        HostState& h = state[i];
        HostResult& r = results[i];
        if (!h.prepared) return;
        struct Done {
          std::atomic<size_t>& pending;
          ~Done() { --pending; }
        } done_guard{pending};
        const int64_t t0 = clock.MonoNs();
        const int64_t offset = r.clock().offset_ns();
        CaptureArgs args{plan.session, start_at + offset, plan.duration_ms};
        const int64_t timeout_ms =
            lead_ns / kNanosPerMilli + plan.duration_ms + options_.transfer_timeout_ms;
        if (!BeginCapture(h.client.get())) {
          r.set_error("interrupted before capture");
          return;
        }
        absl::StatusOr<CaptureReply> reply = h.client->Capture(args, timeout_ms);
        EndCapture(h.client.get());
        r.set_capture_ms(Millis(clock.MonoNs() - t0));
        if (!reply.ok()) {
          r.set_error(absl::StrCat("capture: ", reply.status().ToString()));
          progress(absl::StrCat(r.host(), ": FAILED ", r.error()));
          return;
        }
        r.set_bytes(reply->xspace_bytes.size());
        r.set_agent_start_ns(reply->start_ns);
        r.set_agent_stop_ns(reply->stop_ns);
        r.set_aligned_start_ns(reply->start_ns - offset);
        r.set_aligned_stop_ns(reply->stop_ns - offset);
        r.set_cancelled(reply->cancelled);
        absl::Status valid = h.space.ParseFromString(reply->xspace_bytes)
                                 ? xspace::Validate(h.space)
                                 : absl::DataLossError("not a serialized XSpace");
        if (!valid.ok()) {
          h.space.Clear();
          // Keep the bytes for inspection, under a name TensorBoard will not try to load.
          absl::StatusOr<std::string> kept =
              deps_.sink->Write(RejectedXPlaneFileName(r.host()), reply->xspace_bytes);
          r.set_error(absl::StrCat("capture: agent sent an invalid trace (", valid.ToString(), ")",
                                   kept.ok() ? absl::StrCat("; raw bytes kept in ", *kept) : ""));
          progress(absl::StrCat(r.host(), ": FAILED ", r.error()));
          return;
        }
        absl::StatusOr<std::string> file =
            deps_.sink->Write(XPlaneFileName(r.host()), reply->xspace_bytes);
        if (!file.ok()) {
          h.space.Clear();
          r.set_error(absl::StrCat("write: ", file.status().ToString()));
          progress(absl::StrCat(r.host(), ": FAILED ", r.error()));
          return;
        }
        r.set_xplane_file(*file);
        r.set_events(static_cast<uint64_t>(xspace::CountEvents(h.space)));
        r.set_steps(static_cast<uint64_t>(CountSteps(h.space)));
        r.set_status(kOk);
        progress(absl::StrFormat("%s: saved %s (%d bytes, %d events, %d steps)", r.host(), *file,
                                 r.bytes(), r.events(), r.steps()));
      },
      clock, options_.progress_tick_ms * kNanosPerMilli, tick);
  pool.join();

  // 4. Pod outputs and manifest.
  size_t ok = 0;
  std::vector<HostTrace> traces;
  for (size_t i = 0; i < n; ++i) {
    if (results[i].status() == kOk) {
      ++ok;
      traces.push_back({results[i].host(), &state[i].space, results[i].clock().offset_ns()});
    }
    *manifest.add_hosts() = std::move(results[i]);
  }
  manifest.set_status(ok == n ? "ok" : ok == 0 ? "failed" : "partial");
  if (cancelled()) {
    manifest.add_errors(
        "interrupted: capture was cancelled; saved traces hold what was recorded until then");
  }
  if (!traces.empty()) {
    absl::StatusOr<std::string> gz = GzipCompress(PodTraceJson(traces, start_at));
    absl::StatusOr<std::string> file =
        gz.ok() ? deps_.sink->Write(kPodTraceFileName, *gz) : gz.status();
    if (file.ok()) {
      manifest.set_pod_trace_file(*file);
    } else {
      manifest.add_errors(absl::StrCat("pod trace: ", file.status().ToString()));
    }
  }
  manifest.set_finished_ns(clock.WallNs());
  if (absl::StatusOr<std::string> f = deps_.sink->Write(kManifestFileName, ManifestJson(manifest));
      !f.ok()) {
    manifest.add_errors(absl::StrCat("manifest: ", f.status().ToString()));
  }
  return manifest;
}

}  // namespace profctl::coordinator
