// xprof_check FILE.xplane.pb...: runs the XProf conformance checker (xprof_conformance.h) on
// saved XSpace files, each named by its stem as XProf names hosts. Prints each file's violations,
// or that it conforms. Exit status: 0 all conform, 1 some violate, 2 usage or unreadable file.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "tensorflow/profiler/xplane.pb.h"
#include "tests/xprof_conformance.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: xprof_check FILE.xplane.pb...\n";
    return 2;
  }
  int rc = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string path = argv[i];
    absl::StatusOr<std::string> bytes = profctl::ReadFile(path);
    tensorflow::profiler::XSpace space;
    if (!bytes.ok() || !space.ParseFromString(*bytes)) {
      std::cerr << path << ": "
                << (bytes.ok() ? "not a serialized XSpace" : std::string(bytes.status().message()))
                << "\n";
      rc = 2;
      continue;
    }
    absl::string_view stem = path;
    if (const size_t slash = stem.rfind('/'); slash != absl::string_view::npos) {
      stem.remove_prefix(slash + 1);
    }
    absl::ConsumeSuffix(&stem, ".xplane.pb");
    const std::vector<std::string> violations =
        profctl::testkit::CheckXProfConformance(space, stem);
    if (violations.empty()) {
      std::cout << path << ": conforms\n";
      continue;
    }
    std::cout << path << ": does not conform\n";
    for (const std::string& v : violations) std::cout << "  " << v << "\n";
    if (rc == 0) rc = 1;
  }
  return rc;
}
