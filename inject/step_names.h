// Which NVTX range names are training steps, inside the injection library. PLAIN C++ AND LIBC
// ONLY (the library links no RE2), so this is a hand-written equivalent of the agent's default
// step pattern, agent/collectors/cupti/cupti_xspace.h kDefaultNvtxStepPattern:
//
//   (?i)(?:^|[^a-z])(?:profiler)?step(?:marker)?\s*[#:_=-]?\s*(\d+)\s*$
//
// searched (RE2::PartialMatch) in the name, group 1 read as an int64. The agent's tests keep the
// two in agreement on a table of names (agent/collectors/cupti/step_names_agreement_test.cc),
// RE2's details included: UTF-8 case folding (U+017F LATIN SMALL LETTER LONG S matches 's',
// U+212A KELVIN SIGN matches 'k', and neither counts as a non-letter before the keyword), `\s` is
// [\t\n\f\r ] and `\d` is [0-9] (ASCII only), `$` is the end of the text.
//
// "step 5", "train_step 5", "ProfilerStep#5", "StepMarker 12", "STEP_7", "step: 3  " are steps;
// "mystep 3" (a letter before "step"), "step", "step 5 x", "forward" are not. A step number that
// does not fit int64 makes the name no step (RE2's int64 parse fails the same way), so the
// agent's XSpace and the step signal agree on what a step is.
#ifndef PROFCTL_INJECT_STEP_NAMES_H_
#define PROFCTL_INJECT_STEP_NAMES_H_

#include <cstdint>
#include <string_view>

namespace profctl::inject {

// True when `name` is a step name; then *step_num (may be nullptr) is its step number (>= 0).
// Allocates nothing; linear in the name's length.
bool MatchStepName(std::string_view name, int64_t* step_num);

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_STEP_NAMES_H_
