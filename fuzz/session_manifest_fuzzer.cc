// Fuzzes how `profctl analyze SESSION_DIR` reads a saved session's session.json
// (coordinator/offline/analyze.h ExpandAnalyzeInputs): the bytes are the manifest in an otherwise
// empty folder. Whatever it says, every trace file it names must be inside that folder.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "common/file_util.h"
#include "coordinator/offline/analyze.h"
#include "coordinator/session/session_writer.h"
#include "fuzz/fuzz_util.h"

namespace {

using profctl::fuzz::Check;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = profctl::JoinPath(profctl::fuzz::ScratchDir(), "session");
  Check(profctl::MakeDirs(dir).ok());
  Check(
      profctl::WriteFileAtomically(profctl::JoinPath(dir, profctl::coordinator::kManifestFileName),
                                   std::string(reinterpret_cast<const char*>(data), size))
          .ok());
  absl::StatusOr<profctl::coordinator::AnalyzeInputs> inputs =
      profctl::coordinator::ExpandAnalyzeInputs({dir});
  if (!inputs.ok()) {
    Check(!inputs.status().message().empty());
    return 0;
  }
  Check(inputs->session_dir == dir && !inputs->files.empty());
  for (const profctl::coordinator::TraceInput& in : inputs->files) {
    Check(absl::StartsWith(in.path, dir + "/"));
    const std::string name = in.path.substr(dir.size() + 1);
    Check(!name.empty() && !absl::StrContains(name, '/'));
  }
  return 0;
}
