// The session's outputs over its saved hosts, written once every host is done: the hang verdict
// (judged once, from every saved host's record), the aligned pod timeline (pod.trace.json.gz),
// the pod step breakdown's files (rendered once), and the saved traces made durable. Functions
// over the saved hosts; the engine's FinishJob runs them on its finisher (or executor).
#ifndef PROFCTL_COORDINATOR_ENGINE_POD_OUTPUTS_H_
#define PROFCTL_COORDINATOR_ENGINE_POD_OUTPUTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/breakdown.h"
#include "analysis/hang_verdict.h"
#include "common/executor.h"
#include "coordinator/engine/host_trace.h"
#include "coordinator/engine/session_writer.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

// One saved host (status OK or INCOMPLETE), aligned, in the session's host order.
struct PodOutputHost {
  const profctl::v1::HostResult* r = nullptr;
  // Its trace kept decoded from saving it; null: read back from the sink and decoded.
  std::unique_ptr<DecodedTrace> space;
  // Its per-step summary; absent when the breakdown left it out (manifest.errors says why).
  std::optional<analysis::HostSummary> summary;
  // Its record for the hang verdict, made as it was saved; absent when the step pattern does
  // not compile (then there is no breakdown either).
  std::optional<analysis::RankCollectives> collectives;
};

struct PodOutputsInput {
  std::string session;      // the session's name, for the breakdown's files
  int64_t start_at_ns = 0;  // the common start: the pod trace's time base
  TraceSink* sink = nullptr;
  // Where hosts are rendered, the breakdown built and the traces synced; null: here.
  WorkPool* pool = nullptr;
  // Asked between hosts of the pod trace (any thread may make it true): true stops the pod
  // trace there (an interrupt while the outputs are written), which is then not written; the
  // breakdown's files and the traces' sync still are. Null: never.
  std::function<bool()> interrupted;
};

// Makes every committed trace durable, judges the hang once from the hosts' records, writes the
// pod trace (a host that cannot be read back is left out of it; an interrupt leaves all of it
// out, naming that in manifest.errors) and the breakdown's files, rendered once the pod trace's
// fate is known (naming it only when it was written). Files written go into
// manifest.pod_trace_file / breakdown_files, problems into manifest.errors. Returns the pod step
// breakdown, absent when no host has a summary.
std::optional<analysis::PodBreakdown> WritePodOutputs(std::vector<PodOutputHost> hosts,
                                                      const PodOutputsInput& in,
                                                      profctl::v1::SessionManifest& manifest);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_POD_OUTPUTS_H_
