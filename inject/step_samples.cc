#include "inject/step_samples.h"

#include "inject/step_names.h"

namespace profctl::inject {

void StepRangeTracker::OnStart(uint32_t id, uint64_t start_ns, std::string_view name) {
  int64_t step_num = 0;
  if (!MatchStepName(name, &step_num)) return;
  size_t slot = open_count_;
  for (size_t i = 0; i < open_count_; ++i) {
    if (open_[i].id == id) slot = i;  // a reused id: the newer start wins
  }
  if (slot == kMaxOpen) {
    // Full of steps that never ended (lost end markers): evict the oldest.
    slot = 0;
    for (size_t i = 1; i < open_count_; ++i) {
      if (open_[i].start_ns < open_[slot].start_ns) slot = i;
    }
    ++dropped_;
  } else if (slot == open_count_) {
    ++open_count_;
  }
  open_[slot] = Open{id, start_ns, step_num};
}

void StepRangeTracker::OnEnd(uint32_t id, uint64_t end_ns) {
  for (size_t i = 0; i < open_count_; ++i) {
    if (open_[i].id != id) continue;
    const Open o = open_[i];
    open_[i] = open_[--open_count_];
    StepSampleEntry sample;
    sample.start_wall_ns = static_cast<int64_t>(o.start_ns);
    sample.end_wall_ns = static_cast<int64_t>(end_ns >= o.start_ns ? end_ns : o.start_ns);
    sample.step_num = o.step_num;
    Push(sample);
    return;
  }
}

void StepRangeTracker::Push(const StepSampleEntry& sample) {
  if (size_ == kCapacity) {
    ring_[head_] = sample;  // overwrite the oldest
    head_ = (head_ + 1) % kCapacity;
    ++dropped_;
    return;
  }
  ring_[(head_ + size_) % kCapacity] = sample;
  ++size_;
}

size_t StepRangeTracker::Take(StepSampleEntry* out, size_t max) {
  size_t n = 0;
  while (n < max && size_ > 0) {
    out[n++] = ring_[head_];
    head_ = (head_ + 1) % kCapacity;
    --size_;
  }
  return n;
}

size_t StepRangeTracker::Clear() {
  const size_t n = size_;
  dropped_ += n;
  head_ = size_ = 0;
  return n;
}

}  // namespace profctl::inject
