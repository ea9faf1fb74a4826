// Names shortened for a table without losing which is which: C++ kernel signatures lose their
// return type and parameters first, then the middle of their templates, so that the part that
// tells two kernels apart stays. The same rules as the report's script (assets/format.js
// shortForms / distinctNames); used by the terminal tables and the diff page, which has no
// script. Pure.
#ifndef PROFCTL_REPORT_SHORT_NAMES_H_
#define PROFCTL_REPORT_SHORT_NAMES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace profctl::report {

// The forms of a C++-like name, from whole to shortest: without a leading `void ` and the
// trailing parameter list, with templates nested three and then two deep collapsed to <...>,
// without namespaces inside the templates (and all but the last two outside), and with every
// template collapsed. A name without templates has at most the first two forms. The ellipsis
// is "..." (ASCII, for terminals).
std::vector<std::string> ShortForms(absl::string_view name);

// `s` in at most `room` characters, elided in the middle with "...".
std::string ElideMiddle(absl::string_view s, size_t room);

// What each of `names` shows in at most `room` characters (room >= 12): the longest of its
// ShortForms that fits, else its shortest form elided in the middle; where two different names
// would show the same text, they are shown less shortened, or elided around where they differ,
// and as a last resort numbered (" (2)"), so distinct names never look the same. Equal names
// show equal texts.
std::vector<std::string> DistinctShortNames(const std::vector<std::string>& names, size_t room);

}  // namespace profctl::report

#endif  // PROFCTL_REPORT_SHORT_NAMES_H_
