#include "agent/trace_store.h"

#include <memory>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"
#include "tests/status_matchers.h"

using ::profctl::testkit::IsOk;

namespace profctl::agent {
namespace {

using ::profctl::testkit::FakeClock;
using ::profctl::testkit::FakeExecutor;
using ::testing::HasSubstr;

constexpr char kKey[] = "0123456789abcdef0123";
constexpr char kOtherKey[] = "fedcba9876543210fedc";
const int kScope = 0;  // an endpoint's identity: any address

std::shared_ptr<const StoredTrace> Trace(const std::string& id, size_t bytes) {
  auto t = std::make_shared<StoredTrace>();
  t->session_id = id;
  t->data = std::make_shared<const std::string>(bytes, 'x');
  return t;
}

// What a Fetch answered, if it has.
struct Answer {
  std::optional<absl::StatusOr<std::shared_ptr<const StoredTrace>>> result;
  TraceStore::FetchCallback Callback() {
    return [this](absl::StatusOr<std::shared_ptr<const StoredTrace>> r) { result = std::move(r); };
  }
};

class TraceStoreTest : public ::testing::Test {
 protected:
  TraceStoreTest() { Make({}); }
  void Make(TraceStoreOptions options) {
    store_ = std::make_unique<TraceStore>(TraceStore::Dependencies{&clock_, nullptr}, options);
  }
  // Expects and completes one session of `bytes` bytes.
  std::shared_ptr<const StoredTrace> Record(const std::string& id, size_t bytes,
                                            const std::string& key = kKey) {
    TraceStore::Ticket t = store_->Expect(&kScope, id, key);
    auto trace = Trace(id, bytes);
    store_->Complete(t, trace);
    return trace;
  }
  Answer FetchNow(const std::string& id, const std::string& key = kKey,
                  const void* scope = &kScope) {
    Answer a;
    store_->Fetch(scope, id, key, a.Callback());
    return a;
  }

  FakeClock clock_;
  std::unique_ptr<TraceStore> store_;
};

TEST_F(TraceStoreTest, AFinishedTraceIsServedAsTheSameBufferNeverACopy) {
  const auto trace = Record("s1", 100);
  Answer a = FetchNow("s1");
  ASSERT_TRUE(a.result.has_value());
  ASSERT_TRUE(a.result->ok()) << a.result->status();
  EXPECT_EQ(**a.result, trace);
  EXPECT_EQ((**a.result)->data.get(), trace->data.get());
  EXPECT_EQ(store_->retained_bytes(), 100u);
  EXPECT_EQ(store_->held_bytes(), 100u);
}

TEST_F(TraceStoreTest, UnknownIdWrongKeyAndOtherScopeAreTheSameNotFound) {
  Record("s1", 10);
  const int other_scope = 0;
  const Answer unknown = FetchNow("nope");
  const Answer wrong_key = FetchNow("s1", kOtherKey);
  const Answer other = FetchNow("s1", kKey, &other_scope);
  for (const Answer* a : {&unknown, &wrong_key, &other}) {
    ASSERT_TRUE(a->result.has_value());
    EXPECT_EQ(a->result->status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(a->result->status().message(), unknown.result->status().message());
  }
  EXPECT_THAT(unknown.result->status().message(), ::testing::Not(HasSubstr("nope")));
}

TEST_F(TraceStoreTest, AFetchWhileRecordingWaitsForComplete) {
  TraceStore::Ticket t = store_->Expect(&kScope, "s1", kKey);
  Answer waiting = FetchNow("s1");
  Answer wrong = FetchNow("s1", kOtherKey);
  EXPECT_FALSE(waiting.result.has_value());
  ASSERT_TRUE(wrong.result.has_value());  // another key never waits
  EXPECT_EQ(wrong.result->status().code(), absl::StatusCode::kNotFound);
  const auto trace = Trace("s1", 7);
  store_->Complete(t, trace);
  ASSERT_TRUE(waiting.result.has_value());
  EXPECT_EQ(**waiting.result, trace);
}

TEST_F(TraceStoreTest, TracesExpireAfterRetainMs) {
  Make({.retain_ms = 1000});
  Record("s1", 10);
  clock_.Advance(999 * kNanosPerMilli);
  EXPECT_TRUE(FetchNow("s1").result->ok());
  clock_.Advance(1 * kNanosPerMilli);
  EXPECT_EQ(FetchNow("s1").result->status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->retained_bytes(), 0u);
  EXPECT_EQ(store_->held_bytes(), 0u);
}

TEST_F(TraceStoreTest, WithAnExecutorExpiryFreesMemoryWithoutAnyCall) {
  FakeExecutor executor(&clock_);
  store_ = std::make_unique<TraceStore>(TraceStore::Dependencies{&clock_, &executor},
                                        TraceStoreOptions{.retain_ms = 1000});
  Record("s1", 10);
  executor.Advance(999 * kNanosPerMilli);
  EXPECT_EQ(store_->retained_count(), 1u);
  executor.Advance(1 * kNanosPerMilli);
  EXPECT_EQ(store_->retained_count(), 0u);
  EXPECT_EQ(store_->held_bytes(), 0u);
  // A timer that outlives its store does nothing.
  Record("s2", 10);
  store_.reset();
  executor.Advance(2000 * kNanosPerMilli);
}

TEST_F(TraceStoreTest, OldestAreEvictedFirstOverRetainBytes) {
  Make({.retain_bytes = 250});
  Record("s1", 100);
  Record("s2", 100);
  Record("s3", 100);  // 300 > 250: s1 goes
  EXPECT_EQ(FetchNow("s1").result->status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(FetchNow("s2").result->ok());
  EXPECT_TRUE(FetchNow("s3").result->ok());
  EXPECT_EQ(store_->retained_bytes(), 200u);
  Record("big", 300);  // bigger than the whole budget: not kept, and evicts everything older
  EXPECT_EQ(store_->retained_count(), 0u);
}

TEST_F(TraceStoreTest, RetainZeroKeepsNothingButStillAnswersWaiters) {
  Make({.retain_ms = 0});
  TraceStore::Ticket t = store_->Expect(&kScope, "s1", kKey);
  Answer waiting = FetchNow("s1");
  store_->Complete(t, Trace("s1", 10));
  ASSERT_TRUE(waiting.result.has_value());
  EXPECT_TRUE(waiting.result->ok());
  EXPECT_EQ(FetchNow("s1").result->status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->held_bytes(), 0u);
}

TEST_F(TraceStoreTest, ABufferRetainedAndStreamedCountsOnce) {
  const auto trace = Record("s1", 100);
  {
    TraceStore::Hold a = store_->HoldBuffer(trace->data);
    TraceStore::Hold b = store_->HoldBuffer(trace->data);
    EXPECT_EQ(store_->held_bytes(), 100u);
    TraceStore::Hold unrelated = store_->HoldBuffer(std::make_shared<const std::string>(50, 'y'));
    EXPECT_EQ(store_->held_bytes(), 150u);
  }
  EXPECT_EQ(store_->held_bytes(), 100u);
}

TEST_F(TraceStoreTest, OverTheHeldCapRetainedGoFirstThenCapturesAreRefused) {
  Make({.max_held_bytes = 150});
  Record("kept", 100);
  ASSERT_THAT(store_->CheckCapacity(), IsOk());
  // A stream nobody reads holds 120 bytes: with the retained 100, over the cap.
  TraceStore::Hold unread = store_->HoldBuffer(std::make_shared<const std::string>(120, 'y'));
  EXPECT_THAT(store_->CheckCapacity(), IsOk());  // by evicting the retained trace
  EXPECT_EQ(store_->retained_count(), 0u);
  TraceStore::Hold another = store_->HoldBuffer(std::make_shared<const std::string>(40, 'z'));
  const absl::Status refused = store_->CheckCapacity();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("--max-held-mb"));
  EXPECT_THAT(refused.message(), HasSubstr("160 bytes"));
  another = TraceStore::Hold();  // the stream drained
  EXPECT_THAT(store_->CheckCapacity(), IsOk());
}

TEST_F(TraceStoreTest, ANewSessionWithTheSameIdAndKeyReplacesTheOldTrace) {
  Record("s1", 10);
  const auto second = Record("s1", 20);
  EXPECT_EQ(**FetchNow("s1").result, second);
  EXPECT_EQ(store_->retained_bytes(), 20u);
  // Another key's session with that id does not touch it.
  Record("s1", 30, kOtherKey);
  EXPECT_EQ(**FetchNow("s1").result, second);
}

TEST_F(TraceStoreTest, HoldsMayOutliveTheStore) {
  TraceStore::Hold hold = store_->HoldBuffer(std::make_shared<const std::string>(5, 'x'));
  store_.reset();
  hold = TraceStore::Hold();  // no crash, no leak (ASan)
}

}  // namespace
}  // namespace profctl::agent
