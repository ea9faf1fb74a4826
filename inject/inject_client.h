// The injection library's side of the agent socket (socket_protocol.h): a background thread that
// connects to the agent, registers, and runs the agent's commands against a Tracer. Plain C++ and
// libc only: part of the injection library. Knows nothing of CUPTI (cupti_tracer.h is the real
// Tracer), so it is tested with a fake one.
//
// FAIL-OPEN. Nothing here may harm the process it runs in: no exceptions escape, no signal is
// raised (MSG_NOSIGNAL), no call blocks the thread that started it. No agent: the thread retries
// with capped exponential backoff (100 ms .. 30 s), silently. The agent gone mid-capture: recording
// stops, what was recorded is discarded, and the thread reconnects. A stream it cannot parse: it
// disconnects and reconnects.
#ifndef PROFCTL_INJECT_INJECT_CLIENT_H_
#define PROFCTL_INJECT_INJECT_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "inject/socket_protocol.h"

namespace profctl::inject {

// What the client drives. Called from the client's thread only, one call at a time.
class Tracer {
 public:
  virtual ~Tracer() = default;
  // Empty while tracing can work in this process; otherwise why it cannot ("held by another CUPTI
  // subscriber (Nsight Systems)"). Checked at registration and before every Enable.
  virtual std::string Unavailable() = 0;
  // Starts recording now. False with `*error` set when it could not (nothing is recording then).
  // `*gpu_minus_wall_ns`: the GPU clock minus CLOCK_REALTIME, measured now.
  virtual bool Enable(std::string* error, int64_t* gpu_minus_wall_ns) = 0;
  // Stops recording (what was recorded stays until Flush or Discard).
  virtual void Disable() = 0;
  // Hands every batch recorded since Enable to `sink`, in order; returns the records dropped
  // (buffers full, caps) over the window.
  virtual uint64_t Flush(const std::function<void(std::vector<uint8_t>)>& sink) = 0;
  // Drops whatever was recorded (the agent went away).
  virtual void Discard() = 0;
  // While recording: hands the batches finished so far to `sink` (they are streamed to the agent
  // during the window, so the process holds less). Flush hands over the rest.
  virtual void TakeReady(const std::function<void(std::vector<uint8_t>)>& /*sink*/) {}

  // The step signal (step_samples.h): NVTX step ranges seen inside and outside windows. The
  // client calls PollSteps about once a second (step_interval_ms) while connected, then
  // TakeSteps until it has them all. PollSteps may make CUPTI hand over the activity buffers it
  // holds and re-measure the clock offset; it must not block for long.
  virtual void PollSteps() {}
  // The same when the agent asks for the latest steps now (SendPending, a flight recorder
  // snapshot). `idle`: no window is recording, so the tracer may make CUPTI hand over the
  // buffers it is still filling (they hold step markers only then).
  virtual void PollStepsNow(bool /*idle*/) { PollSteps(); }
  // Moves up to `max` step samples that ended (CLOCK_REALTIME), oldest first, to `out`; returns
  // how many. Allocates nothing.
  virtual size_t TakeSteps(StepSampleEntry* /*out*/, size_t /*max*/) { return 0; }

  // The flight recorder's light level (collective_launches.h): while on, the launches of NCCL
  // kernels are kept. The client turns it on when the agent's Recorder message asks for it and
  // off when the agent says so or the connection ends. False, with `*error` set, when it cannot
  // be turned on (then it is off).
  virtual bool SetCollectiveLaunches(bool /*on*/, std::string* error) {
    *error = "not supported by this tracer";
    return false;
  }
  // Moves up to `max` recorded launches (CLOCK_REALTIME; name_index = a tracer-wide name id for
  // LaunchName), oldest first, to `out`; returns how many. Allocates nothing. PollSteps comes
  // first in each round (it re-measures the clock offset).
  virtual size_t TakeLaunches(CollectiveLaunchEntry* /*out*/, size_t /*max*/) { return 0; }
  // The kernel name of an id TakeLaunches gave.
  virtual std::string_view LaunchName(uint32_t /*id*/) { return {}; }
  // Launches lost since the last call (ring full, or thrown away by ClearLaunches).
  virtual uint64_t TakeLaunchesDropped() { return 0; }
  // Throws the waiting launches away (no agent saw them in time).
  virtual void ClearLaunches() {}
};

struct InjectClientOptions {
  std::string socket_path = kDefaultAgentSocket;
  // Sent as it is (pid, hostname, ranks filled by the caller).
  RegisterMessage registration;
  // CLOCK_REALTIME ns; tests may replace it.
  int64_t (*wall_now_ns)() = nullptr;
  int64_t initial_backoff_ms = 100;
  int64_t max_backoff_ms = 30'000;
  // While recording, finished batches are streamed this often (Tracer::TakeReady).
  int64_t stream_interval_ms = 250;
  // Step samples (Tracer::TakeSteps) are sent this often while connected (a frame holds at most
  // kMaxStepSamplesPerFrame; more go out in more frames at once).
  int64_t step_interval_ms = 1'000;
  // Called at most once per process for something worth one stderr line (the caller prints it).
  std::function<void(const std::string&)> log_once;
};

class InjectClient {
 public:
  // `tracer` outlives the client.
  InjectClient(InjectClientOptions options, Tracer* tracer);
  // Stops the thread (Stop()).
  ~InjectClient();
  InjectClient(const InjectClient&) = delete;
  InjectClient& operator=(const InjectClient&) = delete;

  // Starts the background thread; returns at once.
  void Start();
  // Asks the thread to end and joins it (at most one poll interval). The injection library never
  // calls it (its thread lives as long as the process); tests do.
  void Stop();

  // In a child just forked from this process (pthread_atfork's child handler; async-signal-safe):
  // closes the child's copy of the agent connection, whose thread did not survive the fork, so
  // the agent sees the connection end when the parent's does. The child never connects.
  void CloseInheritedConnectionInChild();

  // For tests: how many times the thread sent Register to an agent.
  int registrations_for_testing() const { return registrations_.load(); }
  // Step samples sent to an agent, and thrown away by the client (those that waited while no
  // agent was connected, and those whose frame could not be sent). The tracer counts its own.
  uint64_t step_samples_sent() const { return steps_sent_.load(); }
  uint64_t step_samples_dropped() const { return steps_dropped_.load(); }
  // Collective launches sent to an agent, and lost (by the tracer, or with a frame that could
  // not be sent).
  uint64_t launches_sent() const { return launches_sent_.load(); }
  uint64_t launches_dropped() const { return launches_dropped_.load(); }
  // Whether the light level is on now (the agent asked and the tracer could).
  bool collective_launches_on() const { return launches_on_.load(); }

 private:
  void Run();
  // One connection, until it breaks or Stop.
  void Serve(int fd);
  bool HandleFrame(int fd, uint16_t type, const std::vector<uint8_t>& payload);
  bool DoEnable(int fd);
  // Polls the tracer for step samples and sends them; false when the agent is gone.
  bool SendSteps(int fd);
  // Sends the step samples the tracer holds, without polling it first.
  bool SendTakenSteps(int fd);
  // Throws away the step samples waiting in the tracer (no agent saw them in time).
  void DropWaitingSteps();
  // Sends the collective launches the tracer holds; false when the agent is gone.
  bool SendLaunches(int fd);
  // Applies the agent's Recorder message (or "off" when the connection ends).
  void ApplyRecorder(uint32_t flags);
  // Sends a batch as a RecordBatch frame; false when the agent is gone.
  static bool SendBatch(int fd, const std::vector<uint8_t>& batch, std::vector<uint8_t>* frame);
  bool SendStatus(int fd, uint64_t token, StatusCode code, int64_t v0, int64_t v1, uint64_t dropped,
                  const std::string& text);
  int64_t Now() const;
  // Sleeps up to `ms` unless Stop is called.
  void Pause(int64_t ms);

  const InjectClientOptions options_;
  Tracer* const tracer_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> registrations_{0};
  std::atomic<uint64_t> steps_sent_{0};
  std::atomic<uint64_t> steps_dropped_{0};
  std::atomic<uint64_t> launches_sent_{0};
  std::atomic<uint64_t> launches_dropped_{0};
  std::atomic<bool> launches_on_{false};
  std::atomic<int> connection_fd_{-1};  // the connection Serve is using, for forked children
  int wake_fds_[2] = {-1, -1};

  // The connection's session (thread-only state).
  enum class State { kIdle, kArmed, kRecording, kStopped };
  State state_ = State::kIdle;
  uint64_t token_ = 0;
  int64_t start_wall_ns_ = 0;
  int64_t end_wall_ns_ = 0;
  int64_t next_steps_ms_ = 0;  // CLOCK_MONOTONIC ms of the next SendSteps
  StepSampleEntry step_buffer_[kMaxStepSamplesPerFrame];
  std::vector<uint8_t> step_frame_;  // reused: no allocation per frame in the steady state
  CollectiveLaunchEntry launch_buffer_[kMaxCollectiveLaunchesPerFrame];
  std::vector<uint8_t> launch_frame_;
};

// Sends all of `data` on a blocking or non-blocking socket, waiting for room up to `timeout_ms`
// in total. False when the peer is gone or too slow.
bool SendAll(int fd, const uint8_t* data, size_t size, int timeout_ms);

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_INJECT_CLIENT_H_
