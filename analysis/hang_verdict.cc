#include "analysis/hang_verdict.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace profctl::analysis {
namespace {

// Lower case without blanks, '_', '-', '.' and ':': "nccl:all_reduce" -> "ncclallreduce".
std::string Squash(absl::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (const char c : name) {
    if (c == ' ' || c == '_' || c == '-' || c == '.' || c == ':') continue;
    out.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

bool IsNcclApiName(absl::string_view name) {
  return absl::StartsWithIgnoreCase(name, "nccl") || absl::StartsWithIgnoreCase(name, "rccl");
}

int64_t LowerMedian(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  const size_t mid = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(mid), v.end());
  return v[mid];
}

std::string RankName(const HangRank& r) { return absl::StrCat(r.host, " (rank ", r.rank, ")"); }

// "a", "a and b", "a, b and c", at most `max` names then "and N more".
std::string NameList(const std::vector<std::string>& names, size_t max = 8) {
  if (names.size() <= 1) return names.empty() ? std::string() : names[0];
  if (names.size() > max) {
    return absl::StrCat(
        absl::StrJoin(names.begin(), names.begin() + static_cast<ptrdiff_t>(max), ", "), " and ",
        names.size() - max, " more");
  }
  return absl::StrCat(absl::StrJoin(names.begin(), names.end() - 1, ", "), " and ", names.back());
}

}  // namespace

absl::string_view CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all-reduce";
    case CollectiveKind::kAllGather:
      return "all-gather";
    case CollectiveKind::kReduceScatter:
      return "reduce-scatter";
    case CollectiveKind::kAllToAll:
      return "all-to-all";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kReduce:
      return "reduce";
    case CollectiveKind::kSendRecv:
      return "send/recv";
    case CollectiveKind::kCollectivePermute:
      return "collective-permute";
  }
  return "collective";
}

std::optional<CollectiveKind> CollectiveKindOfName(absl::string_view name) {
  const std::string s = Squash(name);
  // Async "-start" halves end at their launch: not the collective (op_classify.h rule 2).
  if (absl::StrContains(s, "start") && !IsNcclApiName(name)) return std::nullopt;
  if (absl::StrContains(s, "allreduce")) return CollectiveKind::kAllReduce;
  if (absl::StrContains(s, "allgather")) return CollectiveKind::kAllGather;
  if (absl::StrContains(s, "reducescatter")) return CollectiveKind::kReduceScatter;
  if (absl::StrContains(s, "alltoall")) return CollectiveKind::kAllToAll;
  if (absl::StrContains(s, "collectivepermute")) return CollectiveKind::kCollectivePermute;
  if (absl::StrContains(s, "broadcast") || absl::StrContains(s, "bcast")) {
    return CollectiveKind::kBroadcast;
  }
  if (absl::StrContains(s, "sendrecv") || absl::StrContains(s, "send") ||
      absl::StrContains(s, "recv")) {
    return CollectiveKind::kSendRecv;
  }
  // "ncclReduce", "ncclDevKernel_Reduce_Sum_f32_RING_LL": a reduce to one root.
  if (absl::StartsWith(s, "ncclreduce") || absl::StartsWith(s, "rcclreduce") ||
      absl::StrContains(s, "kernelreduce")) {
    return CollectiveKind::kReduce;
  }
  return std::nullopt;
}

std::string FormatCollectiveId(const CollectiveId& id) {
  if (id.step < 0) {
    return absl::StrCat(CollectiveKindName(id.kind), " #", id.index,
                        " (counted over the window: no step markers)");
  }
  return absl::StrCat(CollectiveKindName(id.kind), " #", id.index, " of step ", id.step);
}

absl::string_view HangVerdictKindName(HangVerdictKind kind) {
  switch (kind) {
    case HangVerdictKind::kNone:
      return "none";
    case HangVerdictKind::kHung:
      return "hung";
    case HangVerdictKind::kAllWaiting:
      return "all_waiting";
    case HangVerdictKind::kCannotTell:
      return "cannot_tell";
  }
  return "none";
}

absl::string_view HangMissingName(HangMissing missing) {
  switch (missing) {
    case HangMissing::kNothing:
      return "";
    case HangMissing::kCollectives:
      return "collectives";
    case HangMissing::kStepPace:
      return "step_pace";
    case HangMissing::kWindowAfterHang:
      return "window_after_hang";
    case HangMissing::kCollectiveWait:
      return "collective_wait";
  }
  return "";
}

absl::string_view HangPaceName(HangPace pace) {
  switch (pace) {
    case HangPace::kUnknown:
      return "unknown";
    case HangPace::kWindowSteps:
      return "window_steps";
    case HangPace::kStepSignal:
      return "step_signal";
  }
  return "unknown";
}

absl::string_view HangRoleName(HangRank::Role role) {
  switch (role) {
    case HangRank::Role::kOther:
      return "other";
    case HangRank::Role::kWaiting:
      return "waiting";
    case HangRank::Role::kNeverEntered:
      return "never_entered";
    case HangRank::Role::kUnknown:
      return "unknown";
  }
  return "other";
}

std::string FormatUtcTime(int64_t ns) {
  return absl::StrCat(absl::FormatTime("%H:%M:%E3S", absl::FromUnixNanos(ns), absl::UTCTimeZone()),
                      " UTC");
}

std::string FormatUtcIso(int64_t ns) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixNanos(ns), absl::UTCTimeZone());
}

namespace {

constexpr int64_t kNoTime = std::numeric_limits<int64_t>::min();

// One rank's collectives on the aligned timeline.
struct RankState {
  std::map<CollectiveId, int64_t> entered, completed;
};

// What JudgeHang reads from every rank's trace and step signal before it judges.
struct HangFacts {
  std::vector<RankState> states;
  int64_t window_end = std::numeric_limits<int64_t>::max();
  int64_t last_progress = kNoTime;  // the latest step end or collective completion, aligned
  size_t with_trace = 0;
  size_t traced = 0;  // ranks whose trace holds collectives
};

HangReport CannotTell(HangReport& report, HangMissing missing, std::string summary) {
  report.verdict = HangVerdictKind::kCannotTell;
  report.missing = missing;
  report.summary = std::move(summary);
  return report;
}

// Fills report.ranks and the evidence (pace, the wait that makes a hang, the step signal) from
// every rank, and returns each rank's collectives on the aligned timeline.
HangFacts GatherRanks(const std::vector<HangRankInput>& ranks, const HangOptions& options,
                      HangReport& report) {
  HangEvidence& ev = report.evidence;
  HangFacts f;
  f.states.resize(ranks.size());
  std::vector<RankState>& states = f.states;
  int64_t& window_end = f.window_end;
  int64_t& last_progress = f.last_progress;
  size_t& with_trace = f.with_trace;
  size_t& traced = f.traced;
  std::vector<int64_t> window_medians;
  std::vector<int64_t> signal_medians;
  int64_t window_start = std::numeric_limits<int64_t>::max();
  // Step sources whose state the agents know (a median, or stalled), and the stalled ones.
  size_t known_sources = 0;
  size_t stalled_sources = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const HangRankInput& in = ranks[i];
    HangRank& out = report.ranks.emplace_back();
    out.host = in.host;
    out.rank = in.rank;
    if (in.signal.has_value()) {
      ++ev.signal_hosts;
      for (const StepSourceSignal& src : in.signal->sources) {
        if (src.last_step_end_ns != kNoTime) {
          const int64_t end = src.last_step_end_ns - in.offset_ns;
          out.signal_last_step_end_ns =
              std::max(out.signal_last_step_end_ns.value_or(kNoTime), end);
          ev.last_step_end_ns = std::max(ev.last_step_end_ns, end);
          last_progress = std::max(last_progress, end);
        }
        if (src.median_step_ns > 0) signal_medians.push_back(src.median_step_ns);
        if (src.stalled || src.median_step_ns > 0) ++known_sources;
        if (src.stalled) ++stalled_sources;
        out.stalled = out.stalled || src.stalled;
      }
    }
    if (!in.trace.has_value()) {
      out.role = HangRank::Role::kUnknown;
      continue;
    }
    out.has_trace = true;
    ++with_trace;
    const RankCollectives& t = *in.trace;
    window_end = std::min(window_end, t.window_end_ns - in.offset_ns);
    window_start = std::min(window_start, t.window_start_ns - in.offset_ns);
    if (t.complete_steps > 0) {
      window_medians.push_back(t.median_step_ns);
      last_progress = std::max(last_progress, t.last_step_end_ns - in.offset_ns);
      ev.last_step_end_ns = std::max(ev.last_step_end_ns, t.last_step_end_ns - in.offset_ns);
    }
    if (t.entered.empty() && t.completed.empty()) {
      // Nothing to judge it by: a trace of steps only never counts as "never entered".
      out.role = HangRank::Role::kUnknown;
      continue;
    }
    ++traced;
    for (const CollectiveAt& c : t.entered) states[i].entered[c.id] = c.time_ns - in.offset_ns;
    for (const CollectiveAt& c : t.completed) {
      states[i].completed[c.id] = c.time_ns - in.offset_ns;
      last_progress = std::max(last_progress, c.time_ns - in.offset_ns);
    }
    if (!t.entered.empty()) {
      out.last_entered = t.entered.back();
      out.last_entered->time_ns -= in.offset_ns;
    }
    if (!t.completed.empty()) {
      out.last_completed = t.completed.back();
      out.last_completed->time_ns -= in.offset_ns;
    }
  }
  ev.window_start_ns = with_trace > 0 ? window_start : 0;
  ev.stalled = stalled_sources > 0 && stalled_sources == known_sources;
  if (!window_medians.empty()) {
    ev.pace = HangPace::kWindowSteps;
    ev.median_step_ns = LowerMedian(std::move(window_medians));
  } else if (!signal_medians.empty()) {
    ev.pace = HangPace::kStepSignal;
    ev.median_step_ns = LowerMedian(std::move(signal_medians));
  }
  if (ev.median_step_ns > 0) {
    ev.needed_ns = std::max(options.min_wait_ns, options.step_factor * ev.median_step_ns);
  }
  return f;
}

// No rank waits in a collective in the window: the step signal, complete steps or their absence
// say no hang or cannot tell.
HangReport JudgeWithoutAWait(const HangFacts& f, HangReport& report) {
  const HangEvidence& ev = report.evidence;
  const auto cannot_tell = [&report](HangMissing missing, std::string summary) {
    return CannotTell(report, missing, std::move(summary));
  };
  const size_t with_trace = f.with_trace;
  const size_t traced = f.traced;
  const int64_t window_end = f.window_end;
  // Nobody waits in a collective in the window: the step signal says whether steps stopped.
  if (ev.stalled) {
    const std::string stopped =
        ev.last_step_end_ns != kNoTime
            ? absl::StrCat("no step ended on any rank since ", FormatUtcTime(ev.last_step_end_ns))
            : std::string("no step ended on any rank");
    if (with_trace > 0 && ev.last_step_end_ns != kNoTime &&
        ev.last_step_end_ns < ev.window_start_ns) {
      return cannot_tell(HangMissing::kWindowAfterHang,
                         absl::StrCat(stopped,
                                      "; the window starts after the hang: take `capture "
                                      "--last` covering that instant"));
    }
    if (traced == 0) {
      return cannot_tell(
          HangMissing::kCollectives,
          absl::StrCat(stopped,
                       " (the agents report their steps stalled), and no trace holds the "
                       "collectives that would say who the others wait for"));
    }
    return cannot_tell(HangMissing::kCollectiveWait,
                       absl::StrCat(stopped,
                                    " (the agents report their steps stalled), but no rank "
                                    "waits in a collective at the window's end: the job "
                                    "stopped outside its collectives, or it ended"));
  }
  if (traced > 0) {
    report.summary = "no hang: every collective a rank entered completed in the window";
    return report;
  }
  // No collectives anywhere: a step that ended within the wait that makes a hang before the
  // window's end (in a trace, or by the step signal) is the only evidence. An agent that
  // reports no stall says nothing more: one without a hang detector never does.
  if (with_trace > 0 && ev.last_step_end_ns != kNoTime && ev.needed_ns > 0 &&
      window_end - ev.last_step_end_ns <= ev.needed_ns) {
    report.summary =
        absl::StrCat("no hang: steps still ended near the window's end (the last at ",
                     FormatUtcTime(ev.last_step_end_ns), "); no trace holds collectives");
    return report;
  }
  if (with_trace == 0) {
    return cannot_tell(HangMissing::kCollectives,
                       ev.signal_hosts > 0
                           ? "cannot tell: no rank has a trace, and the agents' step signal "
                             "does not say whether steps stopped"
                           : "cannot tell: no rank has a trace");
  }
  return cannot_tell(HangMissing::kCollectives,
                     "cannot tell: no rank's trace holds collectives, and neither its steps "
                     "nor the agents' step signal say whether steps still end");
}

// The collective most ranks wait in (the earliest entered on a tie) and since when: each rank
// waits in its earliest collective entered and not completed.
std::optional<std::pair<CollectiveId, int64_t>> MostWaitedCollective(
    const std::vector<RankState>& states) {
  std::map<CollectiveId, std::pair<int64_t, int64_t>> waited;  // -> (waiters, earliest entry)
  for (const RankState& state : states) {
    std::optional<std::pair<CollectiveId, int64_t>> open;
    for (const auto& [id, t] : state.entered) {
      if (state.completed.contains(id)) continue;
      if (!open.has_value() || t < open->second) open = {id, t};
    }
    if (!open.has_value()) continue;
    auto [it, inserted] =
        waited.try_emplace(open->first, std::pair<int64_t, int64_t>{0, open->second});
    ++it->second.first;
    if (!inserted) it->second.second = std::min(it->second.second, open->second);
  }
  if (waited.empty()) return std::nullopt;
  auto best = waited.begin();
  for (auto it = waited.begin(); it != waited.end(); ++it) {
    if (it->second.first > best->second.first ||
        (it->second.first == best->second.first && it->second.second < best->second.second)) {
      best = it;
    }
  }
  return std::make_pair(best->first, best->second.second);
}

// Ranks wait in `x` since `since`: no hang when one completed it or progress followed, cannot
// tell when the wait cannot be weighed against the pace; nullopt when the wait is a hang.
std::optional<HangReport> JudgeTheWait(const std::vector<HangRankInput>& ranks,
                                       const HangOptions& options, const HangFacts& f,
                                       const CollectiveId& x, int64_t since, HangReport& report) {
  HangEvidence& ev = report.evidence;
  const auto cannot_tell = [&report](HangMissing missing, std::string summary) {
    return CannotTell(report, missing, std::move(summary));
  };
  const std::vector<RankState>& states = f.states;
  const std::string what = FormatCollectiveId(x);
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (states[i].completed.contains(x)) {
      report.summary = absl::StrCat("no hang: ", ranks[i].host, " completed ", what,
                                    ", which other ranks had not yet");
      return report;
    }
  }
  if (f.last_progress > since) {
    report.summary = absl::StrCat("no hang: steps or collectives still ended after ranks entered ",
                                  what, " at ", FormatUtcTime(since));
    return report;
  }
  ev.waited_ns = f.window_end - since;
  const bool by_window = ev.pace == HangPace::kWindowSteps && ev.waited_ns >= ev.needed_ns;
  if (!by_window && !ev.stalled) {
    if (ev.median_step_ns > 0 && ev.waited_ns < ev.needed_ns) {
      report.summary =
          absl::StrCat("no hang: ranks had waited in ", what, " for ", ev.waited_ns / 1'000'000,
                       " ms at the window's end, less than the ", ev.needed_ns / 1'000'000,
                       " ms that make a hang (", options.step_factor, " x the median step of ",
                       ev.median_step_ns / 1'000'000, " ms, ",
                       ev.pace == HangPace::kWindowSteps ? "the window's complete steps"
                                                         : "the agents' step signal",
                       ")");
      return report;
    }
    return cannot_tell(
        HangMissing::kStepPace,
        absl::StrCat("cannot tell: ranks wait in ", what, " since ", FormatUtcTime(since), " (",
                     ev.waited_ns / 1'000'000, " ms at the window's end), but ",
                     ev.median_step_ns > 0
                         ? "the window holds no complete step and the agents do not report "
                           "their steps stalled"
                         : "no complete step in the window and no step signal from the agents "
                           "tell a hang from a slow step: capture a window of several steps"));
  }

  return std::nullopt;
}

// The hang: who never entered `x` (hung), or every rank waits in it.
void BlameRanks(const std::vector<RankState>& states, const CollectiveId& x, int64_t since,
                HangReport& report) {
  const std::string what = FormatCollectiveId(x);
  report.collective = x;
  report.waiting_since_ns = since;
  std::vector<std::string> blamed, unknown, empty;
  for (size_t i = 0; i < report.ranks.size(); ++i) {
    HangRank& r = report.ranks[i];
    if (r.role == HangRank::Role::kUnknown) {
      (r.has_trace ? empty : unknown).push_back(RankName(r));
      continue;
    }
    if (states[i].entered.contains(x)) {
      r.role = HangRank::Role::kWaiting;
      ++report.waiting_ranks;
    } else {
      r.role = HangRank::Role::kNeverEntered;
      blamed.push_back(RankName(r));
    }
  }
  const std::string waiters =
      absl::StrCat(report.waiting_ranks, report.waiting_ranks == 1 ? " rank waits" : " ranks wait",
                   " in it since ", FormatUtcTime(since));
  std::string no_trace = unknown.empty() ? ""
                                         : absl::StrCat("; no trace from ", NameList(unknown),
                                                        " (unknown, not judged)");
  if (!empty.empty()) {
    absl::StrAppend(&no_trace, "; no collective in the trace of ", NameList(empty),
                    " (unknown, not judged)");
  }
  if (!blamed.empty()) {
    report.verdict = HangVerdictKind::kHung;
    report.summary =
        absl::StrCat(NameList(blamed), " never entered ", what, "; ", waiters, no_trace);
  } else {
    report.verdict = HangVerdictKind::kAllWaiting;
    unknown.insert(unknown.end(), empty.begin(), empty.end());
    report.summary = absl::StrCat(
        "every rank with a trace waits in ", what, " since ", FormatUtcTime(since),
        unknown.empty() ? "; none is missing from it (the hang is inside the collective)"
                        : absl::StrCat("; no trace (or no collective) from ", NameList(unknown),
                                       " (unknown: it may be the one missing)"));
  }
}

}  // namespace

HangReport JudgeHang(const std::vector<HangRankInput>& ranks, const HangOptions& options) {
  HangReport report;
  report.ranks.reserve(ranks.size());
  const HangFacts f = GatherRanks(ranks, options, report);
  const std::optional<std::pair<CollectiveId, int64_t>> waited = MostWaitedCollective(f.states);
  if (!waited.has_value()) return JudgeWithoutAWait(f, report);
  const auto& [x, since] = *waited;
  if (std::optional<HangReport> decided = JudgeTheWait(ranks, options, f, x, since, report)) {
    return *std::move(decided);
  }
  BlameRanks(f.states, x, since, report);
  return report;
}

std::string FormatHangEvidence(const HangReport& report) {
  const HangEvidence& ev = report.evidence;
  std::vector<std::string> parts;
  if (ev.waited_ns > 0) {
    std::string wait = absl::StrCat("waited ", ev.waited_ns / 1'000'000, " ms at the window's end");
    if (ev.median_step_ns > 0) {
      absl::StrAppend(&wait, ev.waited_ns >= ev.needed_ns ? ", at least " : ", less than ",
                      ev.needed_ns / 1'000'000,
                      " ms (the job's median step: ", ev.median_step_ns / 1'000'000, " ms, ",
                      ev.pace == HangPace::kWindowSteps ? "from the window's complete steps"
                                                        : "from the agents' step signal",
                      ")");
    } else {
      absl::StrAppend(&wait, "; no complete step in the window gives the job's pace");
    }
    parts.push_back(std::move(wait));
  }
  if (ev.signal_hosts == 0) {
    parts.push_back("no step signal from the agents");
  } else if (ev.stalled) {
    parts.push_back(absl::StrCat(
        "the agents of ", ev.signal_hosts, ev.signal_hosts == 1 ? " rank report" : " ranks report",
        " their steps stalled",
        ev.last_step_end_ns != std::numeric_limits<int64_t>::min()
            ? absl::StrCat(" (no step ended since ", FormatUtcTime(ev.last_step_end_ns), ")")
            : std::string()));
  } else {
    parts.push_back(absl::StrCat("the agents of ", ev.signal_hosts,
                                 ev.signal_hosts == 1 ? " rank report" : " ranks report",
                                 " no stall"));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace profctl::analysis
