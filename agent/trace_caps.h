// Per-capture caps on what one trace may hold (profctl-agent --max-trace-events, --max-trace-mb),
// applied to a collected XSpace before it is serialized, so one capture cannot make the agent
// hold or send an unbounded trace. A pure function: no clock, no I/O.
#ifndef PROFCTL_AGENT_TRACE_CAPS_H_
#define PROFCTL_AGENT_TRACE_CAPS_H_

#include <cstdint>

#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::agent {

struct TraceCaps {
  int64_t max_events = 0;  // events over all planes and lines; <= 0: no cap
  int64_t max_bytes = 0;   // serialized size of the XSpace; <= 0: no cap
};

// Drops events until `space` holds at most caps.max_events events and serializes to at most
// caps.max_bytes (when events are what makes it big). Which events go is deterministic:
//   - The event budget is shared fairly between lines (water-filling): a line with fewer events
//     than the fair share keeps all of them; every other line keeps the same number (the first
//     lines in plane/line order get one more while the budget has a remainder).
//   - A line keeps its *earliest* events (by offset_ps; ties by position), in their order: the
//     trace covers the start of the window on every line rather than a random sample.
//   - For the byte cap the budget is lowered in proportion to the overshoot (by a tenth more) and
//     the trimming repeated, at most 8 times.
// Returns the number of events dropped, 0 when the trace was within the caps (then `space` is
// untouched). When events were dropped, one sentence saying how many and why is appended to
// space.warnings; when metadata alone is over the byte cap, a sentence says that too.
uint64_t TrimToCaps(const TraceCaps& caps, tensorflow::profiler::XSpace* space);

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_TRACE_CAPS_H_
