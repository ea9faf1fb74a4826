#include "inject/cupti_detach.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace profctl::inject {
namespace {

// A model of libcupti's side: whether it is attached and whether the detach subscription exists,
// with every hook checking that it is called in a state where CUPTI allows it.
struct FakeCupti {
  std::atomic<bool> attached{true};
  std::atomic<bool> subscribed{false};
  std::atomic<int> subscribes{0};
  std::atomic<int> unsubscribes{0};
  std::atomic<int> finalizes{0};
  std::atomic<int> attaches{0};
  std::atomic<int> misuse{0};  // a hook called where it must not be
  bool refuse_subscribe = false;
  bool refuse_attach = false;
  CuptiDetach::Finalized finalize_answer = CuptiDetach::Finalized::kDetached;

  CuptiDetach::Hooks Hooks() {
    return {
        .subscribe =
            [this] {
              if (!attached || subscribed) ++misuse;
              if (refuse_subscribe) return false;
              subscribed = true;
              ++subscribes;
              return true;
            },
        .unsubscribe =
            [this] {
              if (!subscribed) ++misuse;
              subscribed = false;
              ++unsubscribes;
            },
        .finalize =
            [this] {
              if (!attached || !subscribed) ++misuse;
              if (finalize_answer != CuptiDetach::Finalized::kDetached) return finalize_answer;
              attached = false;
              subscribed = false;
              ++finalizes;
              return CuptiDetach::Finalized::kDetached;
            },
        .attach =
            [this] {
              if (attached) ++misuse;
              if (refuse_attach) return false;
              attached = true;
              ++attaches;
              return true;
            },
    };
  }
};

TEST(CuptiDetachTest, AnApiExitAfterTheWindowDetachesOnce) {
  FakeCupti cupti;
  CuptiDetach detach(cupti.Hooks());
  detach.OnApiExit();  // nothing asked: an API call is just an API call
  EXPECT_EQ(cupti.finalizes, 0);

  ASSERT_TRUE(detach.Request());
  EXPECT_TRUE(detach.pending());
  EXPECT_EQ(cupti.subscribes, 1);
  EXPECT_TRUE(detach.Request());  // asked twice: one subscription
  EXPECT_EQ(cupti.subscribes, 1);

  detach.OnApiExit();
  detach.OnApiExit();
  EXPECT_EQ(cupti.finalizes, 1);
  EXPECT_FALSE(detach.attached());
  EXPECT_FALSE(detach.pending());
  EXPECT_EQ(detach.detaches(), 1u);
  EXPECT_TRUE(detach.Request());  // detached: nothing to ask
  EXPECT_EQ(cupti.subscribes, 1);
  EXPECT_EQ(cupti.misuse, 0);
}

TEST(CuptiDetachTest, DetachedNothingTouchesCuptiUntilTheNextWindowAttaches) {
  FakeCupti cupti;
  CuptiDetach detach(cupti.Hooks());
  ASSERT_TRUE(detach.Request());
  detach.OnApiExit();
  int polls = 0;
  EXPECT_FALSE(detach.WhileAttached([&] { ++polls; }));
  EXPECT_EQ(polls, 0);

  ASSERT_TRUE(detach.EnsureAttached());
  EXPECT_EQ(cupti.attaches, 1);
  EXPECT_EQ(detach.attaches(), 1u);
  EXPECT_TRUE(detach.WhileAttached([&] { ++polls; }));
  EXPECT_EQ(polls, 1);
  ASSERT_TRUE(detach.EnsureAttached());  // attached already: nothing to do
  EXPECT_EQ(cupti.attaches, 1);
  EXPECT_EQ(cupti.misuse, 0);
}

TEST(CuptiDetachTest, AWindowBeforeAnyApiCallCancelsTheDetach) {
  FakeCupti cupti;
  CuptiDetach detach(cupti.Hooks());
  ASSERT_TRUE(detach.Request());
  ASSERT_TRUE(detach.EnsureAttached());
  EXPECT_EQ(cupti.unsubscribes, 1);
  EXPECT_FALSE(cupti.subscribed);
  EXPECT_FALSE(detach.pending());
  detach.OnApiExit();  // the cancelled detach does not happen late
  EXPECT_EQ(cupti.finalizes, 0);
  EXPECT_TRUE(detach.attached());
  EXPECT_EQ(cupti.attaches, 0);
  EXPECT_EQ(cupti.misuse, 0);
}

TEST(CuptiDetachTest, RefusalsLeaveCuptiAttachedOrReportTheFailure) {
  FakeCupti cupti;
  cupti.refuse_subscribe = true;
  CuptiDetach detach(cupti.Hooks());
  EXPECT_FALSE(detach.Request());
  EXPECT_FALSE(detach.pending());
  detach.OnApiExit();
  EXPECT_TRUE(detach.attached());

  cupti.refuse_subscribe = false;
  ASSERT_TRUE(detach.Request());
  detach.OnApiExit();
  cupti.refuse_attach = true;
  EXPECT_FALSE(detach.EnsureAttached());
  EXPECT_FALSE(detach.attached());
  cupti.refuse_attach = false;
  EXPECT_TRUE(detach.EnsureAttached());
  EXPECT_EQ(cupti.misuse, 0);
}

TEST(CuptiDetachTest, ABusyHookPutsTheDetachOffAndARefusalKeepsCuptiAttached) {
  FakeCupti cupti;
  CuptiDetach detach(cupti.Hooks());
  ASSERT_TRUE(detach.Request());
  cupti.finalize_answer = CuptiDetach::Finalized::kBusy;  // an NVTX hook inside libcupti
  detach.OnApiExit();
  EXPECT_TRUE(detach.attached());
  EXPECT_TRUE(detach.pending());  // the next API exit tries again
  cupti.finalize_answer = CuptiDetach::Finalized::kDetached;
  detach.OnApiExit();
  EXPECT_FALSE(detach.attached());
  EXPECT_EQ(cupti.finalizes, 1);

  ASSERT_TRUE(detach.EnsureAttached());
  ASSERT_TRUE(detach.Request());
  cupti.finalize_answer = CuptiDetach::Finalized::kFailed;
  detach.OnApiExit();
  detach.OnApiExit();
  EXPECT_TRUE(detach.attached());
  EXPECT_FALSE(detach.pending());  // not tried again: CUPTI said no
  EXPECT_EQ(detach.refusals(), 1u);
  EXPECT_TRUE(cupti.subscribed);
  ASSERT_TRUE(detach.EnsureAttached());  // the next window drops the subscription
  EXPECT_FALSE(cupti.subscribed);
  EXPECT_EQ(cupti.attaches, 1);
  EXPECT_EQ(cupti.misuse, 0);
}

// An API exit never waits for the client: with the client inside WhileAttached (a poll), an exit
// on another thread returns at once and leaves the detach to a later one.
TEST(CuptiDetachTest, AnApiExitNeverWaitsForTheClient) {
  FakeCupti cupti;
  CuptiDetach detach(cupti.Hooks());
  ASSERT_TRUE(detach.Request());
  EXPECT_TRUE(detach.WhileAttached([&] {
    std::thread api([&] { detach.OnApiExit(); });
    api.join();  // a blocking OnApiExit would never return here
  }));
  EXPECT_EQ(cupti.finalizes, 0);
  EXPECT_TRUE(detach.pending());
  detach.OnApiExit();
  EXPECT_EQ(cupti.finalizes, 1);
}

// API calls on many threads while the client runs windows: every detach is one finalize, made
// while subscribed and attached; every attach happens detached; nothing polls CUPTI detached.
TEST(CuptiDetachTest, ApiThreadsAndWindowsInterleaveSafely) {
  FakeCupti cupti;
  CuptiDetach detach(cupti.Hooks());
  std::atomic<bool> stop{false};
  std::vector<std::thread> api_threads;
  for (int t = 0; t < 4; ++t) {
    api_threads.emplace_back([&] {
      while (!stop.load()) detach.OnApiExit();
    });
  }
  constexpr int kWindows = 300;
  int detached_windows = 0;
  for (int w = 0; w < kWindows; ++w) {
    ASSERT_TRUE(detach.EnsureAttached());
    EXPECT_TRUE(detach.WhileAttached([&] {
      if (!cupti.attached) ++cupti.misuse;  // a poll of a detached CUPTI
    }));
    ASSERT_TRUE(detach.Request());
    // Every other window waits for its detach (the API threads make it); the rest race the
    // next window's attach against it.
    if (w % 2 == 0) {
      while (detach.attached()) std::this_thread::yield();
      ++detached_windows;
    }
  }
  stop = true;
  for (std::thread& t : api_threads) t.join();
  EXPECT_EQ(cupti.misuse, 0);
  EXPECT_GE(cupti.finalizes, detached_windows);
  EXPECT_EQ(static_cast<uint64_t>(cupti.finalizes), detach.detaches());
  EXPECT_EQ(static_cast<uint64_t>(cupti.attaches), detach.attaches());
  EXPECT_EQ(cupti.subscribes, cupti.finalizes + cupti.unsubscribes + (cupti.subscribed ? 1 : 0));
}

}  // namespace
}  // namespace profctl::inject
