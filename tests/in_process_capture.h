// `profctl capture` run in-process through the real CLI code path, gRPC and disk (the multi-host
// and fault tests drive real agent processes this way), and what tests read back from it.
#ifndef PROFCTL_TESTS_IN_PROCESS_CAPTURE_H_
#define PROFCTL_TESTS_IN_PROCESS_CAPTURE_H_

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/executor.h"
#include "common/file_util.h"
#include "coordinator/cli/cli.h"
#include "coordinator/clients/grpc_agent_client.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "profctl/v1/session.pb.h"
#include "tests/attempt_kinds.h"

namespace profctl::testkit {

// Runs `profctl <args...>` (a capture) as profctl does, traces saved off the executor; returns
// its exit code, fills `manifest` from `session_dir`/session.json and `output` with what it
// printed (stdout then stderr).
inline int CaptureInProcess(const std::vector<std::string>& args, const std::string& session_dir,
                            const RealClock& clock, v1::SessionManifest* manifest,
                            std::string* output,
                            coordinator::GrpcAgentClientOptions client_options = {}) {
  client_options.clock = &clock;
  coordinator::GrpcAgentClientFactory clients(std::move(client_options));
  AsioExecutor executor(&clock);
  ThreadWorkPool pool(/*threads=*/2);
  std::ostringstream out, err;
  const int rc = coordinator::RunCli(
      args, {&out, &err, &clock, &clients, &executor, "", nullptr, nullptr, &pool});
  *output = out.str() + err.str();
  absl::StatusOr<std::string> json = ReadFile(session_dir + "/session.json");
  EXPECT_TRUE(json.ok()) << json.status() << "\n" << *output;
  if (json.ok()) {
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(*json, manifest).ok());
  }
  return rc;
}

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_IN_PROCESS_CAPTURE_H_
