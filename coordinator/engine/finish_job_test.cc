#include "coordinator/engine/finish_job.h"

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/engine/manifest_snapshots.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"
#include "tests/memory_sink.h"
#include "tests/status_matchers.h"

namespace profctl::coordinator {
namespace {

using ::profctl::testkit::FakeClock;
using ::profctl::testkit::FakeExecutor;
using ::profctl::testkit::MemorySink;
using ::profctl::v1::HostResult;
using ::profctl::v1::SessionManifest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Runs nothing until told: each job waits in order.
class ManualPool final : public WorkPool {
 public:
  void Submit(Executor::Task job) override { jobs.push_back(std::move(job)); }
  void RunAll() {
    while (!jobs.empty()) {
      Executor::Task job = std::move(jobs.front());
      jobs.pop_front();
      std::move(job)();
    }
  }
  std::deque<Executor::Task> jobs;
};

std::unique_ptr<SessionManifest> Snapshot(const std::string& session) {
  auto m = std::make_unique<SessionManifest>();
  m->mutable_request()->set_session(session);
  return m;
}

std::string SessionOf(const std::string& json) {
  SessionManifest m;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &m).ok()) << json;
  return m.request().session();
}

TEST(ManifestSnapshotsTest, ANewerSnapshotReplacesTheOneWaitingAndNoneIsWrittenOnceClosed) {
  MemorySink sink;
  ManualPool pool;
  std::vector<std::string> written;
  sink.on_write = [&](const std::string& name) { EXPECT_EQ(name, kManifestFileName); };
  auto snapshots = std::make_shared<ManifestSnapshots>(&sink, &pool, nullptr);
  snapshots->Write(Snapshot("a"));  // in flight
  snapshots->Write(Snapshot("b"));  // waits
  snapshots->Write(Snapshot("c"));  // replaces b
  ASSERT_EQ(pool.jobs.size(), 1u);  // one at a time: c goes after a, in the same job
  Executor::Task job = std::move(pool.jobs.front());
  pool.jobs.pop_front();
  sink.on_write = [&](const std::string&) {
    written.push_back(sink.files.count(kManifestFileName) != 0
                          ? SessionOf(sink.files[kManifestFileName])
                          : std::string("-"));
  };
  std::move(job)();
  EXPECT_THAT(written, ElementsAre("-", "a"));  // what was there as each write began
  EXPECT_EQ(SessionOf(sink.files[kManifestFileName]), "c");
  snapshots->Close();  // nothing in flight: returns at once
  snapshots->Write(Snapshot("d"));
  EXPECT_TRUE(pool.jobs.empty());
  EXPECT_EQ(SessionOf(sink.files[kManifestFileName]), "c");
}

TEST(ManifestSnapshotsTest, AFailedWriteIsReportedOnceAndTheNextStillWrites) {
  MemorySink sink;
  sink.fail_name = kManifestFileName;
  std::vector<std::string> failures;
  ManifestSnapshots snapshots(&sink, /*pool=*/nullptr, [&](const absl::Status& s) {
    failures.push_back(std::string(s.message()));
  });
  snapshots.Write(Snapshot("a"));
  snapshots.Write(Snapshot("b"));
  EXPECT_THAT(failures, ElementsAre("disk full"));
  sink.fail_name.clear();
  snapshots.Write(Snapshot("c"));
  EXPECT_EQ(SessionOf(sink.files[kManifestFileName]), "c");
}

class FinishJobTest : public ::testing::Test {
 protected:
  FinishInput Input() {
    FinishInput in;
    in.session = "sess";
    in.sink = &sink_;
    in.executor = &ex_;
    in.manifest.set_status(profctl::v1::SESSION_STATUS_PARTIAL);
    for (const char* host : {"w0", "w1"}) {
      HostResult& r = in.results.emplace_back();
      r.set_host(host);
      r.set_address(std::string(host) + ":1");
      in.outputs.emplace_back();
    }
    in.results[0].set_status(profctl::v1::HOST_STATUS_FAILED);
    in.results[1].set_status(profctl::v1::HOST_STATUS_OK);
    in.results[1].set_xplane_file("w1.xplane.pb");
    in.done = [this](absl::StatusOr<SessionManifest> m) {
      events_.push_back("done");
      done_ = std::move(m);
    };
    in.on_manifest_written = [this](std::string json) {
      events_.push_back("written");
      written_ = std::move(json);
    };
    return in;
  }

  FakeClock clock_;
  FakeExecutor ex_{&clock_};
  MemorySink sink_;
  std::vector<std::string> events_;
  std::optional<absl::StatusOr<SessionManifest>> done_;
  std::string written_;
};

TEST_F(FinishJobTest, WritesTheManifestWithEveryHostInOrderThenReportsOnTheExecutor) {
  FinishInput in = Input();
  auto lifetime = std::make_shared<int>(0);
  std::weak_ptr<int> held = lifetime;
  in.lifetime = std::move(lifetime);
  FinishJob(std::move(in)).Run();
  // Its lifetime ends with the job, before the executor hears of it.
  EXPECT_TRUE(held.expired());
  EXPECT_TRUE(events_.empty());
  ex_.RunUntilIdle();
  EXPECT_THAT(events_, ElementsAre("written", "done"));
  ASSERT_TRUE(done_.has_value());
  ASSERT_THAT(*done_, testkit::IsOk());
  const SessionManifest& m = **done_;
  ASSERT_EQ(m.hosts_size(), 2);
  EXPECT_EQ(m.hosts(0).host(), "w0");
  EXPECT_EQ(m.hosts(1).host(), "w1");
  EXPECT_TRUE(m.errors().empty());
  EXPECT_EQ(sink_.files.at(kManifestFileName), written_);
  EXPECT_EQ(sink_.syncs, 1);  // the saved traces made durable before session.json
}

// An interrupt writes no pod output not yet written: the breakdown's files of the host with a
// summary are named as left out, with the command that builds them; the hosts' statuses stand.
TEST_F(FinishJobTest, AnInterruptAfterTheHandOffIsNamedAndTheHostsStand) {
  FinishInput in = Input();
  in.outputs[1].summary.emplace().host = "w1";
  in.interrupted = [] { return true; };
  FinishJob(std::move(in)).Run();
  ex_.RunUntilIdle();
  ASSERT_TRUE(done_.has_value());
  ASSERT_THAT(*done_, testkit::IsOk());
  EXPECT_EQ((*done_)->hosts(1).status(), profctl::v1::HOST_STATUS_OK);
  EXPECT_THAT((*done_)->errors(),
              testing::Contains(HasSubstr(
                  "interrupted: not written: pod_step_breakdown.json, pod_step_breakdown.csv, "
                  "report.html; every saved host's trace is kept; build them with: profctl "
                  "analyze")));
  EXPECT_EQ((*done_)->breakdown_files_size(), 0);
  EXPECT_FALSE(sink_.files.count("report.html"));
}

TEST_F(FinishJobTest, ADryRunWritesNothing) {
  FinishInput in = Input();
  in.prepare_only = true;
  FinishJob(std::move(in)).Run();
  ex_.RunUntilIdle();
  EXPECT_THAT(events_, ElementsAre("done"));
  EXPECT_TRUE(sink_.files.empty());
  EXPECT_EQ(sink_.syncs, 0);
}

}  // namespace
}  // namespace profctl::coordinator
