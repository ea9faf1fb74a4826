#include "agent/collectors/cupti/inject_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace profctl::agent::cupti {

using inject::MessageType;
using inject::StatusCode;

struct InjectServer::Connection {
  uint64_t id = 0;
  int fd = -1;
  bool registered = false;
  int64_t accepted_mono_ns = 0;
  InjectProcess info;
  inject::FrameDecoder decoder;
  std::vector<uint8_t> out;
  size_t out_offset = 0;
  // The peer stopped reading (EPIPE): nothing more is sent, but what it sent before is still
  // read; the connection closes at its end of stream.
  bool write_failed = false;
  std::string close_reason;
  // The latest step samples (at most max_steps_per_process), in arrival order.
  std::deque<inject::StepSampleEntry> steps;
  std::string step_source;  // set at Register
  // The latest collective launches (at most max_launches_per_process), in arrival order, and
  // their kernel names interned (at most max_launch_names_per_process).
  std::deque<InjectCollectiveLaunch> launches;
  absl::flat_hash_map<std::string, std::shared_ptr<const std::string>> launch_names;
  // The last SendPending asked of it (RequestPending) and whether it answered.
  uint64_t pending_token = 0;
  bool pending_answered = false;
};

struct InjectServer::Window {
  uint64_t token = 0;
  std::string session_id;
  int64_t start_wall_ns = 0;
  int64_t end_wall_ns = 0;
  bool closed = false;
  int64_t bytes = 0;
  std::map<uint64_t, InjectWindowResult> results;  // by connection
};

namespace {

constexpr size_t kReadChunk = size_t{64} * 1024;
// Reads per connection per poll round, so one flooding process cannot starve the others.
constexpr int kReadsPerRound = 4;

std::string ErrnoText(int err) { return std::strerror(err); }

absl::Status MakeDirs(const std::string& dir, mode_t mode) {
  if (dir.empty()) return absl::OkStatus();
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("inject socket folder ", dir, " exists and is not a folder"));
    }
    return absl::OkStatus();
  }
  const size_t slash = dir.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    if (absl::Status s = MakeDirs(dir.substr(0, slash), mode); !s.ok()) return s;
  }
  if (mkdir(dir.c_str(), mode) != 0) {
    if (errno == EEXIST) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("mkdir ", dir, ": ", ErrnoText(errno)));
  }
  chmod(dir.c_str(), mode);  // mkdir's mode is masked by the umask
  return absl::OkStatus();
}

const char* StatusName(uint32_t code) {
  switch (static_cast<StatusCode>(code)) {
    case StatusCode::kEnabled:
      return "enabled";
    case StatusCode::kDisabled:
      return "disabled";
    case StatusCode::kFlushDone:
      return "flush done";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kError:
      return "error";
    case StatusCode::kPendingSent:
      return "pending sent";
  }
  return "unknown status";
}

}  // namespace

InjectServerOptions WithWindowCapsUnder(int64_t max_held_bytes, InjectServerOptions options) {
  options.max_window_bytes = std::max<int64_t>(
      1, std::min(options.max_window_bytes, max_held_bytes / kCollectBytesMultiple));
  options.max_client_window_bytes =
      std::min(options.max_client_window_bytes, options.max_window_bytes);
  return options;
}

absl::StatusOr<uint32_t> ParseSocketMode(absl::string_view text) {
  uint32_t mode = 0;
  bool ok = !text.empty() && text.size() <= 4;
  for (char c : text) {
    if (c < '0' || c > '7') ok = false;
    mode = mode * 8 + static_cast<uint32_t>(c - '0');
  }
  if (!ok || mode > 0777 || (mode & 0600) != 0600) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket mode '", text,
                     "' must be octal, at most 0777, with owner read and write (e.g. 0600, 0660)"));
  }
  return mode;
}

InjectServer::InjectServer(InjectServerOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : &real_clock_) {}

absl::StatusOr<std::unique_ptr<InjectServer>> InjectServer::Start(InjectServerOptions options) {
  const std::string path = options.socket_path;
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("inject socket path '", path, "' must be 1..",
                                                   sizeof(addr.sun_path) - 1, " bytes"));
  }
  if ((options.socket_mode & 0600) != 0600 || options.socket_mode > 0777) {
    return absl::InvalidArgumentError(
        "inject socket mode must give its owner read and write and nothing beyond 0777");
  }
  if (options.max_clients < 1 || options.max_connections_per_peer < 1) {
    return absl::InvalidArgumentError(
        "inject server: max_clients and max_connections_per_peer must be at least 1");
  }
  if (options.register_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("inject server: register_timeout must be positive");
  }
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    // Search permission for whoever the socket's mode lets connect.
    const mode_t dir_mode = 0700 | ((options.socket_mode & 0060) != 0 ? 0010 : 0) |
                            ((options.socket_mode & 0006) != 0 ? 0001 : 0);
    if (absl::Status s = MakeDirs(path.substr(0, slash), dir_mode); !s.ok()) return s;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("inject socket ", path, " exists and is not a socket"));
    }
    const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool live =
        probe >= 0 && connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
    if (probe >= 0) close(probe);
    if (live) {
      return absl::FailedPreconditionError(
          absl::StrCat("inject socket ", path, " is served by another process (another agent?)"));
    }
    unlink(path.c_str());  // stale: its agent is gone
  }
  auto server = std::unique_ptr<InjectServer>(new InjectServer(std::move(options)));
  server->listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (server->listen_fd_ < 0)
    return absl::InternalError(absl::StrCat("socket: ", ErrnoText(errno)));
  if (bind(server->listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::InternalError(absl::StrCat("bind ", path, ": ", ErrnoText(errno)));
  }
  if (chmod(path.c_str(), server->options_.socket_mode) != 0 ||
      listen(server->listen_fd_, 128) != 0) {
    const int err = errno;
    unlink(path.c_str());
    return absl::InternalError(absl::StrCat("listen ", path, ": ", ErrnoText(err)));
  }
  if (pipe2(server->wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
    unlink(path.c_str());
    return absl::InternalError(absl::StrCat("pipe2: ", ErrnoText(errno)));
  }
  server->thread_ = std::thread([s = server.get()] { s->Run(); });
  return server;
}

InjectServer::~InjectServer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [id, c] : connections_) Send(c.get(), MessageType::kBye, nullptr, 0);
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  for (auto& [id, c] : connections_) close(c->fd);
  connections_.clear();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(options_.socket_path.c_str());
  }
  for (int fd : wake_fds_) {
    if (fd >= 0) close(fd);
  }
}

void InjectServer::Wake() {
  if (wake_fds_[1] < 0) return;
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = write(wake_fds_[1], &byte, 1);
}

void InjectServer::Run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  for (;;) {
    int timeout_ms = -1;  // until the next unregistered connection expires
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      timeout_ms = CloseUnregistered();
      fds.clear();
      ids.clear();
      fds.push_back({wake_fds_[0], POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (auto& [id, c] : connections_) {
        const bool pending = !c->write_failed && c->out.size() > c->out_offset;
        fds.push_back({c->fd, static_cast<short>(POLLIN | (pending ? POLLOUT : 0)), 0});
        ids.push_back(id);
      }
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      spdlog::error("inject server: poll: {}", ErrnoText(errno));
      return;
    }
    absl::MutexLock lock(&mu_);
    if (fds[0].revents != 0) {
      char buf[64];
      while (read(wake_fds_[0], buf, sizeof(buf)) > 0) {
      }
    }
    if ((fds[1].revents & POLLIN) != 0) AcceptAll();
    for (size_t i = 0; i < ids.size(); ++i) {
      const short revents = fds[i + 2].revents;
      auto it = connections_.find(ids[i]);
      if (revents == 0 || it == connections_.end()) continue;
      Connection* c = it->second.get();
      bool ok = true;
      if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) ok = ReadFrom(c);
      if (ok && (revents & POLLOUT) != 0) ok = FlushOutbound(c);
      if (!ok) Close(c->id, c->close_reason);
    }
  }
}

void InjectServer::AcceptAll() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof(cred);
    const int64_t peer_pid =
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : -1;
    if (!AdmitConnection(peer_pid)) {
      close(fd);
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->id = next_connection_++;
    c->fd = fd;
    c->accepted_mono_ns = clock_->MonoNs();
    c->info.connection = c->id;
    c->info.peer_pid = peer_pid;
    connections_.emplace(c->id, std::move(c));
  }
}

bool InjectServer::AdmitConnection(int64_t peer_pid) {
  if (peer_pid >= 0) {
    int from_peer = 0;
    for (const auto& [id, c] : connections_) from_peer += c->info.peer_pid == peer_pid ? 1 : 0;
    if (from_peer >= options_.max_connections_per_peer) {
      spdlog::warn("inject server: refusing a connection from pid {}: it has {} open already",
                   peer_pid, from_peer);
      return false;
    }
  }
  if (connections_.size() < static_cast<size_t>(options_.max_clients)) return true;
  // Full: the oldest connection that has not registered yet (ids grow with time) makes room.
  for (const auto& [id, c] : connections_) {
    if (c->registered) continue;
    Close(id, absl::StrCat("unregistered, and its place (one of ", options_.max_clients,
                           ") was taken by a new connection"));
    return true;
  }
  spdlog::warn("inject server: refusing a connection: {} processes already connected",
               connections_.size());
  return false;
}

int InjectServer::CloseUnregistered() {
  const int64_t now = clock_->MonoNs();
  const int64_t timeout_ns = absl::ToInt64Nanoseconds(options_.register_timeout);
  std::vector<uint64_t> expired;
  int64_t next_ns = -1;
  for (const auto& [id, c] : connections_) {
    if (c->registered) continue;
    const int64_t left = c->accepted_mono_ns + timeout_ns - now;
    if (left <= 0) {
      expired.push_back(id);
    } else if (next_ns < 0 || left < next_ns) {
      next_ns = left;
    }
  }
  for (uint64_t id : expired) {
    Close(id, absl::StrCat("did not register within ",
                           absl::FormatDuration(options_.register_timeout)));
  }
  if (next_ns < 0) return -1;
  // Rounded up, so the wake-up finds it expired.
  return static_cast<int>(
      std::min<int64_t>((next_ns + kNanosPerMilli - 1) / kNanosPerMilli, int64_t{60'000}));
}

void InjectServer::CloseUnregisteredForTesting() {
  absl::MutexLock lock(&mu_);
  CloseUnregistered();
}

bool InjectServer::WaitForConnectionsAtLeastForTesting(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return connections_.size() >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

bool InjectServer::ReadFrom(Connection* c) {
  uint8_t buf[kReadChunk];
  for (int round = 0; round < kReadsPerRound; ++round) {
    const ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) {
      c->close_reason = "disconnected";
      return false;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
      c->close_reason = absl::StrCat("recv: ", ErrnoText(errno));
      return false;
    }
    c->decoder.Feed(buf, static_cast<size_t>(n));
    int64_t buffered = 0;
    for (const auto& [id, other] : connections_) {
      buffered += static_cast<int64_t>(other->decoder.buffered());
    }
    if (buffered > options_.max_receive_buffer_bytes) {
      c->close_reason = absl::StrCat("the agent's receive buffers are full (",
                                     options_.max_receive_buffer_bytes >> 20, " MiB)");
      return false;
    }
    uint16_t type = 0;
    std::vector<uint8_t> payload;
    for (;;) {
      const inject::FrameDecoder::Result r = c->decoder.Next(&type, &payload);
      if (r == inject::FrameDecoder::Result::kNeedMore) break;
      if (r == inject::FrameDecoder::Result::kError) {
        c->close_reason = absl::StrCat("protocol error: ", c->decoder.error());
        return false;
      }
      if (!HandleFrame(c, type, payload)) return false;
    }
    if (static_cast<size_t>(n) < sizeof(buf)) return true;
  }
  return true;
}

InjectWindowResult* InjectServer::Participant(uint64_t id) {
  if (!window_) return nullptr;
  auto it = window_->results.find(id);
  return it == window_->results.end() ? nullptr : &it->second;
}

bool InjectServer::HandleFrame(Connection* c, uint16_t type, const std::vector<uint8_t>& payload) {
  const auto kind = static_cast<MessageType>(type);
  if (!c->registered && kind != MessageType::kRegister) {
    c->close_reason = absl::StrCat("protocol error: message type ", type, " before Register");
    return false;
  }
  switch (kind) {
    case MessageType::kRegister: {
      inject::RegisterMessage m;
      if (c->registered || !inject::DecodeMessage(payload.data(), payload.size(), &m)) {
        c->close_reason = "protocol error: bad or repeated Register";
        return false;
      }
      c->registered = true;
      c->info.pid = m.pid;
      c->info.rank = m.rank;
      c->info.local_rank = m.local_rank;
      c->info.flags = m.flags;
      c->info.hostname = std::string(inject::GetText(m.hostname));
      c->info.visible_devices = std::string(inject::GetText(m.visible_devices));
      c->info.process_name = std::string(inject::GetText(m.process_name));
      c->step_source = absl::StrCat("cupti pid ", c->info.pid);
      if (c->info.rank >= 0) absl::StrAppend(&c->step_source, " rank ", c->info.rank);
      spdlog::info("inject server: pid {} ({}) registered, rank {} local rank {}", c->info.pid,
                   c->info.process_name, c->info.rank, c->info.local_rank);
      if (collective_launches_) SendRecorder(c);
      if (window_ && !window_->closed) SendEnable(c);
      return c->close_reason.empty();
    }
    case MessageType::kStatus: {
      inject::StatusMessage m;
      if (!inject::DecodeMessage(payload.data(), payload.size(), &m)) {
        c->close_reason = "protocol error: short Status";
        return false;
      }
      const std::string text(inject::GetText(m.text));
      if (m.code == static_cast<uint32_t>(StatusCode::kPendingSent)) {
        // Frames of one connection are handled in order: its pending steps are in already.
        if (m.token == c->pending_token) c->pending_answered = true;
        return true;
      }
      if (m.code == static_cast<uint32_t>(StatusCode::kUnavailable)) c->info.unavailable = text;
      InjectWindowResult* p = Participant(c->id);
      if (p == nullptr || (m.token != 0 && m.token != window_->token)) return true;
      if (m.token == 0 && m.code != static_cast<uint32_t>(StatusCode::kUnavailable)) {
        if (!text.empty()) spdlog::info("inject server: pid {}: {}", c->info.pid, text);
        return true;
      }
      switch (static_cast<StatusCode>(m.code)) {
        case StatusCode::kEnabled:
          p->enabled = true;
          p->enabled_wall_ns = m.value0;
          p->gpu_minus_wall_ns = m.value1;
          break;
        case StatusCode::kFlushDone:
          p->flushed = true;
          p->dropped_records += m.dropped;
          break;
        case StatusCode::kUnavailable:
          p->process.unavailable = text;
          p->errors.push_back(absl::StrCat("GPU tracing unavailable: ", text));
          break;
        case StatusCode::kError:
          p->errors.push_back(absl::StrCat("GPU tracing failed: ", text));
          break;
        case StatusCode::kDisabled:
          break;
        default:
          spdlog::debug("inject server: pid {}: {} ({})", c->info.pid, StatusName(m.code), m.code);
      }
      return true;
    }
    case MessageType::kRecordBatch: {
      InjectWindowResult* p = Participant(c->id);
      if (p == nullptr || p->flushed) return true;  // not ours to keep
      const auto size = static_cast<int64_t>(payload.size());
      if (p->bytes + size > options_.max_client_window_bytes ||
          window_->bytes + size > options_.max_window_bytes) {
        if (!p->over_cap) {
          p->errors.push_back(absl::StrCat("record batches over the byte cap (",
                                           options_.max_client_window_bytes >> 20,
                                           " MiB per process, ", options_.max_window_bytes >> 20,
                                           " MiB per window) were dropped"));
        }
        p->over_cap = true;
        p->dropped_bytes += size;
        return true;
      }
      p->bytes += size;
      window_->bytes += size;
      p->batches.emplace_back(payload.begin(), payload.end());
      return true;
    }
    case MessageType::kStepSamples: {
      std::vector<inject::StepSampleEntry> samples;
      const char* why = "";
      if (!inject::DecodeStepSamples(payload.data(), payload.size(), &samples, &why)) {
        c->close_reason = absl::StrCat("protocol error: ", why);
        return false;
      }
      for (const inject::StepSampleEntry& sample : samples) {
        // Untrusted: times before the epoch or backwards, or no step number, are skipped (so
        // end - start cannot overflow downstream).
        if (sample.start_wall_ns < 0 || sample.end_wall_ns < sample.start_wall_ns ||
            sample.step_num < 0) {
          continue;
        }
        c->steps.push_back(sample);
        ++step_samples_accepted_;
        while (c->steps.size() > options_.max_steps_per_process) c->steps.pop_front();
      }
      return true;
    }
    case MessageType::kCollectiveLaunches:
      return AcceptLaunches(c, payload);
    case MessageType::kBye:
      c->close_reason = "said goodbye";
      return false;
    default:
      return true;  // commands are the agent's to send; unknown types are skipped
  }
}

bool InjectServer::Send(Connection* c, MessageType type, const void* payload, size_t length) {
  if (c->write_failed) return true;
  if (c->out.size() - c->out_offset + length > kMaxOutboundBytes) {
    c->close_reason = "not reading its commands";
    return false;
  }
  inject::AppendFrame(type, payload, length, &c->out);
  return FlushOutbound(c);
}

bool InjectServer::FlushOutbound(Connection* c) {
  while (c->out_offset < c->out.size()) {
    const ssize_t n = send(c->fd, c->out.data() + c->out_offset, c->out.size() - c->out_offset,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c->out_offset += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      Wake();  // the I/O thread polls for room
      return true;
    }
    // The peer is going away; its last messages (a batch, FlushDone) may still be unread.
    spdlog::debug("inject server: send to pid {}: {}", c->info.pid, ErrnoText(errno));
    c->write_failed = true;
    break;
  }
  c->out.clear();
  c->out_offset = 0;
  return true;
}

void InjectServer::SendEnable(Connection* c) {
  inject::EnableMessage m;
  m.token = window_->token;
  m.start_wall_ns = window_->start_wall_ns;
  m.end_wall_ns = window_->end_wall_ns;
  inject::SetText(m.session_id, window_->session_id);
  InjectWindowResult& r = window_->results[c->id];
  r.process = c->info;
  if (!Send(c, MessageType::kEnable, &m, sizeof(m))) r.gone = true;
}

void InjectServer::SendRecorder(Connection* c) {
  inject::RecorderMessage m;
  m.flags = collective_launches_ ? inject::kRecorderFlagCollectiveLaunches : 0;
  Send(c, MessageType::kRecorder, &m, sizeof(m));
}

bool InjectServer::AcceptLaunches(Connection* c, const std::vector<uint8_t>& payload) {
  inject::CollectiveLaunchesFrame frame;
  const char* why = "";
  if (!inject::DecodeCollectiveLaunches(payload.data(), payload.size(), &frame, &why)) {
    c->close_reason = absl::StrCat("protocol error: ", why);
    return false;
  }
  launches_dropped_ += frame.dropped;
  // The frame's names, interned per connection (untrusted: their number is capped).
  std::vector<std::shared_ptr<const std::string>> names;
  names.reserve(frame.names.size());
  for (const std::string_view wire_name : frame.names) {
    absl::string_view name(wire_name.data(), wire_name.size());
    auto it = c->launch_names.find(name);
    if (it == c->launch_names.end()) {
      if (c->launch_names.size() >= options_.max_launch_names_per_process) {
        name = "ncclKernel_Unknown_too_many_names";
        it = c->launch_names.find(name);
      }
      if (it == c->launch_names.end()) {
        it = c->launch_names
                 .emplace(std::string(name), std::make_shared<const std::string>(std::string(name)))
                 .first;
      }
    }
    names.push_back(it->second);
  }
  for (const inject::CollectiveLaunchEntry& e : frame.entries) {
    if (e.wall_ns < 0) continue;  // untrusted: before the epoch
    c->launches.push_back({.realtime_ns = e.wall_ns,
                           .seq = e.seq,
                           .pid = c->info.pid,
                           .tid = e.tid,
                           .kernel_name = names[e.name_index]});
    ++launches_accepted_;
    while (c->launches.size() > options_.max_launches_per_process) c->launches.pop_front();
  }
  return true;
}

void InjectServer::SetCollectiveLaunches(bool on) {
  absl::MutexLock lock(&mu_);
  collective_launches_ = on;
  std::vector<uint64_t> broken;
  for (auto& [id, c] : connections_) {
    if (!c->registered) continue;
    SendRecorder(c.get());
    if (!c->close_reason.empty()) broken.push_back(id);
  }
  for (uint64_t id : broken) Close(id, connections_[id]->close_reason);
}

void InjectServer::RecentLaunches(int64_t since_realtime_ns, int64_t now_realtime_ns,
                                  std::vector<InjectCollectiveLaunch>* out) const {
  absl::MutexLock lock(&mu_);
  const size_t first = out->size();
  for (const auto& [id, c] : connections_) {  // by connection id: ties keep that order
    if (!c->registered) continue;
    for (const InjectCollectiveLaunch& l : c->launches) {
      if (l.realtime_ns > since_realtime_ns && l.realtime_ns <= now_realtime_ns) {
        out->push_back(l);
      }
    }
  }
  std::stable_sort(out->begin() + static_cast<ptrdiff_t>(first), out->end(),
                   [](const InjectCollectiveLaunch& a, const InjectCollectiveLaunch& b) {
                     return a.realtime_ns < b.realtime_ns;
                   });
}

uint64_t InjectServer::collective_launches_dropped() const {
  absl::MutexLock lock(&mu_);
  return launches_dropped_;
}

bool InjectServer::WaitForLaunchesForTesting(uint64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return launches_accepted_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

void InjectServer::Close(uint64_t id, const std::string& why) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection* c = it->second.get();
  if (InjectWindowResult* p = Participant(id); p != nullptr && !p->flushed) {
    p->gone = true;
    p->errors.push_back(absl::StrCat("connection lost during the capture: ", why));
  }
  if (c->registered) {
    spdlog::info("inject server: pid {} left: {}", c->info.pid, why);
  } else {
    spdlog::warn("inject server: dropped an unregistered connection: {}", why);
  }
  // shutdown first: the I/O thread's poll() may still hold the socket, which close() alone
  // would keep open until that poll returns.
  shutdown(c->fd, SHUT_RDWR);
  close(c->fd);
  connections_.erase(it);
  Wake();
}

std::vector<InjectProcess> InjectServer::Processes() const {
  absl::MutexLock lock(&mu_);
  std::vector<InjectProcess> out;
  for (const auto& [id, c] : connections_) {
    if (c->registered) out.push_back(c->info);
  }
  return out;
}

uint64_t InjectServer::OpenWindow(const std::string& session_id, int64_t start_wall_ns,
                                  int64_t end_wall_ns) {
  absl::MutexLock lock(&mu_);
  window_ = std::make_unique<Window>();
  window_->token = next_token_++;
  window_->session_id = session_id;
  window_->start_wall_ns = start_wall_ns;
  window_->end_wall_ns = end_wall_ns;
  std::vector<uint64_t> broken;
  for (auto& [id, c] : connections_) {
    if (!c->registered) continue;
    SendEnable(c.get());
    if (!c->close_reason.empty()) broken.push_back(id);
  }
  for (uint64_t id : broken) Close(id, connections_[id]->close_reason);
  return window_->token;
}

size_t InjectServer::RequestPending(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const uint64_t token = next_token_++;
  const inject::CommandMessage command{token};
  std::vector<uint64_t> asked;
  std::vector<uint64_t> broken;
  for (auto& [id, c] : connections_) {
    if (!c->registered || c->write_failed) continue;  // one that cannot be asked is not waited for
    c->pending_token = token;
    c->pending_answered = false;
    if (!Send(c.get(), MessageType::kSendPending, &command, sizeof(command))) {
      broken.push_back(id);
      continue;
    }
    asked.push_back(id);
  }
  for (uint64_t id : broken) Close(id, connections_[id]->close_reason);
  // Gone (closed) counts as answered: what it sent before is in.
  auto silent = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_t n = 0;
    for (uint64_t id : asked) {
      auto it = connections_.find(id);
      if (it != connections_.end() && !it->second->pending_answered) ++n;
    }
    return n;
  };
  auto all_answered = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return silent() == 0; };
  mu_.AwaitWithTimeout(absl::Condition(&all_answered), timeout);
  return silent();
}

void InjectServer::CloseWindow(uint64_t token) {
  absl::MutexLock lock(&mu_);
  if (!window_ || window_->token != token || window_->closed) return;
  window_->closed = true;
  const inject::CommandMessage command{token};
  std::vector<uint64_t> broken;
  for (auto& [id, result] : window_->results) {
    auto it = connections_.find(id);
    if (it == connections_.end()) continue;
    if (!Send(it->second.get(), MessageType::kDisable, &command, sizeof(command)) ||
        !Send(it->second.get(), MessageType::kFlush, &command, sizeof(command))) {
      broken.push_back(id);
    }
  }
  for (uint64_t id : broken) Close(id, connections_[id]->close_reason);
}

bool InjectServer::WindowDone() const {
  if (!window_ || !window_->closed) return true;
  for (const auto& [id, r] : window_->results) {
    if (!r.flushed && !r.gone) return false;
  }
  return true;
}

std::vector<InjectWindowResult> InjectServer::TakeWindow(uint64_t token, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (!window_ || window_->token != token) return {};
  mu_.AwaitWithTimeout(absl::Condition(this, &InjectServer::WindowDone), timeout);
  if (!window_ || window_->token != token) return {};
  std::vector<InjectWindowResult> out;
  std::vector<uint64_t> stalled;
  for (auto& [id, r] : window_->results) {
    if (!r.flushed && !r.gone) {
      r.errors.push_back(absl::StrCat("did not finish flushing within ",
                                      absl::FormatDuration(timeout),
                                      "; disconnected, its trace may be incomplete"));
      stalled.push_back(id);
    }
    out.push_back(std::move(r));
  }
  window_.reset();
  // A process given up on is disconnected: its late batches must not land in a later window.
  for (uint64_t id : stalled) Close(id, "stalled while flushing");
  return out;
}

void InjectServer::AbortWindow(uint64_t token) {
  absl::MutexLock lock(&mu_);
  if (!window_ || window_->token != token) return;
  const inject::CommandMessage command{token};
  std::vector<uint64_t> broken;
  for (auto& [id, result] : window_->results) {
    auto it = connections_.find(id);
    if (it == connections_.end()) continue;
    if (!Send(it->second.get(), MessageType::kDisable, &command, sizeof(command))) {
      broken.push_back(id);
    }
  }
  window_.reset();
  for (uint64_t id : broken) Close(id, connections_[id]->close_reason);
}

void InjectServer::RecentSteps(int64_t since_realtime_ns, int64_t now_realtime_ns, size_t max,
                               std::vector<InjectStepSample>* out) const {
  if (max == 0) return;
  struct Hit {
    const inject::StepSampleEntry* sample;
    const std::string* source;
    uint32_t pid;
  };
  absl::MutexLock lock(&mu_);
  std::vector<Hit> hits;
  for (const auto& [id, c] : connections_) {  // by connection id: ties keep that order
    if (!c->registered) continue;
    for (const inject::StepSampleEntry& sample : c->steps) {
      if (sample.end_wall_ns > since_realtime_ns && sample.end_wall_ns <= now_realtime_ns) {
        hits.push_back({&sample, &c->step_source, c->info.pid});
      }
    }
  }
  std::stable_sort(hits.begin(), hits.end(), [](const Hit& a, const Hit& b) {
    return a.sample->end_wall_ns < b.sample->end_wall_ns;
  });
  const size_t first = hits.size() > max ? hits.size() - max : 0;
  out->reserve(out->size() + hits.size() - first);
  for (size_t i = first; i < hits.size(); ++i) {
    InjectStepSample s;
    s.start_realtime_ns = hits[i].sample->start_wall_ns;
    s.end_realtime_ns = hits[i].sample->end_wall_ns;
    s.step_num = hits[i].sample->step_num;
    s.pid = hits[i].pid;
    s.source = *hits[i].source;
    out->push_back(std::move(s));
  }
}

bool InjectServer::WaitForStepSamplesForTesting(uint64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return step_samples_accepted_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

bool InjectServer::WaitForConnectionsAtMostForTesting(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto few = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return connections_.size() <= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&few), timeout);
}

bool InjectServer::WaitForProcessesForTesting(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_t registered = 0;
    for (const auto& [id, c] : connections_) registered += c->registered ? 1 : 0;
    return registered >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

size_t InjectServer::connections_for_testing() const {
  absl::MutexLock lock(&mu_);
  return connections_.size();
}

}  // namespace profctl::agent::cupti
