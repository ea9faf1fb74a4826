// Renders an analysis::Diff (`profctl diff A B`) for machines and people: JSON (versioned,
// docs/tools.md "profctl diff"), CSV, a self-contained HTML page and the terminal table. Pure: the
// whole text is returned, no file is touched; callers write files atomically (common/file_util.h).
// Thread-compatible.
#ifndef PROFCTL_REPORT_DIFF_WRITERS_H_
#define PROFCTL_REPORT_DIFF_WRITERS_H_

#include <string>

#include "analysis/tools/diff.h"

namespace profctl::report {

struct DiffContext {
  std::string a;  // what A and B are, for people (the paths given)
  std::string b;
};

// One JSON object, keys in a fixed order, ending in a newline: schema_version, producer, a, b,
// pod, straggler, consistently_slow, hosts, has_tools, kernels, ops. A change is
// {"a", "b", "delta", "pct"}: times in ms with 3 decimals, pct with 1 (null without a base);
// a side a host is not in is null.
std::string DiffJson(const analysis::Diff& diff, const DiffContext& context);

// RFC 4180 CSV, '\n' line ends, the header
//   kind,host,name,a,b,delta,pct
// then one row per value: kind `pod` (name steps, step_time_ms), `straggler` (name host, cause;
// a/b the names, no delta), `host` (name steps, step_time_ms, <category>_ms, straggler_steps;
// a side the host is not on is empty), `kernel` and `op` (name the kernel/op, a/b its ms per
// step). Times in ms with 3 decimals, pct with 1 (empty without a base).
std::string DiffCsv(const analysis::Diff& diff);

// One self-contained HTML page (no script, no network): the summary, the per-host table with each
// category's change, and the kernels and ops whose time changed most. Names are escaped; long
// ones are cut with the whole name on hover; tables scroll inside their own box.
std::string DiffHtml(const analysis::Diff& diff, const DiffContext& context);

struct DiffTableOptions {
  int max_name_width = 60;  // longer kernel/op/host names are shortened in the middle
};
// The readable terminal table: the pod's steps and step time, the straggler and its cause on
// each side, per host the step time and each category's change per step (ms and %), hosts on one
// side only, then the kernels and ops whose time per step changed most. Control characters in
// names are shown as '?'.
std::string FormatDiffTable(const analysis::Diff& diff, const DiffContext& context,
                            const DiffTableOptions& options = {});

}  // namespace profctl::report

#endif  // PROFCTL_REPORT_DIFF_WRITERS_H_
