#include "agent/trace_caps.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace profctl::agent {
namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XSpace;

// Aggregated events (num_occurrences) have no offset: they sort first.
int64_t OffsetOf(const XEvent& e) { return e.has_offset_ps() ? e.offset_ps() : 0; }

std::vector<XLine*> Lines(XSpace* space) {
  std::vector<XLine*> lines;
  for (auto& plane : *space->mutable_planes()) {
    for (auto& line : *plane.mutable_lines()) lines.push_back(&line);
  }
  return lines;
}

uint64_t CountEvents(const std::vector<XLine*>& lines) {
  uint64_t n = 0;
  for (const XLine* line : lines) n += static_cast<uint64_t>(line->events_size());
  return n;
}

// Keeps the `keep` earliest events of `line`, in their order.
void KeepEarliest(XLine* line, int keep) {
  auto* events = line->mutable_events();
  const int n = events->size();
  if (keep >= n) return;
  const bool sorted =
      std::is_sorted(events->begin(), events->end(),
                     [](const XEvent& a, const XEvent& b) { return OffsetOf(a) < OffsetOf(b); });
  if (!sorted) {
    std::vector<std::pair<int64_t, int>> order;
    order.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) order.emplace_back(OffsetOf(events->Get(i)), i);
    if (keep > 0) {
      std::nth_element(order.begin(), order.begin() + (keep - 1), order.end());
      const std::pair<int64_t, int> last_kept = order[static_cast<size_t>(keep - 1)];
      int w = 0;
      for (int r = 0; r < n; ++r) {
        if (std::make_pair(OffsetOf(events->Get(r)), r) <= last_kept) {
          if (w != r) events->SwapElements(w, r);
          ++w;
        }
      }
    }
  }
  events->DeleteSubrange(keep, n - keep);
}

// Trims the lines to `budget` events in all, fairly (see TrimToCaps).
void TrimToBudget(const std::vector<XLine*>& lines, uint64_t budget) {
  std::vector<uint64_t> counts;
  counts.reserve(lines.size());
  for (const XLine* line : lines) counts.push_back(static_cast<uint64_t>(line->events_size()));
  std::vector<uint64_t> sorted = counts;
  std::sort(sorted.begin(), sorted.end());
  uint64_t remaining = budget;
  const uint64_t n = sorted.size();
  for (uint64_t i = 0; i < n; ++i) {
    if (sorted[i] * (n - i) <= remaining) {
      remaining -= sorted[i];
      continue;
    }
    // Every line from here on holds more than the level: it keeps `level` (or one more).
    const uint64_t level = remaining / (n - i);
    uint64_t extra = remaining % (n - i);
    for (size_t l = 0; l < lines.size(); ++l) {
      if (counts[l] <= level) continue;
      uint64_t keep = level;
      if (extra > 0) {
        ++keep;
        --extra;
      }
      KeepEarliest(lines[l], static_cast<int>(keep));
    }
    return;
  }
}

}  // namespace

uint64_t TrimToCaps(const TraceCaps& caps, XSpace* space) {
  const std::vector<XLine*> lines = Lines(space);
  const uint64_t before = CountEvents(lines);
  uint64_t events = before;
  if (caps.max_events > 0 && events > static_cast<uint64_t>(caps.max_events)) {
    TrimToBudget(lines, static_cast<uint64_t>(caps.max_events));
    events = CountEvents(lines);
  }
  bool over_bytes = false;
  if (caps.max_bytes > 0) {
    const auto max_bytes = static_cast<uint64_t>(caps.max_bytes);
    for (int round = 0; round < 8; ++round) {
      const uint64_t size = space->ByteSizeLong();
      over_bytes = size > max_bytes;
      if (!over_bytes || events == 0) break;
      const double ratio = static_cast<double>(max_bytes) / static_cast<double>(size) * 0.9;
      const auto budget =
          std::min(events - 1, static_cast<uint64_t>(static_cast<double>(events) * ratio));
      TrimToBudget(lines, budget);
      events = CountEvents(lines);
    }
    over_bytes = space->ByteSizeLong() > max_bytes;
  }
  const uint64_t dropped = before - events;
  if (dropped > 0) {
    space->add_warnings(absl::StrCat(
        "profctl-agent dropped ", dropped, " of ", before,
        " events to stay within its per-capture caps (max ", caps.max_events, " events, ",
        caps.max_bytes,
        " bytes; profctl-agent --max-trace-events, --max-trace-mb): each line "
        "kept its earliest events, lines with fewer than a fair share kept all of theirs"));
  }
  if (over_bytes) {
    space->add_warnings(absl::StrCat("this trace is still over profctl-agent's cap of ",
                                     caps.max_bytes,
                                     " bytes with its events trimmed: its metadata alone is"));
  }
  return dropped;
}

}  // namespace profctl::agent
