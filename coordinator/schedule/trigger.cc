#include "coordinator/schedule/trigger.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"

namespace profctl::coordinator::schedule {
namespace {

constexpr int64_t kMaxStepNs = int64_t{86'400} * kNanosPerSecond;
// An answer's samples may end a little after its own now_ns (the agent stamps now first).
constexpr int64_t kFutureSlackNs = kNanosPerSecond;

double Median(std::vector<int64_t>* v) {
  const size_t mid = v->size() / 2;
  std::nth_element(v->begin(), v->begin() + static_cast<std::ptrdiff_t>(mid), v->end());
  const auto hi = static_cast<double>((*v)[mid]);
  if (v->size() % 2 == 1) return hi;
  const auto lo = static_cast<double>(
      *std::max_element(v->begin(), v->begin() + static_cast<std::ptrdiff_t>(mid)));
  return (lo + hi) / 2;
}

}  // namespace

void StepTimeWatch::BeginPoll() {
  for (auto& [name, h] : hosts_) h.answered = false;
}

int64_t StepTimeWatch::Add(const std::string& host,
                           const profctl::v1::GetStepSignalResponse& answer) {
  Host& h = hosts_[host];
  int64_t dropped = 0;
  if (answer.now_ns() <= 0) return answer.samples_size();  // no clock: nothing can be placed
  h.answered = true;
  h.has_signal = answer.sources_size() > 0;
  h.stalls.clear();
  for (const profctl::v1::StepStall& st : answer.stalls()) {
    if (h.stalls.size() == kMaxStalls) break;
    if (st.stalled_for_ns() <= 0 || st.stalled_for_ns() > kMaxStepNs * 30) {
      ++dropped;  // a stall of no time (or over a month) is no verdict
      continue;
    }
    h.stalls.push_back(st);
  }
  // A host whose clock jumped back (a restarted agent, a stepped clock) starts over: its old
  // samples would sit in the future of its new clock.
  if (answer.now_ns() + kFutureSlackNs < h.now_ns) h.samples.clear();
  h.now_ns = answer.now_ns();
  for (const profctl::v1::StepSignalSample& s : answer.samples()) {
    const bool plausible = s.duration_ns() > 0 && s.duration_ns() <= kMaxStepNs &&
                           s.end_ns() <= h.now_ns + kFutureSlackNs &&
                           (h.samples.empty() || s.end_ns() >= h.samples.back().end_ns);
    if (!plausible) {
      ++dropped;
      continue;
    }
    h.samples.push_back({s.end_ns(), s.duration_ns()});
  }
  // Keep what the judgment can use, and at most kMaxSamplesPerHost: a job with very short steps
  // (thousands per window) is thinned uniformly, every other sample at a time, so the window and
  // the baseline keep their shares and their medians (dropping the oldest instead would starve
  // the baseline).
  const int64_t horizon = h.now_ns - config_.window_ns - config_.baseline_ns;
  while (!h.samples.empty() && h.samples.front().end_ns <= horizon) h.samples.pop_front();
  while (h.samples.size() > kMaxSamplesPerHost) {
    std::deque<Sample> kept;
    for (size_t i = 1 - h.samples.size() % 2; i < h.samples.size(); i += 2) {
      kept.push_back(h.samples[i]);  // the latest sample always stays (SinceNs)
    }
    h.samples.swap(kept);
  }
  return dropped;
}

void StepTimeWatch::NoSignal(const std::string& host) {
  Host& h = hosts_[host];
  h.answered = true;
  h.has_signal = false;
  h.samples.clear();
  h.stalls.clear();
}

void StepTimeWatch::Retain(const std::set<std::string>& hosts) {
  for (auto it = hosts_.begin(); it != hosts_.end();) {
    it = hosts.contains(it->first) ? std::next(it) : hosts_.erase(it);
  }
}

int64_t StepTimeWatch::SinceNs(const std::string& host) const {
  auto it = hosts_.find(host);
  if (it == hosts_.end() || it->second.samples.empty()) return 0;
  return it->second.samples.back().end_ns;
}

size_t StepTimeWatch::samples(const std::string& host) const {
  auto it = hosts_.find(host);
  return it == hosts_.end() ? 0 : it->second.samples.size();
}

TriggerJudgment StepTimeWatch::JudgeHang() const {
  TriggerJudgment j;
  int64_t answered = 0;
  for (const auto& [name, h] : hosts_) {
    if (!h.answered) continue;
    ++answered;
    ++j.hosts_judged;
    for (const profctl::v1::StepStall& st : h.stalls) {
      if (j.regressed && st.stalled_for_ns() <= j.stalled_for_ns) continue;
      j.regressed = true;
      j.host = name;
      j.stall_source = st.source();
      j.stall_last_step = st.last_step_num();
      j.stalled_for_ns = st.stalled_for_ns();
      j.baseline_ns = static_cast<double>(st.median_step_ns());
      j.observed_ns = static_cast<double>(st.stalled_for_ns());
      j.ratio = st.median_step_ns() > 0 ? j.observed_ns / j.baseline_ns : 0;
    }
  }
  if (answered == 0) j.waiting = "no target answered";
  return j;
}

TriggerJudgment StepTimeWatch::Judge() const {
  if (config_.signal == "hang") return JudgeHang();
  TriggerJudgment j;
  int64_t answered = 0;
  int64_t with_signal = 0;
  int64_t best_baseline_steps = 0;
  for (const auto& [name, h] : hosts_) {
    if (!h.answered) continue;
    ++answered;
    if (!h.has_signal && h.samples.empty()) continue;
    ++with_signal;
    const int64_t window_start = h.now_ns - config_.window_ns;
    const int64_t baseline_start = window_start - config_.baseline_ns;
    std::vector<int64_t> window;
    std::vector<int64_t> baseline;
    for (const Sample& s : h.samples) {
      if (s.end_ns > window_start) {
        window.push_back(s.duration_ns);
      } else if (s.end_ns > baseline_start) {
        baseline.push_back(s.duration_ns);
      }
    }
    best_baseline_steps = std::max(best_baseline_steps, static_cast<int64_t>(baseline.size()));
    if (static_cast<int64_t>(baseline.size()) < config_.min_steps ||
        static_cast<int64_t>(window.size()) < kMinWindowSteps) {
      continue;
    }
    ++j.hosts_judged;
    const double b = Median(&baseline);
    const double o = Median(&window);
    const double ratio = o / b;
    if (j.host.empty() || ratio > j.ratio) {
      j.host = name;
      j.baseline_ns = b;
      j.observed_ns = o;
      j.ratio = ratio;
    }
  }
  if (j.hosts_judged > 0) {
    j.regressed = j.ratio > config_.threshold;
  } else if (answered == 0) {
    j.waiting = "no target answered";
  } else if (with_signal == 0) {
    j.waiting = "no step signal from any target (collectors without one, or no step markers)";
  } else {
    j.waiting = absl::StrCat("baseline: ", best_baseline_steps, " of ", config_.min_steps,
                             " steps so far (and ", kMinWindowSteps, " in the window)");
  }
  return j;
}

}  // namespace profctl::coordinator::schedule
