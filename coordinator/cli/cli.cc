#include "coordinator/cli/cli.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/flags.h"
#include "common/version.h"
#include "coordinator/cli/command.h"
#include "coordinator/cli/demo.h"

namespace profctl::coordinator {
namespace {

int VersionCommand(const std::vector<std::string>& /*args*/, const CliEnv& env) {
  *env.out << "profctl " << VersionDescription() << "\n";
  return kExitOk;
}

// Every command, in the order `profctl --help` lists them: the one place a command is named.
constexpr CliCommand kCommands[] = {
    {.name = "capture",
     .summary = "capture every --workers agent over one synchronized window",
     .run = CaptureCommand,
     .takes_interrupt = true},
    {"ping", "check every --workers agent: reachable, version, busy, clock offset and RTT",
     PingCommand},
    {"analyze", "the pod step breakdown of a saved session, XSpace files or PyTorch traces",
     AnalyzeCommand},
    {"diff",
     "what changed between two captures: step time per host and category, stragglers, "
     "kernels",
     DiffCommand},
    {.name = "serve",
     .summary = "run the coordinator daemon: scheduled captures and CoordinatorService",
     .run = ServeCommand,
     .takes_interrupt = true},
    {"sessions", "list the sessions of a log dir, or of a coordinator daemon (--coordinator)",
     SessionsCommand},
    {"schedules", "list a coordinator daemon's schedules: timing, next and last run, counters",
     SchedulesCommand},
    {.name = "demo",
     .summary = "start local agents running a synthetic 4-worker training job and capture them",
     .run = DemoCommand,
     .takes_interrupt = true},
    {"version", "print the version", VersionCommand},
};

std::string Usage() {
  std::string out = R"(profctl: capture performance profiles from many hosts at once.

usage: profctl <command> [flags]

Ctrl-C during a capture cancels it on every host and saves what was recorded (exit code 3).
Agents that require TLS or a token: --tls-ca, --tls-cert, --tls-key, --token-file (see
docs/security.md).

commands:
)";
  for (const CliCommand& c : kCommands)
    absl::StrAppendFormat(&out, "  %-9s %s\n", c.name, c.summary);
  absl::StrAppendFormat(&out,
                        "\nexit codes:\n"
                        "  %d  done: every host captured (or nothing went wrong)\n"
                        "  %d  failed: every host failed, or an environment error\n"
                        "  %d  usage: bad flags or arguments; nothing was contacted\n"
                        "  %d  partial: some hosts failed or were cut short; the others' traces "
                        "are saved\n"
                        "  128+N  signal N (130: a second Ctrl-C) quit at once\n",
                        kExitOk, kExitFailed, kExitUsage, kExitPartial);
  out +=
      "\nRun 'profctl <command> --help' for a command's flags; -V or --version for the "
      "version.\n";
  return out;
}

}  // namespace

int RunCli(const std::vector<std::string>& args, const CliEnv& env) {
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? *env.err : *env.out) << Usage();
    return args.empty() ? kExitUsage : kExitOk;
  }
  const std::string name = args[0] == "--version" || args[0] == "-V" ? "version" : args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const CliCommand& c : kCommands) {
    if (name == c.name) {
      if (env.interrupt_taken != nullptr) env.interrupt_taken->store(c.takes_interrupt);
      return c.run(rest, env);
    }
  }
  std::vector<std::string> known;
  for (const CliCommand& c : kCommands) known.emplace_back(c.name);
  const std::string closest = ClosestName(args[0], known);
  *env.err << "profctl: unknown command '" << args[0] << "'"
           << (closest.empty() ? "" : absl::StrCat(" (did you mean '", closest, "'?)")) << "\n\n"
           << Usage();
  return kExitUsage;
}

}  // namespace profctl::coordinator
