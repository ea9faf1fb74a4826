#include "analysis/readers/xspace_collectives.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/match.h"

namespace profctl::analysis::xspace_collectives {
namespace {

bool IsNcclApiName(absl::string_view name) {
  return absl::StartsWithIgnoreCase(name, "nccl") || absl::StartsWithIgnoreCase(name, "rccl");
}

// The step containing t (the latest-starting one), or nullopt. `steps` by start.
std::optional<int64_t> StepAt(const std::vector<StepSpan>& steps, int64_t t) {
  auto it = std::upper_bound(steps.begin(), steps.end(), t,
                             [](int64_t v, const StepSpan& s) { return v < s.start_ns; });
  // Markers of one step on several threads are one span, so steps barely overlap: a few
  // earlier spans are enough to look at.
  for (int looked = 0; it != steps.begin() && looked < 4; ++looked) {
    --it;
    if (it->end_ns >= t) return it->step;
  }
  return std::nullopt;
}

// Counts collectives per (step, kind) along one line and gives each its identity.
class Numberer {
 public:
  explicit Numberer(const std::vector<StepSpan>& steps) : steps_(steps) {
    for (const StepSpan& x : steps_) {
      last_end_ns_ = std::max(last_end_ns_, x.end_ns);
      next_step_ = std::max(next_step_, x.step + 1);
    }
  }
  std::optional<CollectiveId> Next(CollectiveKind kind, int64_t t) {
    int64_t step = -1;
    if (!steps_.empty()) {
      std::optional<int64_t> s = StepAt(steps_, t);
      // After every step ended: the step after the last, which had not ended when the window
      // did (a recorder that keeps finished steps only, as the cupti light level, has no marker
      // of the step a rank hangs in; a capture's markers run to the window's end, cut).
      if (!s.has_value() && t > last_end_ns_ && !steps_.back().cut) s = next_step_;
      if (!s.has_value()) return std::nullopt;
      step = *s;
    }
    int64_t& n = counts_[{step, kind}];
    return CollectiveId{step, kind, ++n};
  }

 private:
  const std::vector<StepSpan>& steps_;
  // Of every step: the latest end, and the number after the highest.
  int64_t last_end_ns_ = std::numeric_limits<int64_t>::min();
  int64_t next_step_ = 0;
  std::map<std::pair<int64_t, CollectiveKind>, int64_t> counts_;
};

// Keeps one time per collective: the earliest (entries) or the latest (completions).
void Keep(std::map<CollectiveId, int64_t>& m, const CollectiveId& id, int64_t t, bool earliest) {
  auto [it, inserted] = m.try_emplace(id, t);
  if (!inserted) it->second = earliest ? std::min(it->second, t) : std::max(it->second, t);
}

std::vector<CollectiveAt> ByTime(const std::map<CollectiveId, int64_t>& m) {
  std::vector<CollectiveAt> out;
  out.reserve(m.size());
  for (const auto& [id, t] : m) out.push_back({id, t});
  std::stable_sort(out.begin(), out.end(), [](const CollectiveAt& a, const CollectiveAt& b) {
    return a.time_ns < b.time_ns;
  });
  return out;
}

int64_t Median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  const size_t mid = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(mid), v.end());
  return v[mid];
}

template <typename T>
void SortByStart(std::vector<T>& v) {
  std::stable_sort(v.begin(), v.end(),
                   [](const T& a, const T& b) { return a.start_ns < b.start_ns; });
}

}  // namespace

HostMeta ClassifyHostMeta(absl::string_view name, const StepMatcher& matcher) {
  HostMeta m;
  m.nccl_api = IsNcclApiName(name);
  if (m.nccl_api) m.name_kind = CollectiveKindOfName(name);
  m.launch = ClassifyHostOpName(name) == OpKind::kHostLaunch;
  if (std::optional<int64_t> step = matcher.Match(name); step.has_value() && *step >= 0) {
    m.name_step = step;
  }
  return m;
}

std::optional<CollectiveKind> DeviceKernelKind(absl::string_view name) {
  if (!IsCollectiveDeviceOpName(name)) return std::nullopt;
  return CollectiveKindOfName(name);
}

void Builder::HostEvent(size_t line, const HostMeta* meta, const EventStats& stats, Times times) {
  // A step marker: a root (`_r` >= 1) with a step number, else a name the step pattern matches.
  std::optional<int64_t> step;
  if (stats.root.value_or(0) >= 1) step = stats.step_num;
  if (!step.has_value() && meta != nullptr) step = meta->name_step;
  if (step.has_value() && *step >= 0) {
    const auto [start_ns, end_ns] = times();
    const bool cut = stats.cut.value_or(0) != 0;
    auto [it, inserted] = steps_by_num_.try_emplace(*step, StepSpan{*step, start_ns, end_ns, cut});
    if (!inserted) {
      it->second.start_ns = std::min(it->second.start_ns, start_ns);
      it->second.end_ns = std::max(it->second.end_ns, end_ns);
      it->second.cut = it->second.cut || cut;
    }
  }
  if (meta == nullptr) return;
  if (entries_.size() <= line) entries_.resize(line + 1);
  if (meta->nccl_api) {
    std::optional<CollectiveKind> kind = stats.kernel_name_kind;
    if (!kind.has_value()) kind = meta->name_kind;
    // An NCCL call that names no collective (ncclGroupStart, ncclCommInitRank) is no entry.
    if (kind.has_value()) {
      const auto [start_ns, end_ns] = times();
      entries_[line].push_back({start_ns, end_ns, kind, stats.correlation_id});
    }
    return;
  }
  if (!meta->launch || !stats.correlation_id.has_value()) return;
  // A launch counts only when it launches a collective kernel (the devices were read first).
  if (!kernel_corr_.contains(*stats.correlation_id)) return;
  const auto [start_ns, end_ns] = times();
  entries_[line].push_back({start_ns, end_ns, std::nullopt, stats.correlation_id});
}

void Builder::BeginDevice() { devices_.emplace_back(); }

void Builder::DeviceEvent(std::optional<CollectiveKind> kind, std::optional<int64_t> correlation_id,
                          Times times) {
  ++device_events_;
  if (!kind.has_value()) return;
  const auto [start_ns, end_ns] = times();
  devices_.back().push_back({start_ns, end_ns, *kind, correlation_id});
  if (correlation_id.has_value()) kernel_corr_[*correlation_id] = *kind;
}

RankCollectives Builder::Finish(int64_t window_start_ns, int64_t window_end_ns) && {
  RankCollectives out;
  std::vector<StepSpan> steps;
  steps.reserve(steps_by_num_.size());
  for (const auto& [num, span] : steps_by_num_) steps.push_back(span);
  std::sort(steps.begin(), steps.end(),
            [](const StepSpan& a, const StepSpan& b) { return a.start_ns < b.start_ns; });
  out.has_step_markers = !steps.empty();
  std::vector<int64_t> durations;
  for (const StepSpan& s : steps) {
    if (s.cut) continue;
    durations.push_back(s.end_ns - s.start_ns);
    out.last_step_end_ns = std::max(out.last_step_end_ns, s.end_ns);
  }
  out.complete_steps = static_cast<int64_t>(durations.size());
  out.median_step_ns = Median(std::move(durations));
  out.window_start_ns = window_start_ns;
  out.window_end_ns = window_end_ns;

  // ENTERED: per host line, in time order.
  std::map<CollectiveId, int64_t> entered;
  absl::flat_hash_map<int64_t, CollectiveId> entry_corr;
  for (std::vector<Entry>& line : entries_) {
    SortByStart(line);
    Numberer numberer(steps);
    int64_t nccl_end = std::numeric_limits<int64_t>::min();
    std::optional<CollectiveId> nccl_id;
    for (const Entry& e : line) {
      std::optional<CollectiveKind> kind = e.api_kind;
      const bool api = kind.has_value();
      if (!api) {
        if (e.start_ns < nccl_end) {  // inside an NCCL call: that call is the entry
          if (nccl_id.has_value()) entry_corr[*e.correlation_id] = *nccl_id;
          continue;
        }
        auto it = kernel_corr_.find(*e.correlation_id);
        if (it == kernel_corr_.end()) continue;
        kind = it->second;
      }
      const std::optional<CollectiveId> id = numberer.Next(*kind, e.start_ns);
      if (api) {
        nccl_end = std::max(nccl_end, e.end_ns);
        nccl_id = id;
      }
      if (!id.has_value()) continue;
      Keep(entered, *id, e.start_ns, /*earliest=*/true);
      if (e.correlation_id.has_value()) entry_corr[*e.correlation_id] = *id;
    }
  }

  // COMPLETED: per device, in time order.
  std::map<CollectiveId, int64_t> completed;
  for (std::vector<Kernel>& kernels : devices_) {
    SortByStart(kernels);
    Numberer numberer(steps);
    for (const Kernel& k : kernels) {
      std::optional<CollectiveId> id;
      if (k.correlation_id.has_value()) {
        if (auto it = entry_corr.find(*k.correlation_id); it != entry_corr.end()) id = it->second;
      }
      if (!id.has_value()) id = numberer.Next(k.kind, k.start_ns);
      if (!id.has_value()) continue;
      Keep(completed, *id, k.end_ns, /*earliest=*/false);
      // A completion says it was entered, launch recorded or not (the window began after it).
      Keep(entered, *id, k.start_ns, /*earliest=*/true);
    }
  }
  // LAUNCHES ONLY: a trace with launches and no device activity at all (the cupti light level
  // keeps NCCL launches, never kernels): a collective entered in a step that ended counts as
  // completed at that step's end (the rank went on past it); one entered in the step running at
  // the window's end stays open. A host's step end does not wait for its GPU, so this is when
  // the rank went on, not when the kernel ended.
  if (device_events_ == 0 && completed.empty() && !steps.empty()) {
    absl::flat_hash_map<int64_t, const StepSpan*> by_num;
    for (const StepSpan& st : steps) by_num[st.step] = &st;
    for (const auto& [id, t] : entered) {
      auto it = by_num.find(id.step);
      if (it != by_num.end() && !it->second->cut && it->second->end_ns >= t) {
        Keep(completed, id, it->second->end_ns, /*earliest=*/false);
      }
    }
    out.completions_from_steps = !completed.empty();
  }
  out.entered = ByTime(entered);
  out.completed = ByTime(completed);
  return out;
}

}  // namespace profctl::analysis::xspace_collectives
