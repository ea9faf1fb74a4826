#include "agent/capture_manager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/xspace.h"
#include "spdlog/spdlog.h"

namespace profctl::agent {

absl::Status ValidateSessionId(const std::string& id) { return ValidateFileStem("session id", id); }

CaptureManager::CaptureManager(Dependencies deps, CaptureManagerOptions options)
    : deps_(std::move(deps)), options_(std::move(options)) {}

std::vector<std::string> CaptureManager::collector_names() const {
  std::vector<std::string> names;
  for (const Collector* c : deps_.collectors) names.emplace_back(c->name());
  return names;
}

absl::StatusOr<std::unique_ptr<CaptureManager::Session>> CaptureManager::Begin(CaptureSpec spec) {
  if (absl::Status s = ValidateSessionId(spec.session_id); !s.ok()) return s;
  if (spec.duration_ms < options_.min_duration_ms || spec.duration_ms > options_.max_duration_ms) {
    return absl::InvalidArgumentError(absl::StrCat("duration_ms=", spec.duration_ms,
                                                   " is outside [", options_.min_duration_ms, ", ",
                                                   options_.max_duration_ms, "] ms"));
  }
  if (spec.start_at_ns < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("start_at_ns=", spec.start_at_ns, " is negative"));
  }
  const int64_t now = deps_.clock->WallNs();
  if (spec.start_at_ns != 0 &&
      spec.start_at_ns - now > options_.max_start_delay_ms * kNanosPerMilli) {
    return absl::InvalidArgumentError(
        absl::StrCat("start_at_ns is ", (spec.start_at_ns - now) / kNanosPerMilli,
                     " ms in the future on this agent's clock; at most ",
                     options_.max_start_delay_ms, " ms is allowed (are the clocks far apart?)"));
  }
  std::vector<Collector*> chosen;
  if (spec.collectors.empty()) {
    chosen = deps_.collectors;
  } else {
    for (const std::string& name : spec.collectors) {
      auto it = std::find_if(deps_.collectors.begin(), deps_.collectors.end(),
                             [&](const Collector* c) { return c->name() == name; });
      if (it == deps_.collectors.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("collector '", name, "' is not enabled on this agent (enabled: ",
                         absl::StrJoin(collector_names(), ", "), ")"));
      }
      if (std::find(chosen.begin(), chosen.end(), *it) == chosen.end()) chosen.push_back(*it);
    }
  }
  absl::MutexLock lock(&mu_);
  if (active_ != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("agent busy: capture session '", active_->id(),
                                                 "' is running; retry when it ends"));
  }
  auto session = std::unique_ptr<Session>(new Session(this, std::move(spec), std::move(chosen)));
  active_ = session.get();
  return session;
}

absl::Status CaptureManager::Cancel(const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  if (active_ == nullptr || active_->id() != session_id) {
    return absl::NotFoundError(absl::StrCat("no running capture session '", session_id, "'"));
  }
  active_->Stop();
  return absl::OkStatus();
}

void CaptureManager::CancelActive() {
  absl::MutexLock lock(&mu_);
  if (active_ != nullptr) active_->Stop();
}

bool CaptureManager::busy() const {
  absl::MutexLock lock(&mu_);
  return active_ != nullptr;
}

void CaptureManager::Release(Session* session) {
  absl::MutexLock lock(&mu_);
  if (active_ == session) active_ = nullptr;
}

CaptureManager::Session::~Session() { manager_->Release(this); }

CaptureResult CaptureManager::Session::Run() {
  const Clock& clock = *manager_->deps_.clock;
  CaptureResult result;
  result.session_id = spec_.session_id;
  tensorflow::profiler::XSpace& space = result.space;
  space.add_hostnames(manager_->options_.host_name);

  // A collector that fails a step is reported and skipped for the rest of this session.
  std::vector<bool> ok(collectors_.size(), true);
  auto step = [&](absl::string_view what, auto&& fn) {
    for (size_t i = 0; i < collectors_.size(); ++i) {
      if (!ok[i]) continue;
      if (absl::Status s = fn(collectors_[i]); !s.ok()) {
        ok[i] = false;
        space.add_errors(absl::StrCat("collector ", collectors_[i]->name(), ": ", what,
                                      " failed: ", s.ToString()));
        spdlog::warn("session {}: collector {} {} failed: {}", id(),
                     std::string(collectors_[i]->name()), std::string(what), s.ToString());
      }
    }
  };

  CaptureOptions opts{spec_.session_id, spec_.start_at_ns, spec_.duration_ms * kNanosPerMilli};
  step("prepare", [&](Collector* c) { return c->Prepare(opts); });

  const int64_t wait_ns = spec_.start_at_ns == 0 ? 0 : spec_.start_at_ns - clock.WallNs();
  if (wait_ns > 0 && !clock.WaitUntil(clock.MonoNs() + wait_ns, stop_)) {
    result.cancelled = true;
    result.start_ns = result.stop_ns = clock.WallNs();
    space.add_warnings("capture cancelled before its start instant; nothing was recorded");
    return result;
  }
  const int64_t start_mono = clock.MonoNs();
  result.start_ns = clock.WallNs();
  if (spec_.start_at_ns != 0 && result.start_ns - spec_.start_at_ns > kNanosPerMilli) {
    space.add_warnings(absl::StrCat("capture started ",
                                    (result.start_ns - spec_.start_at_ns) / kNanosPerMicro,
                                    " us after the requested start instant"));
  }
  step("start", [&](Collector* c) { return c->Start(result.start_ns); });
  result.cancelled = !clock.WaitUntil(start_mono + spec_.duration_ms * kNanosPerMilli, stop_);
  result.stop_ns = clock.WallNs();
  step("stop", [&](Collector* c) { return c->Stop(result.stop_ns); });
  step("collect", [&](Collector* c) { return c->Collect(&space); });
  if (result.cancelled) {
    space.add_warnings(absl::StrCat("capture cancelled after ",
                                    (result.stop_ns - result.start_ns) / kNanosPerMilli, " ms of ",
                                    spec_.duration_ms, " ms"));
  }

  xspace::XPlaneBuilder env(space.add_planes(), /*id=*/1000, xspace::kTaskEnvPlaneName);
  env.AddPlaneStat(env.StatMetadataId(xspace::kStatProfileStart), result.start_ns);
  env.AddPlaneStat(env.StatMetadataId(xspace::kStatProfileStop), result.stop_ns);
  return result;
}

}  // namespace profctl::agent
