// Fuzzes profctl-agent's settings (agent/agent_options.h): the bytes are an agent.yaml, applied
// with ApplyAgentConfigYaml and then read through ParseAgentOptions(--config=FILE) as the agent
// does at start (which validates the result), and an accepted `synthetic` setting is parsed by
// the synthetic job. Bytes starting with "--" are instead newline-separated command-line flags
// (--config dropped: it names a file).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "agent/agent_options.h"
#include "common/file_util.h"
#include "fuzz/fuzz_util.h"
#include "synthetic/synthetic_job.h"

namespace {

using profctl::fuzz::Check;

std::string ConfigPath() { return profctl::JoinPath(profctl::fuzz::ScratchDir(), "agent.yaml"); }

void CheckAccepted(const absl::StatusOr<profctl::agent::AgentOptions>& options) {
  if (!options.ok()) {
    Check(!options.status().message().empty());
    return;
  }
  if (options->help) return;
  Check(options->port >= 0 && options->port <= 65535 && !options->collectors.empty());
  (void)profctl::synthetic::ParseSyntheticJobConfig(options->synthetic);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (absl::StartsWith(text, "--")) {
    std::vector<std::string> args;
    for (absl::string_view arg : absl::StrSplit(text, '\n')) {
      if (!absl::StartsWith(arg, "--config")) args.emplace_back(arg);
    }
    CheckAccepted(profctl::agent::ParseAgentOptions(args));
    return 0;
  }
  profctl::agent::AgentOptions options;
  const absl::Status applied = profctl::agent::ApplyAgentConfigYaml(text, "agent.yaml", &options);
  if (!applied.ok()) {
    Check(absl::StrContains(applied.message(), "agent.yaml"));
    return 0;
  }
  Check(profctl::WriteFileAtomically(ConfigPath(), text).ok());
  CheckAccepted(profctl::agent::ParseAgentOptions({"--config=" + ConfigPath()}));
  return 0;
}
