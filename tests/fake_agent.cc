#include "tests/fake_agent.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace profctl::testing {
namespace {

agent::SyntheticJobConfig WithSkew(agent::SyntheticJobConfig job, int64_t skew) {
  job.clock_skew_ns = skew;
  return job;
}

class UnreachableClient final : public coordinator::AgentClient {
 public:
  explicit UnreachableClient(std::string address) : address_(std::move(address)) {}
  absl::StatusOr<coordinator::AgentInfo> GetInfo(int64_t) override { return Error(); }
  absl::StatusOr<coordinator::ClockReading> SyncClock(int64_t) override { return Error(); }
  absl::StatusOr<coordinator::CaptureReply> Capture(const coordinator::CaptureArgs&,
                                                    int64_t) override {
    return Error();
  }
  absl::Status Cancel(const std::string&, int64_t) override { return Error(); }

 private:
  absl::Status Error() const {
    return absl::UnavailableError(absl::StrCat("failed to connect to ", address_));
  }
  std::string address_;
};

}  // namespace

class FakeAgent::Client final : public coordinator::AgentClient {
 public:
  explicit Client(FakeAgent* agent) : agent_(agent) {}

  absl::StatusOr<coordinator::AgentInfo> GetInfo(int64_t) override {
    if (!agent_->behavior_.get_info_error.ok()) return agent_->behavior_.get_info_error;
    return coordinator::AgentInfo{agent_->behavior_.name, "fakehost", "test",
                                  {"synthetic"},          60'000,     agent_->manager_.busy()};
  }

  absl::StatusOr<coordinator::ClockReading> SyncClock(int64_t) override {
    if (!agent_->behavior_.sync_error.ok()) return agent_->behavior_.sync_error;
    StopSignal never;
    auto delay = [&] {
      agent_->clock_->WaitUntil(agent_->clock_->MonoNs() + agent_->behavior_.one_way_delay_ns,
                                never);
    };
    delay();
    const int64_t t = agent_->agent_clock_.WallNs();
    delay();
    return coordinator::ClockReading{t, t};
  }

  absl::StatusOr<coordinator::CaptureReply> Capture(const coordinator::CaptureArgs& args,
                                                    int64_t) override {
    ++agent_->captures_;
    if (!agent_->behavior_.capture_error.ok()) return agent_->behavior_.capture_error;
    // The request is checked, and the capture slot held while "recording", by the real
    // CaptureManager; the window itself is simulated as recorded exactly from start_at, so
    // results do not depend on threads racing on a shared fake clock
    // (CaptureManager::Session::Run has its own tests).
    absl::StatusOr<std::unique_ptr<agent::CaptureManager::Session>> session =
        agent_->manager_.Begin({args.session_id, args.start_at_ns, args.duration_ms, {}});
    if (!session.ok()) return session.status();
    int64_t recorded_ns = args.duration_ms * kNanosPerMilli;
    bool cancelled = false;
    if (agent_->behavior_.capture_wait_ns > 0) {
      const int64_t t0 = agent_->clock_->MonoNs();
      cancelled =
          !agent_->clock_->WaitUntil(t0 + agent_->behavior_.capture_wait_ns, agent_->cancel_);
      if (cancelled) recorded_ns = std::min(recorded_ns, agent_->clock_->MonoNs() - t0);
    }
    coordinator::CaptureReply reply;
    reply.start_ns = args.start_at_ns;
    reply.stop_ns = args.start_at_ns + recorded_ns;
    reply.cancelled = cancelled;
    reply.name = agent_->behavior_.name;
    tensorflow::profiler::XSpace space;
    space.add_hostnames(agent_->behavior_.name);
    agent::SyntheticCollector& c = agent_->collector_;
    if (!c.Prepare({}).ok() || !c.Start(reply.start_ns).ok() || !c.Stop(reply.stop_ns).ok() ||
        !c.Collect(&space).ok()) {
      return absl::InternalError("fake agent: synthetic collector failed");
    }
    reply.xspace_bytes = agent_->behavior_.corrupt_trace ? std::string("\xff\xff\xff garbage", 11)
                                                         : space.SerializeAsString();
    return reply;
  }

  absl::Status Cancel(const std::string& session_id, int64_t) override {
    absl::Status s = agent_->manager_.Cancel(session_id);
    if (s.ok()) agent_->cancel_.Stop();
    return s;
  }

 private:
  FakeAgent* agent_;
};

FakeAgent::FakeAgent(FakeClock* clock, FakeAgentBehavior behavior, agent::SyntheticJobConfig job)
    : clock_(clock),
      behavior_(std::move(behavior)),
      agent_clock_(clock, behavior_.clock_offset_ns),
      collector_(WithSkew(job, behavior_.clock_offset_ns)),
      manager_({&agent_clock_, {&collector_}},
               {.host_name = behavior_.name.empty() ? "fakehost" : behavior_.name}) {}

std::unique_ptr<coordinator::AgentClient> FakeAgent::NewClient() {
  return std::make_unique<Client>(this);
}

std::unique_ptr<coordinator::AgentClient> FakeAgentFactory::Connect(
    const coordinator::WorkerAddress& worker) {
  ++connects_;
  auto it = agents_.find(worker.address);
  if (it == agents_.end()) return std::make_unique<UnreachableClient>(worker.address);
  return it->second->NewClient();
}

}  // namespace profctl::testing
