// `profctl capture`'s flags as one table (CaptureFlagTable): a row names a flag, its help and
// where its value lands in CaptureFlags. Registration with the FlagSet and --help come from the
// table; PlanFromCaptureFlags turns the values into the CapturePlan (the rules that involve
// several flags, and the plan's own validation, ValidatePlan).
#ifndef PROFCTL_COORDINATOR_CLI_CAPTURE_FLAGS_H_
#define PROFCTL_COORDINATOR_CLI_CAPTURE_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/flags.h"
#include "coordinator/clients/agent_credentials.h"
#include "coordinator/clients/worker.h"
#include "coordinator/plan/capture_plan.h"

namespace profctl::coordinator {

// What the flags hold, before they become a plan. Defaults are the flags' defaults.
struct CaptureFlags {
  std::string workers;
  std::string duration = "2000";  // ParseWindowMs
  std::string last;               // ParsePastMs; empty: not a snapshot
  std::string logdir = "profctl-logs";
  std::string session;
  bool json = false;
  bool pod_trace_json = false;
  int64_t prepare_timeout_ms = 0;
  std::string late = "capture";
  std::string step_pattern = std::string(analysis::kDefaultStepPattern);
  std::string align = "collectives";
  int64_t tolerance_ms = 0;
  int64_t retries = CapturePlan{}.retries;
  int64_t deadline_ms = 0;
  int64_t min_hosts = 0;
  bool require_all = false;
  int64_t host_tracer_level = CapturePlan{}.host_tracer_level;
  int64_t device_tracer_level = CapturePlan{}.device_tracer_level;
  int64_t python_tracer_level = CapturePlan{}.python_tracer_level;
  std::string coordinator;
  AgentCredentialFlags credentials;
};

// One flag of `profctl capture`: exactly one of the three fields is set.
struct CaptureFlag {
  const char* name;
  std::string CaptureFlags::*string_field = nullptr;
  int64_t CaptureFlags::*int_field = nullptr;
  bool CaptureFlags::*bool_field = nullptr;
  std::string help;
  bool non_empty = false;  // an explicitly empty value (--session=) is an error
};

// Every flag of `profctl capture` but the credentials (AddAgentCredentialFlags), in the order
// --help lists them.
const std::vector<CaptureFlag>& CaptureFlagTable();

// Registers the table's flags (and the credentials') with `fs`, bound to `flags`; --workers is
// required.
void AddCaptureFlags(FlagSet* fs, CaptureFlags* flags);

// --workers's help, for every command that takes it.
inline constexpr absl::string_view kWorkersFlagHelp =
    "comma-separated profctl-agent addresses, host:port or [v6]:port; grpc://host:port for a "
    "TensorFlow/JAX profiler server; or @FILE, a file of them (by line, comma or space; # "
    "comments) for a pod too large for a command line";

// --workers's value as addresses: a comma-separated list (ParseWorkerList), or `@FILE`, a regular
// file of addresses (ParseWorkerFile: by line, comma or space, `#` comments) of at most
// kMaxWorkerFileBytes, for a pod whose list is too long for one command-line argument (Linux
// caps one at 128 KiB). INVALID_ARGUMENT naming the entry (in a file, the file and the line); a
// file that cannot be read says why, naming its path ("--workers=@pod.txt: pod.txt: a FIFO, not a
// regular file").
absl::StatusOr<std::vector<WorkerAddress>> WorkersFromFlag(const std::string& value);

// The plan the parsed flags ask for (fs says which were given); reads the worker file of
// --workers=@FILE. INVALID_ARGUMENT naming the flag
// and its value: a usage error.
absl::StatusOr<CapturePlan> PlanFromCaptureFlags(const CaptureFlags& flags, const FlagSet& fs);

// A window's length as a flag gives it: whole milliseconds ("2000") or a duration with a unit
// ("2s", "500ms", "1m30s"). INVALID_ARGUMENT saying what it must be; the range is the caller's.
absl::StatusOr<int64_t> ParseWindowMs(absl::string_view text);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLI_CAPTURE_FLAGS_H_
