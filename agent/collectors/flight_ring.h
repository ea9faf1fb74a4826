// The flight recorder's ring (docs/flight-recorder.md): the most recent whole records of one
// collector, bounded by age and by bytes. A record is what a collector keeps as one unit (the
// synthetic job: one step of every GPU); the ring evicts whole records only, oldest first, so a
// snapshot never holds half of one.
#ifndef PROFCTL_AGENT_COLLECTORS_FLIGHT_RING_H_
#define PROFCTL_AGENT_COLLECTORS_FLIGHT_RING_H_

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace profctl::agent {

struct FlightRingStats {
  int64_t records = 0;
  int64_t bytes = 0;            // what the held records cost, their per-record overhead included
  int64_t evicted = 0;          // records dropped for age or bytes since the ring was made
  int64_t oldest_start_ns = 0;  // 0 when empty
  int64_t newest_end_ns = 0;
};

// Thread-safe: Push and Between may run on different threads at once.
template <typename T>
class FlightRing {
 public:
  // What the ring charges per record besides the record's own bytes.
  static constexpr int64_t kRecordOverheadBytes = 64;

  // Keeps records that ended within `keep_ns` of the newest one's end, at most `max_bytes` of them.
  FlightRing(int64_t keep_ns, int64_t max_bytes) : keep_ns_(keep_ns), max_bytes_(max_bytes) {}

  // Appends one whole record spanning [start_ns, end_ns] that costs `bytes`, then evicts the
  // oldest whole records while the ring holds more than max_bytes or records that ended more than
  // keep_ns before end_ns. Records come in order of their ends. A record that alone is over
  // max_bytes is not kept (counted as evicted).
  void Push(int64_t start_ns, int64_t end_ns, int64_t bytes, T value) {
    absl::MutexLock lock(&mu_);
    const int64_t cost = bytes + kRecordOverheadBytes;
    if (cost > max_bytes_) {
      ++evicted_;
      return;
    }
    records_.push_back({start_ns, end_ns, cost, std::move(value)});
    bytes_ += cost;
    while (!records_.empty() &&
           (bytes_ > max_bytes_ || records_.front().end_ns < end_ns - keep_ns_)) {
      bytes_ -= records_.front().cost;
      records_.pop_front();
      ++evicted_;
    }
  }

  // Copies of the held records that overlap [from_ns, to_ns], oldest first.
  std::vector<T> Between(int64_t from_ns, int64_t to_ns) const {
    absl::MutexLock lock(&mu_);
    std::vector<T> out;
    for (const Record& r : records_) {
      if (r.end_ns >= from_ns && r.start_ns <= to_ns) out.push_back(r.value);
    }
    return out;
  }

  FlightRingStats stats() const {
    absl::MutexLock lock(&mu_);
    FlightRingStats s{
        .records = static_cast<int64_t>(records_.size()), .bytes = bytes_, .evicted = evicted_};
    if (!records_.empty()) {
      s.oldest_start_ns = records_.front().start_ns;
      s.newest_end_ns = records_.back().end_ns;
    }
    return s;
  }

  int64_t keep_ns() const { return keep_ns_; }
  int64_t max_bytes() const { return max_bytes_; }

 private:
  struct Record {
    int64_t start_ns;
    int64_t end_ns;
    int64_t cost;
    T value;
  };
  const int64_t keep_ns_;
  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  std::deque<Record> records_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t evicted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_COLLECTORS_FLIGHT_RING_H_
