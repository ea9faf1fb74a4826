// The profctl command line, as a function tests can call with fakes (RunCli), and the capture
// every capturing command ends in (RunCapture). CliEnv and the exit codes: cli_env.h.
#ifndef PROFCTL_COORDINATOR_CLI_CLI_H_
#define PROFCTL_COORDINATOR_CLI_CLI_H_

#include <string>
#include <vector>

#include "coordinator/cli/cli_env.h"
#include "coordinator/plan/capture_plan.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

// Creates the session folder, runs the capture, prints the summary (or the manifest with json),
// returns the exit code. `command` names the caller in errors. With `generated_session` (the
// name came from DefaultSessionName) a taken name gets a _2, _3, ... suffix instead of failing.
int RunCapture(const CapturePlan& plan, bool json, const CliEnv& env, const std::string& command,
               bool generated_session = false);

// The human summary of a finished session: one row per host, columns aligned.
std::string FormatSummary(const profctl::v1::SessionManifest& m);
// profctl ping's table: reachability, version, busy, clock offset +- uncertainty, RTT.
std::string FormatPing(const profctl::v1::SessionManifest& m);

// args: without the program name, e.g. {"capture", "--workers=h:1"}.
int RunCli(const std::vector<std::string>& args, const CliEnv& env);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLI_CLI_H_
