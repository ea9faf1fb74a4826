// The step signal inside the injection library: NVTX ranges whose names are steps
// (step_names.h), paired from their start and end markers and kept until the client sends them
// to the agent (socket_protocol.h StepSamples). Plain C++ only: part of the injection library.
//
// COST. Fixed storage, no allocation after construction: a name is matched once, at its range's
// start (an end carries no name), and only step ranges are remembered (at most kMaxOpen at once;
// a start beyond that evicts the oldest open step, counted as dropped). Finished samples wait in
// a ring of kCapacity; when it is full the oldest is overwritten (and counted): the agent wants
// the latest steps.
//
// THREADING. None: the owner serialises every call (CuptiTracer holds its mutex).
#ifndef PROFCTL_INJECT_STEP_SAMPLES_H_
#define PROFCTL_INJECT_STEP_SAMPLES_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "inject/socket_protocol.h"

namespace profctl::inject {

class StepRangeTracker {
 public:
  static constexpr size_t kMaxOpen = 64;
  static constexpr size_t kCapacity = 1024;

  // A range `id` started at `start_ns` (any clock; the tracer's is the GPU clock). Remembered
  // only when `name` is a step name.
  void OnStart(uint32_t id, uint64_t start_ns, std::string_view name);
  // A range ended. When it was a step range, it becomes a sample {start, max(end, start), step}.
  void OnEnd(uint32_t id, uint64_t end_ns);
  // Moves up to `max` finished samples to `out`, oldest first; returns how many.
  size_t Take(StepSampleEntry* out, size_t max);
  // Throws every finished sample away (counted as dropped); returns how many.
  size_t Clear();

  size_t ready() const { return size_; }
  size_t open() const { return open_count_; }
  // Samples overwritten in the full ring or cleared, and step starts evicted.
  uint64_t dropped() const { return dropped_; }

 private:
  struct Open {
    uint32_t id = 0;
    uint64_t start_ns = 0;
    int64_t step_num = 0;
  };
  void Push(const StepSampleEntry& sample);

  std::array<Open, kMaxOpen> open_{};
  size_t open_count_ = 0;
  std::array<StepSampleEntry, kCapacity> ring_{};
  size_t head_ = 0;  // the oldest sample
  size_t size_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_STEP_SAMPLES_H_
