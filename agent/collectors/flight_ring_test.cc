#include "agent/collectors/flight_ring.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace profctl::agent {
namespace {

using ::testing::ElementsAre;

constexpr int64_t kOverhead = FlightRing<int>::kRecordOverheadBytes;

TEST(FlightRingTest, WrapsAtTheByteCapEvictingWholeRecordsOldestFirst) {
  // Six records of 100 bytes (plus overhead) fit under the cap, a seventh does not.
  FlightRing<int> ring(/*keep_ns=*/1'000'000, /*max_bytes=*/6 * (100 + kOverhead) + 50);
  for (int i = 0; i < 20; ++i) {
    ring.Push(/*start_ns=*/i * 10, /*end_ns=*/i * 10 + 10, /*bytes=*/100, i);
    EXPECT_LE(ring.stats().bytes, ring.max_bytes());
  }
  const FlightRingStats s = ring.stats();
  EXPECT_EQ(s.records, 6);
  EXPECT_EQ(s.bytes, 6 * (100 + kOverhead));
  EXPECT_EQ(s.evicted, 14);
  EXPECT_EQ(s.oldest_start_ns, 140);
  EXPECT_EQ(s.newest_end_ns, 200);
  EXPECT_THAT(ring.Between(0, 1000), ElementsAre(14, 15, 16, 17, 18, 19));
  // Overlap, edges included.
  EXPECT_THAT(ring.Between(165, 180), ElementsAre(16, 17, 18));
  EXPECT_THAT(ring.Between(0, 139), ElementsAre());
}

TEST(FlightRingTest, KeepsOnlyRecordsThatEndedWithinItsAge) {
  FlightRing<int> ring(/*keep_ns=*/100, /*max_bytes=*/1 << 20);
  for (int i = 0; i < 50; ++i) ring.Push(i * 10, i * 10 + 10, 1, i);
  // The newest ends at 500: records that ended before 400 are gone.
  EXPECT_THAT(ring.Between(0, 1000), ElementsAre(39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49));
  EXPECT_EQ(ring.stats().evicted, 39);
}

TEST(FlightRingTest, ARecordOverTheCapAloneIsNotKept) {
  FlightRing<int> ring(/*keep_ns=*/1000, /*max_bytes=*/500);
  ring.Push(0, 10, 100, 1);
  ring.Push(10, 20, 1000, 2);
  EXPECT_THAT(ring.Between(0, 100), ElementsAre(1));
  EXPECT_EQ(ring.stats().evicted, 1);
}

TEST(FlightRingTest, ReadsWhilePushingSeeWholeConsecutiveRecords) {
  // Records are vectors whose elements all equal their index: a torn record would mix values.
  FlightRing<std::vector<int>> ring(/*keep_ns=*/1 << 30, /*max_bytes=*/64 * (40 + kOverhead));
  constexpr int kRecords = 20'000;
  std::thread writer([&] {
    for (int i = 0; i < kRecords; ++i) ring.Push(i, i + 1, 40, std::vector<int>(10, i));
  });
  int reads = 0;
  bool torn = false, over = false;  // no ASSERT while the writer runs: it must be joined
  while (ring.stats().newest_end_ns < kRecords) {
    const std::vector<std::vector<int>> got = ring.Between(0, kRecords);
    for (size_t r = 0; r < got.size(); ++r) {
      torn |= got[r].size() != 10u;
      for (int v : got[r]) torn |= v != got[r][0];
      if (r > 0) {
        torn |= got[r][0] != got[r - 1][0] + 1;
      }
    }
    over |= ring.stats().bytes > ring.max_bytes();
    ++reads;
  }
  writer.join();
  EXPECT_FALSE(torn);
  EXPECT_FALSE(over);
  EXPECT_GT(reads, 0);
  EXPECT_EQ(ring.stats().records, 64);
}

}  // namespace
}  // namespace profctl::agent
