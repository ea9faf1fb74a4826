// The agent's end of the injection library's Unix socket (inject/socket_protocol.h,
// docs/cupti.md): accepts CUDA processes running libprofctl_inject.so, keeps their registrations,
// and drives them all through one capture window at a time for the cupti collector.
//
// SOCKET. `socket_path` (default /tmp/profctl/agent.sock): a missing parent folder is created
// with mode 0700 (see socket_mode); a stale socket left by a dead agent is removed (one a live
// agent still answers on is not: FAILED_PRECONDITION); the socket gets `socket_mode` (default
// 0600: only the agent's user can connect).
//
// PROTECTING THE AGENT. Everything a client sends is untrusted: a frame that does not parse, a
// length over its cap, anything before Register, or a second Register closes that connection
// only. Limits: max_clients connections, max_connections_per_peer connections from one process
// (the kernel's SO_PEERCRED pid: more from it are closed at once), register_timeout for a
// connection to send Register (then it is closed); when max_clients are open a new connection
// takes the place of the oldest one that has not registered yet (and is closed at once only when
// every one has), so idle connections cannot lock CUDA processes out. max_client_window_bytes of
// batches per process per window and max_window_bytes for all (a process over either loses its
// further batches, and the window says so), max_receive_buffer_bytes of partial frames over all
// connections, an outbound queue of at most kMaxOutboundBytes per
// connection (a process that does not read its commands is disconnected). A process that leaves
// mid-window loses only its own data; one that stalls is given up at TakeWindow's deadline.
//
// LIGHT LEVEL. SetCollectiveLaunches (the cupti collector's flight recorder) sends Recorder to
// every registered process and to each one registering later; processes then send
// CollectiveLaunches unprompted (their NCCL kernel launches). Each connection keeps the latest
// max_launches_per_process, their kernel names interned per connection (at most
// max_launch_names_per_process), and they go with the connection. RecentLaunches reads them. A
// frame that does not parse closes that connection only; a launch before the epoch is skipped.
//
// STEP SIGNAL. Registered processes send StepSamples (their NVTX step ranges) unprompted, window
// or not; each connection keeps the latest max_steps_per_process of them (older ones are
// dropped), and they go with the connection when it closes. RecentSteps reads them. A
// StepSamples frame that does not parse (before Register, count over its cap, a length that
// does not match the count) closes that connection only; a sample that starts before the epoch or
// ends before it starts, or has a negative step number, is skipped.
//
// THREADING. One I/O thread polls every socket; the public methods are thread-safe and never
// block on a socket (commands are queued and sent without waiting). TakeWindow waits on a
// condition with a deadline (it runs on the agent's collect executor).
#ifndef PROFCTL_AGENT_COLLECTORS_CUPTI_INJECT_SERVER_H_
#define PROFCTL_AGENT_COLLECTORS_CUPTI_INJECT_SERVER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "inject/socket_protocol.h"

namespace profctl::agent::cupti {

struct InjectServerOptions {
  std::string socket_path = inject::kDefaultAgentSocket;
  // The socket's permission bits (ParseSocketMode). 0600: only the agent's user may connect;
  // 0660/0666 let its group/everyone (training jobs running as another user). A folder the
  // server creates is 0700, plus search permission for whoever the mode lets connect.
  uint32_t socket_mode = 0600;
  int max_clients = 64;
  // Connections from one process (SO_PEERCRED pid); a CUDA process opens one.
  int max_connections_per_peer = 4;
  // How long a connection may stay unregistered.
  absl::Duration register_timeout = absl::Seconds(5);
  // Monotonic time for register_timeout; null: the host's clock.
  const Clock* clock = nullptr;
  int64_t max_client_window_bytes = int64_t{256} << 20;
  int64_t max_window_bytes = int64_t{512} << 20;
  // Bytes received and not yet framed, over every connection (a frame is held until it is
  // whole): the connection that pushes the total over this is closed.
  int64_t max_receive_buffer_bytes = int64_t{128} << 20;
  // Step samples kept per connection (the latest; older ones are dropped).
  size_t max_steps_per_process = 1024;
  // Collective launches kept per connection (the latest), and the distinct kernel names kept per
  // connection (launches of further names are kept under "ncclKernel_Unknown_too_many_names").
  size_t max_launches_per_process = 4096;
  size_t max_launch_names_per_process = 1024;
};

// Collecting a window holds at most about this many times the bytes its processes sent (raw
// batches are released as they are parsed; the rest is the parsed records, the planes being
// built and the serialized trace; measured in docs/agent-protection.md). The agent caps a
// window's bytes so that this multiple stays under --max-held-mb (WithWindowCapsUnder).
inline constexpr int64_t kCollectBytesMultiple = 11;

// `options` with max_window_bytes lowered to max_held_bytes / kCollectBytesMultiple when that is
// less, and max_client_window_bytes at most max_window_bytes.
InjectServerOptions WithWindowCapsUnder(int64_t max_held_bytes, InjectServerOptions options);

// An octal permission mode for the socket ("600", "0660"): owner read+write required, nothing
// beyond 0777. INVALID_ARGUMENT names the text.
absl::StatusOr<uint32_t> ParseSocketMode(absl::string_view text);

// A registered process.
struct InjectProcess {
  uint64_t connection = 0;  // unique for the server's life
  int64_t peer_pid = -1;    // from the socket's credentials (the kernel's word, not the client's)
  uint32_t pid = 0;         // as registered
  int32_t rank = -1;
  int32_t local_rank = -1;
  uint32_t flags = 0;
  std::string hostname;
  std::string visible_devices;
  std::string process_name;
  // The latest kUnavailable text ("held by another CUPTI subscriber (...)"), or empty.
  std::string unavailable;
};

// One process's part of a window.
struct InjectWindowResult {
  InjectProcess process;
  std::vector<std::string> batches;  // record batches (inject/records.h), as received
  bool enabled = false;
  int64_t enabled_wall_ns = 0;    // the process's CLOCK_REALTIME when it started recording
  int64_t gpu_minus_wall_ns = 0;  // its calibration then
  bool flushed = false;           // sent kFlushDone
  bool gone = false;              // disconnected before kFlushDone
  bool over_cap = false;          // batches refused by the byte caps
  int64_t dropped_bytes = 0;      // the bytes of those batches
  uint64_t dropped_records = 0;   // kFlushDone's count (records no batch header counts)
  int64_t bytes = 0;
  // Why tracing failed in this process (kUnavailable, kError, protocol errors), or empty.
  std::vector<std::string> errors;
};

// One finished training step from a process's step signal (times on its CLOCK_REALTIME).
struct InjectStepSample {
  int64_t start_realtime_ns = 0;
  int64_t end_realtime_ns = 0;
  int64_t step_num = -1;
  uint32_t pid = 0;    // as registered
  std::string source;  // "cupti pid 4242 rank 3" ("cupti pid 4242" when the rank is unknown)
};

// One NCCL kernel launch from a process's light level (times on its CLOCK_REALTIME).
struct InjectCollectiveLaunch {
  int64_t realtime_ns = 0;
  uint64_t seq = 0;  // the process's NCCL launches counted from 0
  uint32_t pid = 0;  // as registered
  uint32_t tid = 0;
  std::shared_ptr<const std::string> kernel_name;  // shared by the launches of one kernel
};

class InjectServer {
 public:
  // The most bytes queued for one connection before it is dropped as not reading.
  static constexpr size_t kMaxOutboundBytes = size_t{1} << 20;

  // Binds and listens, then starts the I/O thread. INVALID_ARGUMENT for a path too long for a
  // Unix socket, FAILED_PRECONDITION when another agent serves the path or it is not a socket,
  // INTERNAL for system call failures (naming the call, path and errno text).
  static absl::StatusOr<std::unique_ptr<InjectServer>> Start(InjectServerOptions options);
  // Says Bye to every process, closes every socket, removes the socket file, joins the thread.
  ~InjectServer();
  InjectServer(const InjectServer&) = delete;
  InjectServer& operator=(const InjectServer&) = delete;

  const std::string& socket_path() const { return options_.socket_path; }
  const InjectServerOptions& options() const { return options_; }
  std::vector<InjectProcess> Processes() const;

  // Sends Enable{token, start_wall_ns, end_wall_ns, session_id} (CLOCK_REALTIME ns; start 0 = at
  // once; end 0 = until Disable) to every registered process, and to every process registering
  // before CloseWindow. A window still open is dropped. Returns the window's token.
  uint64_t OpenWindow(const std::string& session_id, int64_t start_wall_ns, int64_t end_wall_ns);
  // Sends Disable and Flush to the window's processes. No-op for another token.
  void CloseWindow(uint64_t token);
  // Waits until every process of the window has flushed or gone, or `timeout` passed, and returns
  // each one's part (a stalled one: flushed = false, with what it sent so far); forgets the
  // window. Empty for another token.
  std::vector<InjectWindowResult> TakeWindow(uint64_t token, absl::Duration timeout);
  // Sends Disable to the window's processes and forgets it (the session ended before its start).
  void AbortWindow(uint64_t token);

  // Appends the step samples of the connected processes that ended in (since_realtime_ns,
  // now_realtime_ns] (CLOCK_REALTIME), oldest first (by end; ties by connection), at most `max`
  // of them: the latest. Thread-safe; never blocks on a socket.
  void RecentSteps(int64_t since_realtime_ns, int64_t now_realtime_ns, size_t max,
                   std::vector<InjectStepSample>* out) const;

  // A flight recorder snapshot's freshness: asks every registered process for the step samples
  // and collective launches it has not sent yet (SendPending) and waits until each has sent them
  // (Status kPendingSent), closed, or `timeout` passed. Returns how many did not answer (a
  // library older than SendPending, or a stalled process). Blocks the caller up to `timeout`.
  size_t RequestPending(absl::Duration timeout);

  // The flight recorder's light level: sends Recorder{collective launches on/off} to every
  // registered process now, and to every process that registers later.
  void SetCollectiveLaunches(bool on);
  // Appends the collective launches of the connected processes made in (since_realtime_ns,
  // now_realtime_ns] (CLOCK_REALTIME), oldest first (ties by connection). Thread-safe.
  void RecentLaunches(int64_t since_realtime_ns, int64_t now_realtime_ns,
                      std::vector<InjectCollectiveLaunch>* out) const;
  // Launches the processes said they lost (their ring was full), since the server started.
  uint64_t collective_launches_dropped() const;

  // Tests: waits until at least `n` processes are registered.
  bool WaitForProcessesForTesting(size_t n, absl::Duration timeout) const;
  // Tests: waits until at least `n` step samples were accepted since the server started.
  bool WaitForStepSamplesForTesting(uint64_t n, absl::Duration timeout) const;
  // Tests: waits until at least `n` collective launches were accepted since the server started.
  bool WaitForLaunchesForTesting(uint64_t n, absl::Duration timeout) const;
  // Tests: waits until at most `n` connections are open (registered or not).
  bool WaitForConnectionsAtMostForTesting(size_t n, absl::Duration timeout) const;
  // Tests: connections open now (registered or not).
  size_t connections_for_testing() const;
  // Tests: waits until at least `n` connections are open (registered or not).
  bool WaitForConnectionsAtLeastForTesting(size_t n, absl::Duration timeout) const;
  // Tests: closes the connections past register_timeout now, as the I/O thread does when it
  // wakes (with a fake clock it cannot know when time moved).
  void CloseUnregisteredForTesting();

 private:
  struct Connection;
  struct Window;

  explicit InjectServer(InjectServerOptions options);
  void Run();
  void Wake();
  void AcceptAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the new connection `fd` from `peer_pid` may be kept; may close the oldest
  // unregistered connection to make room.
  bool AdmitConnection(int64_t peer_pid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes the connections that did not register within register_timeout; returns how long
  // until the next one would expire (-1: none waits), for poll().
  int CloseUnregistered() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads what `c` sent; false when it must be closed.
  bool ReadFrom(Connection* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HandleFrame(Connection* c, uint16_t type, const std::vector<uint8_t>& payload)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues a frame and sends what the socket takes now; false when `c` must be closed.
  bool Send(Connection* c, inject::MessageType type, const void* payload, size_t length)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool FlushOutbound(Connection* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendEnable(Connection* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendRecorder(Connection* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps a CollectiveLaunches frame's launches; false (close_reason set) when it does not parse.
  bool AcceptLaunches(Connection* c, const std::vector<uint8_t>& payload)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Close(uint64_t id, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  InjectWindowResult* Participant(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WindowDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const InjectServerOptions options_;
  RealClock real_clock_;
  const Clock* clock_;  // options_.clock or real_clock_
  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};
  std::thread thread_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_connection_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::unique_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Window> window_ ABSL_GUARDED_BY(mu_);  // the open window, if any
  uint64_t step_samples_accepted_ ABSL_GUARDED_BY(mu_) = 0;
  bool collective_launches_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t launches_accepted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t launches_dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace profctl::agent::cupti

#endif  // PROFCTL_AGENT_COLLECTORS_CUPTI_INJECT_SERVER_H_
