// The wall and monotonic clocks read as one instant, and a step of the wall clock told from a
// thread preempted between its two reads.
#ifndef PROFCTL_COMMON_CLOCK_PAIR_H_
#define PROFCTL_COMMON_CLOCK_PAIR_H_

#include <cstdint>

#include "common/clock.h"

namespace profctl {

// The wall and monotonic clocks read as one instant. wall_ns was read between two monotonic reads;
// mono_ns is their midpoint and spread_ns half their distance, so the true monotonic time of the
// wall read is within mono_ns +- spread_ns. A thread preempted between two reads (milliseconds on
// a loaded machine) widens the spread instead of looking like a step of the wall clock.
struct ClockPair {
  int64_t wall_ns = 0;
  int64_t mono_ns = 0;
  int64_t spread_ns = 0;
};

// Up to `tries` readings (at least one), the tightest kept; stops at the first within 20 us.
ClockPair ReadClockPair(const Clock& clock, int tries = 4);

// How far the wall clock stepped against the monotonic one from `before` to `after` (positive:
// forward), and the most of it the readings' own spreads can explain (a step within that is not
// one that can be told).
struct WallStep {
  int64_t step_ns = 0;
  int64_t unsure_ns = 0;
};
WallStep WallStepBetween(const ClockPair& before, const ClockPair& after);

}  // namespace profctl

#endif  // PROFCTL_COMMON_CLOCK_PAIR_H_
