#include "coordinator/engine/step_signal.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace profctl::coordinator {

profctl::v1::StepSignalAtEnd StepSignalAtEndOf(
    const absl::StatusOr<profctl::v1::GetStepSignalResponse>& answer) {
  profctl::v1::StepSignalAtEnd out;
  if (!answer.ok()) {
    out.set_error(std::string(answer.status().ToString()));
    return out;
  }
  out.set_answered(true);
  out.set_now_ns(answer->now_ns());
  struct Source {
    std::vector<int64_t> durations;  // from samples
    const profctl::v1::StepSourceSummary* summary = nullptr;
    int64_t last_end_ns = 0;
    int64_t last_num = -1;
    const profctl::v1::StepStall* stall = nullptr;
  };
  std::map<std::string, Source> sources;
  if (answer->summaries_size() > 0) {  // the agent's own reduction (summary_only)
    for (const profctl::v1::StepSourceSummary& s : answer->summaries()) {
      Source& src = sources[s.source()];
      src.summary = &s;
      src.last_end_ns = s.last_step_end_ns();
      src.last_num = s.last_step_num();
    }
  } else {
    for (const profctl::v1::StepSignalSample& s : answer->samples()) {
      Source& src = sources[s.source()];
      if (s.duration_ns() > 0) src.durations.push_back(s.duration_ns());
      if (s.end_ns() >= src.last_end_ns) {
        src.last_end_ns = s.end_ns();
        src.last_num = s.step_num();
      }
    }
  }
  for (const profctl::v1::StepStall& st : answer->stalls()) sources[st.source()].stall = &st;
  for (auto& [name, src] : sources) {
    profctl::v1::StepSourceAtEnd* o = out.add_sources();
    o->set_source(name);
    if (src.summary != nullptr) {
      o->set_samples(src.summary->steps());
      if (src.summary->steps() >= kStepSignalMinSteps) {
        o->set_median_step_ns(src.summary->median_step_ns());
      }
    } else {
      o->set_samples(static_cast<uint32_t>(src.durations.size()));
    }
    if (src.durations.size() >= kStepSignalMinSteps) {
      // The agent's own median: the upper middle of its recent steps.
      const auto mid =
          src.durations.begin() + static_cast<std::ptrdiff_t>(src.durations.size() / 2);
      std::nth_element(src.durations.begin(), mid, src.durations.end());
      o->set_median_step_ns(*mid);
    }
    o->set_last_step_end_ns(src.last_end_ns);
    o->set_last_step_num(src.last_num);
    if (src.stall != nullptr) {
      o->set_stalled(true);
      o->set_stalled_for_ns(src.stall->stalled_for_ns());
      o->set_median_step_ns(src.stall->median_step_ns());
      if (src.stall->last_step_end_ns() >= src.last_end_ns) {
        o->set_last_step_end_ns(src.stall->last_step_end_ns());
        o->set_last_step_num(src.stall->last_step_num());
      }
    }
  }
  return out;
}

std::optional<analysis::StepSignal> HangSignalOf(const profctl::v1::StepSignalAtEnd& record) {
  if (!record.answered()) return std::nullopt;
  analysis::StepSignal out;
  out.asked_ns = record.now_ns();
  for (const profctl::v1::StepSourceAtEnd& s : record.sources()) {
    analysis::StepSourceSignal& src = out.sources.emplace_back();
    src.source = s.source();
    if (s.last_step_end_ns() > 0) src.last_step_end_ns = s.last_step_end_ns();
    src.median_step_ns = std::max<int64_t>(0, s.median_step_ns());
    src.stalled = s.stalled();
  }
  return out;
}

}  // namespace profctl::coordinator
