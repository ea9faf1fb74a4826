// Worker addresses as given on the command line (--workers=host:port,...).
#ifndef PROFCTL_COORDINATOR_CLIENTS_WORKER_H_
#define PROFCTL_COORDINATOR_CLIENTS_WORKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace profctl::coordinator {

struct WorkerAddress {
  // What serves at the address: a profctl-agent (profctl.v1.AgentService), or, written
  // `grpc://host:port`, a TensorFlow/JAX/TSL profiler server (tensorflow.ProfilerService:
  // `tf.profiler.experimental.server.start`, `jax.profiler.start_server`, or our agent's own
  // implementation of it). docs/tensorflow-interop.md.
  enum class Protocol { kAgent, kTsl };
  std::string address;  // as given, e.g. "host1:6000", "[::1]:6000", "grpc://host2:9999"
  std::string host;     // "host1" or "::1"
  int port = 0;
  Protocol protocol = Protocol::kAgent;
  // gRPC target ("host1:6000", "[::1]:6000").
  std::string target() const;
  // The target a channel is created for: an IP address as gRPC's ipv4:/ipv6: URI
  // ("ipv4:10.0.0.1:6000", "ipv6:[::1]:6000"), so gRPC does not start its DNS resolver (c-ares)
  // for an address it need not resolve; a name as target().
  std::string channel_target() const;
  // File stem: host:port with ':' -> '_' and IPv6 brackets dropped ("host1_6000", "__1_6000"),
  // without the scheme (a grpc:// worker's file is named as TensorBoard names it); over
  // kMaxFileStemChars (a 253-character host name) shortened with a stable hash
  // (BoundedFileStem), so its files can always be created.
  std::string file_stem() const;
};

// Parses one "host:port" or "[ipv6]:port", optionally prefixed "grpc://" (a TSL profiler server).
// Errors name the entry and what is wrong with it.
absl::StatusOr<WorkerAddress> ParseWorker(const std::string& text);

// Parses a list of entries as ParseWorker does; rejects an empty list, empty entries and
// duplicates (the same host:port twice, with or without grpc://). The typed path from a
// request's or a schedule's list to a plan: nothing is joined into text and split again.
absl::StatusOr<std::vector<WorkerAddress>> ParseWorkers(const std::vector<std::string>& entries);

// Parses a comma-separated list (--workers) as ParseWorkers does.
absl::StatusOr<std::vector<WorkerAddress>> ParseWorkerList(const std::string& text);

// Parses the text of a worker file (--workers=@FILE: a pod too large for one command-line
// argument, which Linux caps at 128 KiB, about 8,000 loopback addresses): addresses separated by
// commas, spaces, tabs or line ends, `#` to the end of a line a comment, blank lines skipped; each
// entry as ParseWorker takes it, duplicates refused. Errors name `source` and the line
// ("pod.txt:12: worker 'h:x': port 'x' is not a number in 1..65535", "pod.txt:9: worker 'h:1' is
// listed twice (first on line 3)"); no entry at all: "pod.txt: no workers (only blank lines and
// comments)".
absl::StatusOr<std::vector<WorkerAddress>> ParseWorkerFile(absl::string_view text,
                                                           absl::string_view source);

// The largest worker file read (--workers=@FILE, a schedule's targets file): 16 MiB, some
// 250,000 addresses.
inline constexpr uint64_t kMaxWorkerFileBytes = uint64_t{16} << 20;

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLIENTS_WORKER_H_
