#include "common/clock_pair.h"

namespace profctl {

ClockPair ReadClockPair(const Clock& clock, int tries) {
  constexpr int64_t kTightNs = 20 * kNanosPerMicro;
  ClockPair best;
  for (int i = 0; i < tries || i == 0; ++i) {
    const int64_t before = clock.MonoNs();
    const int64_t wall = clock.WallNs();
    const int64_t after = clock.MonoNs();
    const ClockPair p{wall, before + (after - before) / 2, (after - before + 1) / 2};
    if (i == 0 || p.spread_ns < best.spread_ns) best = p;
    if (best.spread_ns <= kTightNs) break;
  }
  return best;
}

WallStep WallStepBetween(const ClockPair& before, const ClockPair& after) {
  return {(after.wall_ns - after.mono_ns) - (before.wall_ns - before.mono_ns),
          before.spread_ns + after.spread_ns};
}

}  // namespace profctl
