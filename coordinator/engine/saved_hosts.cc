#include "coordinator/engine/saved_hosts.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/alignment.h"
#include "common/clock.h"
#include "coordinator/engine/clock_sync.h"

namespace profctl::coordinator {
namespace {

using profctl::v1::HostResult;

double MillisOf(int64_t ns) { return static_cast<double>(ns) / kNanosPerMilli; }

std::vector<std::pair<int64_t, int64_t>> NumberedStepStarts(const AlignHost& h) {
  std::vector<std::pair<int64_t, int64_t>> steps;
  if (h.summary == nullptr || !h.summary->has_value()) return steps;
  for (const analysis::HostStep& s : (*h.summary)->steps) {
    if (s.step >= 0) steps.emplace_back(s.step, s.start_ns);
  }
  return steps;
}

// Step-number estimates for the clocks clock sync could not measure (alignment.h
// OffsetFromSteps): clock.method "steps". The reference: a host with a measured clock and steps;
// else the first unmeasured one with steps, whose clock then stands for the pod's.
void EstimateUnmeasuredOffsets(std::vector<AlignHost>& hosts) {
  const AlignHost* reference = nullptr;
  for (bool measured : {true, false}) {
    for (const AlignHost& h : hosts) {
      if (reference == nullptr && h.clock_measured == measured && !NumberedStepStarts(h).empty()) {
        reference = &h;
      }
    }
  }
  if (reference == nullptr) return;
  const std::vector<std::pair<int64_t, int64_t>> reference_steps = NumberedStepStarts(*reference);
  for (AlignHost& h : hosts) {
    if (h.clock_measured || &h == reference) continue;
    const std::optional<analysis::StepOffset> o =
        analysis::OffsetFromSteps(NumberedStepStarts(h), reference_steps);
    if (!o.has_value() || std::abs(o->offset_ns) > analysis::kMaxAbsOffsetNs) continue;
    auto* c = h.r->mutable_clock();
    c->set_offset_ns(o->offset_ns);
    c->set_uncertainty_ns(o->uncertainty_ns);
    c->set_method(std::string(kClockMethodSteps));
  }
}

// Why a clock the collectives did not refine, while they refined others, keeps the offset it has,
// and that offset's bound: clock.warning and one of the breakdown's warnings for the host.
std::string NotRefinedWarning(const analysis::HostOffset& o, const profctl::v1::ClockEstimate& c) {
  std::string why;
  if (o.ends == 0 && o.ignored_ends > 0) {
    why = absl::StrCat("its ", o.ignored_ends,
                       " collective ends are out of range (over 2^62 ns from the epoch, or 73 "
                       "years from the rest of its ends): nothing to align on");
  } else if (o.ends == 0) {
    why = "no collectives in its trace to align on";
  } else if (o.ends < analysis::AlignmentOptions().min_matches) {
    why = absl::StrCat("only ", o.ends, " collectives in its trace, too few to align on");
  } else {
    why = absl::StrCat("its ", o.ends, " collectives do not coincide with the other hosts' (",
                       o.matched,
                       " matched: another step grid, or a clock off by more than its RTT bound?)");
  }
  absl::string_view keeps = "assumed (unmeasured)";
  if (c.method() == kClockMethodRtt) keeps = "clock-sync (rtt)";
  if (c.method() == kClockMethodSteps) keeps = "step-number (steps)";
  return absl::StrFormat("clock: %s, so it keeps its %s offset, +-%.3f ms", why, keeps,
                         MillisOf(c.uncertainty_ns()));
}

void RefineFromCollectives(std::vector<AlignHost>& hosts, profctl::v1::SessionManifest& manifest) {
  std::vector<analysis::HostClockInput> inputs;
  for (AlignHost& h : hosts) {
    const auto& c = h.r->clock();
    // Collectives repeat every step: an unmeasured clock is refined only around a step-number
    // estimate (method "steps"), never searched a whole second wide, where a match one step off
    // would look as good as the right one.
    const bool pinned = !h.clock_measured && c.method() == kClockMethodUnmeasured;
    inputs.push_back({h.clock_measured ? c.rtt_offset_ns() : c.offset_ns(),
                      pinned ? 0 : c.uncertainty_ns(), std::move(h.collective_ends)});
  }
  absl::StatusOr<std::vector<analysis::HostOffset>> refined = analysis::RefineOffsets(inputs);
  if (!refined.ok()) {
    manifest.add_errors(
        absl::StrCat("alignment: ", refined.status().message(), "; using clock-sync offsets"));
    return;
  }
  for (size_t i = 0; i < hosts.size() && i < refined->size(); ++i) {
    const analysis::HostOffset& o = (*refined)[i];
    auto* c = hosts[i].r->mutable_clock();
    c->set_offset_ns(o.offset_ns);
    // A clock no collective refined keeps its method (rtt, steps or unmeasured).
    if (o.method == analysis::OffsetMethod::kCollectives) {
      c->set_method(std::string(analysis::OffsetMethodName(o.method)));
    }
    c->set_residual_ns(o.residual_ns);
    c->set_matched_collectives(static_cast<uint32_t>(o.matched));
  }
  // Hosts left on a coarser offset than the others are named, with why and how coarse.
  const bool any_refined =
      std::any_of(refined->begin(), refined->end(), [](const analysis::HostOffset& o) {
        return o.method == analysis::OffsetMethod::kCollectives;
      });
  if (!any_refined) return;
  for (size_t i = 0; i < hosts.size() && i < refined->size(); ++i) {
    const analysis::HostOffset& o = (*refined)[i];
    if (o.method == analysis::OffsetMethod::kCollectives) continue;
    std::string warning = NotRefinedWarning(o, hosts[i].r->clock());
    if (hosts[i].summary != nullptr && hosts[i].summary->has_value()) {
      (*hosts[i].summary)->warnings.push_back(warning);
    }
    hosts[i].r->mutable_clock()->set_warning(std::move(warning));
  }
}

// Who stopped a recording early: us (an interrupt), or what the agent says.
profctl::v1::TruncatedBy TruncatedByOf(bool interrupted, bool agent_says_cancelled,
                                       profctl::v1::CancelReason reason) {
  if (interrupted) return profctl::v1::TRUNCATED_BY_COORDINATOR;
  if (!agent_says_cancelled) return profctl::v1::TRUNCATED_BY_UNKNOWN;
  switch (reason) {
    case profctl::v1::CANCEL_REASON_CLIENT:
      return profctl::v1::TRUNCATED_BY_COORDINATOR;
    case profctl::v1::CANCEL_REASON_AGENT_SHUTDOWN:
      return profctl::v1::TRUNCATED_BY_AGENT_SHUTDOWN;
    case profctl::v1::CANCEL_REASON_OTHER_CLIENT:
      return profctl::v1::TRUNCATED_BY_OTHER_CLIENT;
    case profctl::v1::CANCEL_REASON_CLIENT_GONE:
      return profctl::v1::TRUNCATED_BY_CONNECTION;
    default:
      return profctl::v1::TRUNCATED_BY_AGENT;  // an agent that predates cancel_reason
  }
}

const char* TruncatedByDetail(profctl::v1::TruncatedBy by) {
  switch (by) {
    case profctl::v1::TRUNCATED_BY_COORDINATOR:
      return "cancelled here: interrupted";
    case profctl::v1::TRUNCATED_BY_AGENT_SHUTDOWN:
      return "the agent was shutting down";
    case profctl::v1::TRUNCATED_BY_OTHER_CLIENT:
      return "cancelled by another client";
    case profctl::v1::TRUNCATED_BY_CONNECTION:
      return "our stream broke and the agent could not keep recording for us";
    case profctl::v1::TRUNCATED_BY_AGENT:
      return "cancelled at the agent: another client's Cancel/Terminate or its shutdown";
    default:
      return "the agent stopped early without saying why";
  }
}

}  // namespace

void AlignSavedHosts(std::vector<AlignHost>& hosts, profctl::v1::AlignMode mode,
                     int64_t start_at_ns, int64_t tolerance_ns,
                     profctl::v1::SessionManifest& manifest) {
  if (mode == profctl::v1::ALIGN_MODE_COLLECTIVES) {
    EstimateUnmeasuredOffsets(hosts);
    if (!hosts.empty()) RefineFromCollectives(hosts, manifest);
  }
  for (AlignHost& h : hosts) {
    // Summaries were made with the clock-sync offset: move them onto the refined timeline.
    const int64_t shift = h.r->clock().offset_ns() - h.r->clock().rtt_offset_ns();
    if (shift != 0 && h.summary != nullptr && h.summary->has_value()) {
      for (analysis::HostStep& step : (*h.summary)->steps) {
        step.start_ns -= shift;
        step.end_ns -= shift;
      }
    }
  }
  int64_t min_start = std::numeric_limits<int64_t>::max();
  int64_t max_start = std::numeric_limits<int64_t>::min();
  for (AlignHost& h : hosts) {
    HostResult& r = *h.r;
    const int64_t offset = r.clock().offset_ns();
    r.set_aligned_start_ns(r.agent_start_ns() - offset);
    r.set_aligned_stop_ns(r.agent_stop_ns() - offset);
    r.set_lateness_ns(r.aligned_start_ns() - start_at_ns);
    // Now known for a clock aligned from its collectives that clock sync could not measure.
    if (!h.clock_measured && r.clock().method() != kClockMethodUnmeasured) {
      r.set_late(r.lateness_ns() > tolerance_ns);
    }
    min_start = std::min(min_start, r.aligned_start_ns());
    max_start = std::max(max_start, r.aligned_start_ns());
  }
  if (!hosts.empty()) manifest.set_start_spread_ns(max_start - min_start);
}

bool ClassifyRecording(HostResult& r, profctl::v1::CancelReason reason,
                       const RecordingRules& rules) {
  const int64_t tolerance = rules.tolerance_ns;
  const int64_t requested = rules.requested_ns;
  // A recording a little longer than asked holds the whole window: its agent stopped late, as a
  // loaded host does (8 ms late on a saturated 2-core machine, docs/reliability.md). Overlong is
  // for a host frozen or a clock that jumped mid-window: more than 10 % over.
  const int64_t overlong = std::max(tolerance, requested / 10);
  // Agent-clock stamps were bounded when they arrived.
  const int64_t recorded = r.agent_stop_ns() - r.agent_start_ns();
  r.set_requested_duration_ns(requested);
  r.set_recorded_duration_ns(recorded);
  // A clock nobody measured is trusted within its stated bound only: a recorded window farther
  // than that from the one asked for is not this session's (a server's old trace).
  const int64_t away = r.agent_start_ns() - r.requested_start_ns();
  if (r.clock().method() == kClockMethodUnmeasured && r.requested_start_ns() > 0 &&
      (away > r.clock().uncertainty_ns() + tolerance ||
       away < -r.clock().uncertainty_ns() - tolerance)) {
    r.set_recording(profctl::v1::RECORDING_OTHER_WINDOW);
    r.set_recording_detail(absl::StrFormat(
        "other window: recorded from %.3f s %s the window asked for, beyond its unmeasured "
        "clock's bound of %.3f s (an old trace?)",
        static_cast<double>(away < 0 ? -away : away) / 1e9, away < 0 ? "before" : "after",
        static_cast<double>(r.clock().uncertainty_ns()) / 1e9));
  } else if (recorded < requested - tolerance) {
    r.set_recording(profctl::v1::RECORDING_TRUNCATED);
    const profctl::v1::TruncatedBy by = TruncatedByOf(rules.interrupted, r.cancelled(), reason);
    r.set_truncated_by(by);
    r.set_recording_detail(absl::StrFormat("truncated: recorded %.3f of %.3f ms (%s)",
                                           MillisOf(recorded), MillisOf(requested),
                                           TruncatedByDetail(by)));
  } else if (recorded > requested + overlong) {
    r.set_recording(profctl::v1::RECORDING_OVERLONG);
    r.set_recording_detail(
        absl::StrFormat("overlong: recorded %.3f ms for %.3f asked (frozen or clock jump?)",
                        MillisOf(recorded), MillisOf(requested)));
  } else if (r.late()) {
    r.set_recording(profctl::v1::RECORDING_LATE);
    r.set_recording_detail(
        absl::StrFormat("late: started %.3f ms after the common start", MillisOf(r.lateness_ns())));
  } else if (r.dropped_events() > 0) {
    r.set_recording(profctl::v1::RECORDING_DROPPED_EVENTS);
    r.set_recording_detail(absl::StrFormat(
        "dropped events: the agent dropped %d events over its per-capture caps (see the "
        "trace's warnings)",
        r.dropped_events()));
  } else if (r.shortfalls_size() > 0) {
    r.set_recording(profctl::v1::RECORDING_MISSING_DATA);
  } else {
    r.set_recording(profctl::v1::RECORDING_COMPLETE);
    return false;
  }
  // What the agent says its trace lacks, with the amounts, whatever else the recording was.
  if (r.shortfalls_size() > 0) {
    std::vector<absl::string_view> missing;
    for (const profctl::v1::Shortfall& s : r.shortfalls()) missing.push_back(s.detail());
    r.set_recording_detail(absl::StrCat(r.recording_detail(),
                                        r.recording_detail().empty() ? "" : "; ",
                                        "missing data: ", absl::StrJoin(missing, "; ")));
  }
  r.set_status(profctl::v1::HOST_STATUS_INCOMPLETE);
  return true;
}

}  // namespace profctl::coordinator
