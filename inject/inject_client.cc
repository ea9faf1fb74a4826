#include "inject/inject_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

namespace profctl::inject {
namespace {

constexpr int kControlSendTimeoutMs = 1'000;
constexpr int kBatchSendTimeoutMs = 10'000;
// Idle poll interval: only bounds how late Stop() is noticed when no wake-up byte arrives.
constexpr int64_t kIdlePollMs = 1'000;
// StepSamples frames sent (or dropped) per round at most.
constexpr int kMaxStepFramesPerRound = 8;

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t MonotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000 + ts.tv_nsec / 1'000'000;
}

int ConnectTo(const std::string& path) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) return -1;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

bool SendAll(int fd, const uint8_t* data, size_t size, int timeout_ms) {
  const int64_t deadline = MonotonicMs() + timeout_ms;
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int64_t left = deadline - MonotonicMs();
      if (left <= 0) return false;
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, static_cast<int>(left)) < 0 && errno != EINTR) return false;
      continue;
    }
    return false;
  }
  return true;
}

InjectClient::InjectClient(InjectClientOptions options, Tracer* tracer)
    : options_(std::move(options)), tracer_(tracer) {
  if (pipe2(wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0) wake_fds_[0] = wake_fds_[1] = -1;
}

InjectClient::~InjectClient() {
  Stop();
  for (int fd : wake_fds_) {
    if (fd >= 0) close(fd);
  }
}

void InjectClient::Start() {
  if (thread_.joinable()) return;
  // The thread takes no signals: they stay with the application's own threads.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (...) {  // no thread, no tracing; the process goes on
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void InjectClient::Stop() {
  stop_.store(true);
  if (wake_fds_[1] >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = write(wake_fds_[1], &byte, 1);
  }
  if (thread_.joinable()) thread_.join();
}

void InjectClient::CloseInheritedConnectionInChild() {
  const int fd = connection_fd_.exchange(-1);
  if (fd >= 0) close(fd);
}

int64_t InjectClient::Now() const {
  return options_.wall_now_ns != nullptr ? options_.wall_now_ns() : RealtimeNs();
}

void InjectClient::Pause(int64_t ms) {
  pollfd p{wake_fds_[0], POLLIN, 0};
  poll(&p, wake_fds_[0] >= 0 ? 1 : 0, static_cast<int>(ms));
}

void InjectClient::Run() {
  try {
    int64_t backoff = options_.initial_backoff_ms;
    while (!stop_.load()) {
      const int fd = ConnectTo(options_.socket_path);
      if (fd < 0) {
        Pause(backoff);
        backoff = std::min(backoff * 2, options_.max_backoff_ms);
        continue;
      }
      backoff = options_.initial_backoff_ms;
      connection_fd_.store(fd);
      Serve(fd);
      connection_fd_.store(-1);
      close(fd);
      if (!stop_.load()) Pause(backoff);
    }
  } catch (...) {  // fail-open: the thread ends, the process goes on
  }
}

void InjectClient::Serve(int fd) {
  std::vector<uint8_t> out;
  AppendMessage(MessageType::kRegister, options_.registration, &out);
  registrations_.fetch_add(1);  // before sending: the agent may answer before we return
  if (!SendAll(fd, out.data(), out.size(), kControlSendTimeoutMs)) return;
  if (const std::string why = tracer_->Unavailable(); !why.empty()) {
    if (!SendStatus(fd, 0, StatusCode::kUnavailable, 0, 0, 0, why)) return;
  }
  state_ = State::kIdle;
  // What waited while no agent listened is stale: the agent asks for recent steps.
  DropWaitingSteps();
  tracer_->ClearLaunches();
  launches_dropped_.fetch_add(tracer_->TakeLaunchesDropped());
  next_steps_ms_ = MonotonicMs() + options_.step_interval_ms;
  FrameDecoder decoder;
  std::vector<uint8_t> payload;
  uint8_t buf[64 * 1024];
  bool alive = true;
  while (alive && !stop_.load()) {
    int64_t timeout_ms = kIdlePollMs;
    const int64_t now = Now();
    if (state_ == State::kArmed) {
      timeout_ms = std::clamp<int64_t>((start_wall_ns_ - now + 999'999) / 1'000'000, 0, timeout_ms);
    } else if (state_ == State::kRecording) {
      timeout_ms = std::min(timeout_ms, options_.stream_interval_ms);
      if (end_wall_ns_ > 0) {
        timeout_ms = std::clamp<int64_t>((end_wall_ns_ - now + 999'999) / 1'000'000, 0, timeout_ms);
      }
    }
    timeout_ms = std::clamp<int64_t>(next_steps_ms_ - MonotonicMs(), 0, timeout_ms);
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fds_[0], POLLIN, 0}};
    const int ready = poll(fds, wake_fds_[0] >= 0 ? 2 : 1, static_cast<int>(timeout_ms));
    if (ready < 0 && errno != EINTR) break;
    if (state_ == State::kArmed && Now() >= start_wall_ns_) {
      alive = DoEnable(fd);
    } else if (state_ == State::kRecording && end_wall_ns_ > 0 && Now() >= end_wall_ns_) {
      // The window's own end: stop even if the agent's Disable never comes.
      tracer_->Disable();
      state_ = State::kStopped;
    }
    if (alive && (state_ == State::kRecording || state_ == State::kStopped)) {
      std::vector<uint8_t> frame;
      tracer_->TakeReady([&](const std::vector<uint8_t>& batch) {
        if (alive) alive = SendBatch(fd, batch, &frame);
      });
    }
    if (alive && MonotonicMs() >= next_steps_ms_) {
      alive = SendSteps(fd);
      if (alive) alive = SendLaunches(fd);
      next_steps_ms_ = MonotonicMs() + options_.step_interval_ms;
    }
    if (!alive || ready <= 0 || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      break;
    }
    decoder.Feed(buf, static_cast<size_t>(n));
    uint16_t type = 0;
    for (;;) {
      const FrameDecoder::Result r = decoder.Next(&type, &payload);
      if (r == FrameDecoder::Result::kNeedMore) break;
      if (r == FrameDecoder::Result::kError || !HandleFrame(fd, type, payload)) {
        alive = false;
        break;
      }
    }
  }
  // The agent is gone (or we stop): nothing recorded can reach it.
  if (state_ == State::kRecording) tracer_->Disable();
  if (state_ == State::kRecording || state_ == State::kStopped) tracer_->Discard();
  state_ = State::kIdle;
  ApplyRecorder(0);  // no agent, no recorder: the callbacks go (and a framework may subscribe)
}

bool InjectClient::HandleFrame(int fd, uint16_t type, const std::vector<uint8_t>& payload) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::kEnable: {
      EnableMessage m;
      if (!DecodeMessage(payload.data(), payload.size(), &m)) return false;
      if (state_ == State::kRecording) tracer_->Disable();
      if (state_ == State::kRecording || state_ == State::kStopped) tracer_->Discard();
      token_ = m.token;
      start_wall_ns_ = m.start_wall_ns;
      end_wall_ns_ = m.end_wall_ns;
      state_ = State::kArmed;
      if (Now() >= start_wall_ns_) return DoEnable(fd);
      return true;
    }
    case MessageType::kDisable: {
      CommandMessage m;
      if (!DecodeMessage(payload.data(), payload.size(), &m)) return false;
      if (m.token == token_) {
        if (state_ == State::kRecording) {
          tracer_->Disable();
          state_ = State::kStopped;
        } else if (state_ == State::kArmed) {
          state_ = State::kIdle;
        }
      }
      return SendStatus(fd, m.token, StatusCode::kDisabled, Now(), 0, 0, "");
    }
    case MessageType::kFlush: {
      CommandMessage m;
      if (!DecodeMessage(payload.data(), payload.size(), &m)) return false;
      uint64_t dropped = 0;
      bool sent = true;
      if (m.token == token_ && (state_ == State::kRecording || state_ == State::kStopped)) {
        if (state_ == State::kRecording) tracer_->Disable();
        std::vector<uint8_t> frame;
        dropped = tracer_->Flush([&](const std::vector<uint8_t>& batch) {
          if (sent) sent = SendBatch(fd, batch, &frame);
        });
        state_ = State::kIdle;
      } else if (m.token == token_ && state_ == State::kArmed) {
        state_ = State::kIdle;
      }
      return sent && SendStatus(fd, m.token, StatusCode::kFlushDone, 0, 0, dropped, "");
    }
    case MessageType::kSendPending: {
      CommandMessage m;
      if (!DecodeMessage(payload.data(), payload.size(), &m)) return false;
      tracer_->PollStepsNow(state_ == State::kIdle);
      if (!SendTakenSteps(fd) || !SendLaunches(fd)) return false;
      return SendStatus(fd, m.token, StatusCode::kPendingSent, 0, 0, 0, "");
    }
    case MessageType::kRecorder: {
      RecorderMessage m;
      if (!DecodeMessage(payload.data(), payload.size(), &m)) return false;
      ApplyRecorder(m.flags);
      return true;
    }
    case MessageType::kBye:
      return false;
    default:
      return true;  // a type from a newer agent: skipped
  }
}

bool InjectClient::SendBatch(int fd, const std::vector<uint8_t>& batch,
                             std::vector<uint8_t>* frame) {
  frame->clear();
  AppendFrame(MessageType::kRecordBatch, batch.data(), batch.size(), frame);
  return SendAll(fd, frame->data(), frame->size(), kBatchSendTimeoutMs);
}

bool InjectClient::SendSteps(int fd) {
  tracer_->PollSteps();
  return SendTakenSteps(fd);
}

bool InjectClient::SendTakenSteps(int fd) {
  // Bounded even if the application ends steps as fast as we send them.
  for (int frames = 0; frames < kMaxStepFramesPerRound; ++frames) {
    const size_t n = tracer_->TakeSteps(step_buffer_, kMaxStepSamplesPerFrame);
    if (n == 0) return true;
    step_frame_.clear();
    AppendStepSamples(step_buffer_, n, &step_frame_);
    if (!SendAll(fd, step_frame_.data(), step_frame_.size(), kControlSendTimeoutMs)) {
      steps_dropped_.fetch_add(n);
      return false;
    }
    steps_sent_.fetch_add(n);
    if (n < kMaxStepSamplesPerFrame) return true;
  }
  return true;
}

void InjectClient::ApplyRecorder(uint32_t flags) {
  const bool on = (flags & kRecorderFlagCollectiveLaunches) != 0;
  if (on == launches_on_.load()) return;
  std::string error;
  const bool ok = tracer_->SetCollectiveLaunches(on, &error);
  launches_on_.store(on && ok);
  // Not fatal, not worth the process's one stderr line: a framework profiler holding CUPTI's
  // callbacks is normal. The snapshot simply has no launches of this process.
  (void)error;
}

bool InjectClient::SendLaunches(int fd) {
  // Bounded even if the application launches collectives as fast as we send them.
  for (int frames = 0; frames < kMaxStepFramesPerRound; ++frames) {
    const size_t n = tracer_->TakeLaunches(launch_buffer_, kMaxCollectiveLaunchesPerFrame);
    const uint64_t dropped = tracer_->TakeLaunchesDropped();
    if (n == 0 && dropped == 0) return true;
    // Names: the frame's own table, at most kMaxCollectiveLaunchNamesPerFrame; entries whose
    // name does not fit go in the next frame of this round.
    size_t sent = 0;
    uint64_t carried = dropped;
    while (sent < n || carried > 0) {
      uint32_t ids[kMaxCollectiveLaunchNamesPerFrame];
      std::string_view names[kMaxCollectiveLaunchNamesPerFrame];
      size_t name_count = 0;
      size_t end = sent;
      for (; end < n; ++end) {
        const uint32_t id = launch_buffer_[end].name_index;
        size_t k = 0;
        while (k < name_count && ids[k] != id) ++k;
        if (k == name_count) {
          if (name_count == kMaxCollectiveLaunchNamesPerFrame) break;
          ids[name_count] = id;
          names[name_count++] = tracer_->LaunchName(id);
        }
        launch_buffer_[end].name_index = static_cast<uint32_t>(k);
      }
      launch_frame_.clear();
      AppendCollectiveLaunches(launch_buffer_ + sent, end - sent, names, name_count, carried,
                               &launch_frame_);
      if (!SendAll(fd, launch_frame_.data(), launch_frame_.size(), kControlSendTimeoutMs)) {
        launches_dropped_.fetch_add(n - sent + carried);
        return false;
      }
      launches_sent_.fetch_add(end - sent);
      launches_dropped_.fetch_add(carried);
      carried = 0;
      sent = end;
    }
    if (n < kMaxCollectiveLaunchesPerFrame) return true;
  }
  return true;
}

void InjectClient::DropWaitingSteps() {
  tracer_->PollSteps();
  for (int frames = 0; frames < kMaxStepFramesPerRound; ++frames) {
    const size_t n = tracer_->TakeSteps(step_buffer_, kMaxStepSamplesPerFrame);
    if (n == 0) return;
    steps_dropped_.fetch_add(n);
  }
}

bool InjectClient::DoEnable(int fd) {
  state_ = State::kIdle;
  if (std::string why = tracer_->Unavailable(); !why.empty()) {
    return SendStatus(fd, token_, StatusCode::kUnavailable, 0, 0, 0, why);
  }
  std::string error;
  int64_t gpu_minus_wall_ns = 0;
  const int64_t start = Now();
  if (!tracer_->Enable(&error, &gpu_minus_wall_ns)) {
    if (options_.log_once) options_.log_once(error);
    return SendStatus(fd, token_, StatusCode::kError, 0, 0, 0, error);
  }
  state_ = State::kRecording;
  return SendStatus(fd, token_, StatusCode::kEnabled, start, gpu_minus_wall_ns, 0, "");
}

bool InjectClient::SendStatus(int fd, uint64_t token, StatusCode code, int64_t v0, int64_t v1,
                              uint64_t dropped, const std::string& text) {
  StatusMessage m;
  m.token = token;
  m.code = static_cast<uint32_t>(code);
  m.value0 = v0;
  m.value1 = v1;
  m.dropped = dropped;
  SetText(m.text, text);
  std::vector<uint8_t> out;
  AppendMessage(MessageType::kStatus, m, &out);
  return SendAll(fd, out.data(), out.size(), kControlSendTimeoutMs);
}

}  // namespace profctl::inject
