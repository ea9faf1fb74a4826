#include "tests/fake_agent.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace profctl::testkit {
namespace {

using coordinator::AgentClient;

synthetic::SyntheticJobConfig WithSkew(synthetic::SyntheticJobConfig job, int64_t skew) {
  job.clock_skew_ns = skew;
  return job;
}

class UnreachableClient final : public AgentClient {
 public:
  UnreachableClient(FakeExecutor* ex, std::string address)
      : ex_(ex), address_(std::move(address)) {}
  void GetInfo(const coordinator::Reservation&, int64_t,
               Callback<coordinator::AgentInfo> done) override {
    ex_->Post([done = std::move(done), e = Error()]() mutable { std::move(done)(e); });
  }
  void SyncClock(int64_t, Callback<coordinator::ClockReading> done) override {
    ex_->Post([done = std::move(done), e = Error()]() mutable { std::move(done)(e); });
  }
  void Capture(const coordinator::CaptureArgs&, int64_t,
               coordinator::CaptureStream* stream) override {
    ex_->Post([stream, e = Error()] { stream->OnDone(e); });
  }
  void Cancel(const std::string&, const std::string&, int64_t, DoneCallback done) override {
    ex_->Post([done = std::move(done), e = Error()]() mutable { std::move(done)(e); });
  }
  void GetStepSignal(const coordinator::StepSignalQuery&, int64_t,
                     Callback<profctl::v1::GetStepSignalResponse> done) override {
    ex_->Post([done = std::move(done), e = Error()]() mutable { std::move(done)(e); });
  }
  void AbortCapture() override {}

 private:
  absl::Status Error() const {
    return absl::UnavailableError(absl::StrCat("failed to connect to ", address_));
  }
  FakeExecutor* ex_;
  std::string address_;
};

}  // namespace

// One capture the agent is running: recording until stop_mono (or a Cancel), then answering.
struct FakeAgent::Recording {
  std::string session_id;
  std::unique_ptr<agent::CaptureManager::Session> slot;
  coordinator::CaptureStream* stream = nullptr;
  int64_t start_ns = 0;  // agent clock
  int64_t stop_ns = 0;
  int64_t deadline_mono = 0;  // the caller's deadline
  bool cancelled = false;
  bool finished = false;  // OnDone delivered or scheduled
  uint64_t generation = 0;
  // The Capture stream broke (break_stream_after_start_ns): recording goes on, nobody is told.
  bool detached = false;
  // Fetches waiting for this recording to finish.
  std::vector<coordinator::CaptureStream*> fetchers;
};

class FakeAgent::Client final : public AgentClient {
 public:
  explicit Client(FakeAgent* agent) : a_(agent) { ++a_->live_clients_; }
  ~Client() override { --a_->live_clients_; }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void GetInfo(const coordinator::Reservation& reserve, int64_t timeout_ms,
               Callback<coordinator::AgentInfo> done) override {
    Spend();
    FakeAgentBehavior& b = a_->behavior_;
    if (!reserve.session_id.empty() && !b.hang_get_info && b.get_info_error.ok() &&
        b.get_info_failures.empty()) {
      // Reserved when the request arrives, as the agent does.
      FakeAgent* a = a_;
      const auto extra = b.reserve_delay_ns.find(reserve.session_id);
      const int64_t up = b.up_delay_ns + (extra != b.reserve_delay_ns.end() ? extra->second : 0);
      a->ex_->PostAt(a->clock_->MonoNs() + up, [a, reserve, timeout_ms,
                                                done = std::move(done)]() mutable {
        const absl::Status reserved = a->manager_.Reserve(reserve.session_id, reserve.session_key,
                                                          reserve.ttl_ms, reserve.priority);
        ++a->reservations_;
        const FakeAgentBehavior& bb = a->behavior_;
        absl::StatusOr<coordinator::AgentInfo> info =
            reserved.ok()
                ? absl::StatusOr<coordinator::AgentInfo>(coordinator::AgentInfo{bb.name,
                                                                                "fakehost",
                                                                                "test",
                                                                                {"synthetic"},
                                                                                bb.max_duration_ms,
                                                                                a->manager_.busy(),
                                                                                bb.instance_id})
                : absl::StatusOr<coordinator::AgentInfo>(reserved);
        a->ex_->PostAt(a->clock_->MonoNs() + bb.down_delay_ns + bb.get_info_delay_ns,
                       [done = std::move(done), info = std::move(info)]() mutable {
                         std::move(done)(std::move(info));
                       });
        (void)timeout_ms;
      });
      return;
    }
    if (!b.get_info_failures.empty()) {
      absl::Status down = b.get_info_failures.front();
      b.get_info_failures.pop_front();
      Answer(timeout_ms, false, std::move(done), absl::StatusOr<coordinator::AgentInfo>(down));
      return;
    }
    absl::StatusOr<coordinator::AgentInfo> info =
        b.get_info_error.ok()
            ? absl::StatusOr<coordinator::AgentInfo>(coordinator::AgentInfo{b.name,
                                                                            "fakehost",
                                                                            "test",
                                                                            {"synthetic"},
                                                                            b.max_duration_ms,
                                                                            a_->manager_.busy(),
                                                                            b.instance_id})
            : b.get_info_error;
    Answer(timeout_ms, b.hang_get_info, std::move(done), std::move(info), b.get_info_delay_ns);
  }

  void SyncClock(int64_t timeout_ms, Callback<coordinator::ClockReading> done) override {
    Spend();
    ++a_->syncs_;
    const FakeAgentBehavior& b = a_->behavior_;
    const int64_t local_send = a_->clock_->WallNs();
    // The agent stamps when the request arrives, i.e. up_delay from now.
    const int64_t t = local_send + b.up_delay_ns + b.clock_offset_ns;
    FakeClock* clock = a_->clock_;
    auto stamp = [done = std::move(done), clock, local_send,
                  t](absl::StatusOr<coordinator::ClockReading> r) mutable {
      if (r.ok()) *r = {t, t, local_send, clock->WallNs()};
      std::move(done)(std::move(r));
    };
    absl::StatusOr<coordinator::ClockReading> r =
        b.sync_error.ok() ? absl::StatusOr<coordinator::ClockReading>(coordinator::ClockReading{})
                          : b.sync_error;
    Answer(timeout_ms, b.hang_sync, std::move(stamp), std::move(r),
           static_cast<int64_t>(a_->syncs_) * b.sync_delay_growth_ns);
  }

  void GetStepSignal(const coordinator::StepSignalQuery& query, int64_t timeout_ms,
                     Callback<profctl::v1::GetStepSignalResponse> done) override {
    Spend();
    const FakeAgentBehavior& b = a_->behavior_;
    ++a_->step_signal_calls_;
    // What the agent has when the request arrives (the real agent's window and cap).
    const int64_t now = a_->agent_clock_.WallNs() + b.up_delay_ns;
    profctl::v1::GetStepSignalResponse r;
    if (b.step_signal_override.has_value()) {
      r = *b.step_signal_override;
    } else if (query.summary_only && b.step_summaries) {
      r.set_now_ns(now);
      const std::vector<agent::StepSourceStatus> status = a_->hang_.Poll(a_->manager_, now);
      for (const agent::StepSourceStatus& st : status) r.add_sources(st.source);
      agent::AddStepSummaries(status, &r);
    } else {
      r.set_now_ns(now);
      std::vector<std::string> sources;
      const int64_t since = std::max(query.since_ns, now - int64_t{600} * kNanosPerSecond);
      const size_t max = query.max_samples == 0 ? 1024 : std::min<size_t>(query.max_samples, 4096);
      agent::AddStepSamples(a_->manager_.RecentSteps(since, now, max, &sources), &r);
      for (const std::string& src : sources) r.add_sources(src);
    }
    absl::StatusOr<profctl::v1::GetStepSignalResponse> value =
        b.step_signal_error.ok() ? absl::StatusOr<profctl::v1::GetStepSignalResponse>(std::move(r))
                                 : b.step_signal_error;
    Answer(timeout_ms, b.hang_step_signal, std::move(done), std::move(value));
  }

  void Capture(const coordinator::CaptureArgs& args, int64_t timeout_ms,
               coordinator::CaptureStream* stream) override {
    Spend();
    FakeAgent* a = a_;
    const int64_t arrive = a->clock_->MonoNs() + a->behavior_.up_delay_ns;
    const int64_t deadline = a->clock_->MonoNs() + timeout_ms * kNanosPerMilli;
    ++a->captures_;
    a->ex_->PostAt(arrive,
                   [a, args, stream, deadline] { a->OnCaptureArrived(args, stream, deadline); });
  }

  void Cancel(const std::string& session_id, const std::string& session_key, int64_t timeout_ms,
              DoneCallback done) override {
    Spend();
    FakeAgent* a = a_;
    const int64_t arrive = a->clock_->MonoNs() + a->behavior_.up_delay_ns;
    a->ex_->PostAt(arrive, [a, session_id, session_key] {
      a->manager_.Cancel(session_id, session_key).IgnoreError();
      a->OnCancelArrived(session_id);
    });
    Answer(
        timeout_ms, false,
        [done = std::move(done)](const absl::StatusOr<bool>& r) mutable {
          std::move(done)(r.status());
        },
        absl::StatusOr<bool>(true));
  }

  void Fetch(const coordinator::FetchArgs& args, int64_t timeout_ms,
             coordinator::CaptureStream* stream) override {
    Spend();
    FakeAgent* a = a_;
    const int64_t arrive = a->clock_->MonoNs() + a->behavior_.up_delay_ns;
    const int64_t deadline = a->clock_->MonoNs() + timeout_ms * kNanosPerMilli;
    ++a->fetches_;
    a->ex_->PostAt(arrive,
                   [a, args, stream, deadline] { a->OnFetchArrived(args, stream, deadline); });
  }

  bool CanFetch() const override { return a_->behavior_.can_fetch; }

  bool Connected() const override {
    const FakeAgentBehavior& b = a_->behavior_;
    return connected_ && b.connects && !b.hang_get_info && a_->clock_->MonoNs() >= connected_at_;
  }

  void ProbeHandshake(int64_t timeout_ms, Callback<int64_t> done) override {
    const std::optional<int64_t> took = a_->behavior_.handshake_ns;
    ++a_->handshake_probes_;
    if (!took.has_value()) {
      std::move(done)(absl::UnimplementedError("handshake probe: not for this fake"));
      return;
    }
    const int64_t now = a_->clock_->MonoNs();
    if (*took > timeout_ms * kNanosPerMilli) {
      a_->ex_->PostAt(now + timeout_ms * kNanosPerMilli, [done = std::move(done)]() mutable {
        std::move(done)(absl::DeadlineExceededError("handshake probe: fake: no answer"));
      });
      return;
    }
    a_->ex_->PostAt(now + *took, [done = std::move(done), took]() mutable {
      std::move(done)(absl::StatusOr<int64_t>(*took));
    });
  }

  void AbortCapture() override {
    std::shared_ptr<Recording> rec = a_->recording_;
    if (rec == nullptr || rec->finished || rec->detached) return;
    rec->finished = true;
    FakeAgent* a = a_;
    a->ex_->Post([a, rec] {
      rec->stream->OnDone(absl::CancelledError("Capture: cancelled by the caller"));
      a->EndRecording(rec);
    });
  }

 private:
  // Delivers `value` after the round trip, or DEADLINE_EXCEEDED at the timeout if that comes
  // first (or the agent hangs).
  template <typename T, typename Done>
  void Answer(int64_t timeout_ms, bool hang, Done done, absl::StatusOr<T> value,
              int64_t extra_delay_ns = 0) {
    const FakeAgentBehavior& b = a_->behavior_;
    const int64_t now = a_->clock_->MonoNs();
    const int64_t reply_at = now + b.up_delay_ns + b.down_delay_ns + extra_delay_ns;
    const int64_t deadline = now + timeout_ms * kNanosPerMilli;
    if (hang || reply_at > deadline) {
      a_->ex_->PostAt(deadline, [done = std::move(done)]() mutable {
        std::move(done)(absl::StatusOr<T>(absl::DeadlineExceededError("fake: deadline exceeded")));
      });
      return;
    }
    a_->ex_->PostAt(reply_at, [done = std::move(done), value = std::move(value)]() mutable {
      std::move(done)(std::move(value));
    });
  }

  // The caller's cost of starting an RPC: time passes inside the call.
  void Spend() {
    const FakeAgentBehavior& b = a_->behavior_;
    const int64_t cost = connected_ ? b.send_cost_ns : b.first_send_cost_ns;
    if (!connected_) connected_at_ = a_->clock_->MonoNs() + b.up_delay_ns + b.down_delay_ns;
    connected_ = true;
    if (cost > 0) a_->clock_->Advance(cost);
  }

  FakeAgent* a_;
  bool connected_ = false;    // an RPC was started on this channel
  int64_t connected_at_ = 0;  // when the transport's connection is up (Connected)
};

FakeAgent::FakeAgent(FakeExecutor* executor, FakeClock* clock, FakeAgentBehavior behavior,
                     synthetic::SyntheticJobConfig job)
    : ex_(executor),
      clock_(clock),
      behavior_(std::move(behavior)),
      agent_clock_(clock, behavior_.clock_offset_ns),
      collector_(WithSkew(job, behavior_.clock_offset_ns)),
      manager_({&agent_clock_, {&collector_}},
               {.host_name = behavior_.name.empty() ? "fakehost" : behavior_.name}) {}

FakeAgent::~FakeAgent() = default;

std::unique_ptr<AgentClient> FakeAgent::NewClient() { return std::make_unique<Client>(this); }

void FakeAgent::OnCaptureArrived(const coordinator::CaptureArgs& args,
                                 coordinator::CaptureStream* stream, int64_t deadline_mono) {
  auto fail = [&](absl::Status s) {
    ex_->PostAt(clock_->MonoNs() + behavior_.down_delay_ns,
                [stream, s = std::move(s)] { stream->OnDone(s); });
  };
  if (clock_->MonoNs() < down_until_mono_) {
    return fail(absl::UnavailableError("Capture: fake: connection refused (restarting)"));
  }
  if (behavior_.hang_capture) {
    ex_->PostAt(deadline_mono, [stream] {
      stream->OnDone(absl::DeadlineExceededError("Capture: fake: deadline exceeded"));
    });
    return;
  }
  if (!behavior_.capture_error.ok()) return fail(behavior_.capture_error);
  if (!behavior_.capture_failures.empty()) {
    absl::Status refused = behavior_.capture_failures.front();
    behavior_.capture_failures.pop_front();
    return fail(refused);
  }
  if (cancelled_ids_.count(args.session_id) > 0) {
    return fail(absl::AbortedError(
        absl::StrCat("session '", args.session_id, "' was cancelled before it started")));
  }
  absl::StatusOr<std::unique_ptr<agent::CaptureManager::Session>> slot =
      manager_.Begin({args.session_id, args.start_at_ns, args.duration_ms, {}, args.session_key});
  if (!slot.ok()) return fail(slot.status());
  auto rec = std::make_shared<Recording>();
  rec->session_id = args.session_id;
  rec->slot = *std::move(slot);
  rec->stream = stream;
  rec->deadline_mono = deadline_mono;
  const int64_t now_agent = agent_clock_.WallNs();
  rec->start_ns = std::max(now_agent, args.start_at_ns) + behavior_.start_delay_ns;
  rec->stop_ns = rec->start_ns + args.duration_ms * kNanosPerMilli + behavior_.overrun_ns;
  recording_ = rec;
  const int64_t start_mono = clock_->MonoNs() + (rec->start_ns - now_agent);
  const int64_t stop_mono = clock_->MonoNs() + (rec->stop_ns - now_agent);
  if (behavior_.send_started) {
    ex_->PostAt(start_mono + behavior_.down_delay_ns, [rec, this] {
      last_start_ns_ = rec->start_ns;
      if (!rec->finished && !rec->detached) rec->stream->OnStarted(rec->start_ns);
    });
  } else {
    ex_->PostAt(start_mono, [rec, this] { last_start_ns_ = rec->start_ns; });
  }
  ex_->PostAt(stop_mono, [rec, this] { FinishRecording(rec); });
  if (behavior_.break_stream_after_start_ns > 0) {
    ex_->PostAt(start_mono + behavior_.break_stream_after_start_ns, [rec, this] {
      if (rec->finished || rec->detached) return;
      rec->detached = true;
      rec->stream->OnDone(absl::UnavailableError("Capture: fake: connection reset"));
      if (behavior_.restart_when_stream_breaks) {
        down_until_mono_ = clock_->MonoNs() + behavior_.down_after_restart_ns;
        rec->finished = true;
        EndRecording(rec);
      }
    });
    behavior_.break_stream_after_start_ns = 0;  // one-shot
  }
  if (behavior_.cancelled_by_other_after_ns > 0) {
    ex_->PostAt(start_mono + behavior_.cancelled_by_other_after_ns, [rec, this] {
      if (rec->finished || rec->generation != 0) return;
      rec->cancelled = true;
      rec->stop_ns = std::max(rec->start_ns, agent_clock_.WallNs());
      FinishRecording(rec);
    });
  }
  if (deadline_mono < stop_mono + behavior_.down_delay_ns) {
    ex_->PostAt(deadline_mono, [rec, this] {
      if (rec->finished || rec->detached) return;
      rec->finished = true;
      rec->stream->OnDone(absl::DeadlineExceededError("Capture: fake: deadline exceeded"));
      EndRecording(rec);
    });
  }
}

void FakeAgent::OnCancelArrived(const std::string& session_id) {
  ++cancels_;
  cancelled_ids_.insert(session_id);
  std::shared_ptr<Recording> rec = recording_;
  if (rec == nullptr || rec->session_id != session_id || rec->finished) return;
  rec->cancelled = true;
  rec->stop_ns = std::max(rec->start_ns, agent_clock_.WallNs());
  FinishRecording(rec);
}

void FakeAgent::FinishRecording(const std::shared_ptr<Recording>& rec) {
  if (rec->finished || rec->generation != 0) return;
  rec->generation = 1;  // the answer is on its way
  coordinator::CaptureHeaderInfo header;
  header.start_ns = rec->start_ns;
  header.stop_ns = rec->stop_ns;
  header.cancelled = rec->cancelled;
  header.name = behavior_.name;
  header.hostname = "fakehost";
  header.shortfalls = behavior_.shortfalls;
  tensorflow::profiler::XSpace space;
  space.add_hostnames(behavior_.name.empty() ? "fakehost" : behavior_.name);
  std::string bytes;
  if (!collector_.Prepare({}).ok() || !collector_.Start(rec->start_ns).ok() ||
      !collector_.Stop(rec->stop_ns).ok() || !collector_.Collect(&space).ok()) {
    bytes = "collector failed";
  } else {
    bytes = behavior_.corrupt_trace ? std::string("\xff\xff\xff garbage", 11)
                                    : space.SerializeAsString();
  }
  header.total_bytes = bytes.size();
  auto kept = std::make_shared<const std::string>(std::move(bytes));
  kept_[rec->session_id] = {header, kept};
  for (coordinator::CaptureStream* fetcher : rec->fetchers) Send(fetcher, header, kept);
  rec->fetchers.clear();
  if (rec->detached) {
    rec->finished = true;
    EndRecording(rec);
    return;
  }
  ex_->PostAt(clock_->MonoNs() + behavior_.down_delay_ns, [this, rec, header, kept] {
    if (rec->finished) return;
    if (behavior_.chunk_interval_ns > 0) {
      rec->stream->OnHeader(header);
      SendChunk(rec, kept, 0);
      return;
    }
    rec->finished = true;
    Deliver(rec->stream, header, *kept);
    EndRecording(rec);
  });
}

void FakeAgent::SendChunk(const std::shared_ptr<Recording>& rec,
                          const std::shared_ptr<const std::string>& bytes, size_t offset) {
  if (rec->finished) return;  // aborted by the caller meanwhile
  if (offset >= bytes->size()) {
    rec->finished = true;
    rec->stream->OnDone(absl::OkStatus());
    EndRecording(rec);
    return;
  }
  const size_t n = std::max<size_t>(1, behavior_.chunk_bytes);
  if (absl::Status s = rec->stream->OnData(std::string_view(*bytes).substr(offset, n)); !s.ok()) {
    rec->finished = true;
    rec->stream->OnDone(s);
    EndRecording(rec);
    return;
  }
  ex_->PostAt(clock_->MonoNs() + behavior_.chunk_interval_ns,
              [this, rec, bytes, next = offset + n] { SendChunk(rec, bytes, next); });
}

void FakeAgent::OnFetchArrived(const coordinator::FetchArgs& args,
                               coordinator::CaptureStream* stream, int64_t /*deadline_mono*/) {
  if (clock_->MonoNs() < down_until_mono_) {
    ex_->PostAt(clock_->MonoNs() + behavior_.down_delay_ns, [stream] {
      stream->OnDone(absl::UnavailableError("Fetch: fake: connection refused (restarting)"));
    });
    return;
  }
  if (auto it = kept_.find(args.session_id); it != kept_.end()) {
    Send(stream, it->second.header, it->second.bytes);
    return;
  }
  if (recording_ != nullptr && recording_->session_id == args.session_id) {
    recording_->fetchers.push_back(stream);  // served when it finishes
    return;
  }
  ex_->PostAt(clock_->MonoNs() + behavior_.down_delay_ns,
              [stream] { stream->OnDone(absl::NotFoundError("Fetch: fake: no such trace")); });
}

void FakeAgent::Send(coordinator::CaptureStream* stream,
                     const coordinator::CaptureHeaderInfo& header,
                     const std::shared_ptr<const std::string>& bytes) {
  ex_->PostAt(clock_->MonoNs() + behavior_.down_delay_ns,
              [this, stream, header, bytes] { Deliver(stream, header, *bytes); });
}

void FakeAgent::Deliver(coordinator::CaptureStream* stream,
                        const coordinator::CaptureHeaderInfo& header, const std::string& bytes) {
  stream->OnHeader(header);
  absl::Status s;
  constexpr size_t kChunk = 1 << 20;
  for (size_t off = 0; off < bytes.size() && s.ok(); off += kChunk) {
    s = stream->OnData(std::string_view(bytes).substr(off, kChunk));
  }
  if (s.ok()) s = behavior_.transit_error;
  if (s.ok() && !behavior_.transfer_failures.empty()) {
    s = behavior_.transfer_failures.front();
    behavior_.transfer_failures.pop_front();
  }
  stream->OnDone(s);
}

void FakeAgent::EndRecording(const std::shared_ptr<Recording>& rec) {
  rec->slot.reset();
  if (recording_ == rec) recording_.reset();
}

std::unique_ptr<AgentClient> FakeAgentFactory::Connect(const coordinator::WorkerAddress& worker) {
  ++connects_;
  auto it = agents_.find(worker.address);
  if (it == agents_.end()) return std::make_unique<UnreachableClient>(ex_, worker.address);
  return it->second->NewClient();
}

}  // namespace profctl::testkit
