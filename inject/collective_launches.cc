#include "inject/collective_launches.h"

#include <cstring>

namespace profctl::inject {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}
bool IsAlnum(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

}  // namespace

std::string_view NcclKernelOp(std::string_view name) {
  // A mangled name: "_Z" <length> <identifier> <parameters>; the identifier is what we read.
  if (StartsWith(name, "_Z")) {
    size_t i = 2;
    size_t length = 0;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9' && length < 100'000) {
      length = length * 10 + static_cast<size_t>(name[i] - '0');
      ++i;
    }
    if (i == 2 || length == 0) return {};
    name = name.substr(i, length);
  }
  for (std::string_view prefix :
       {std::string_view("ncclDevKernel_"), std::string_view("ncclKernel_")}) {
    if (!StartsWith(name, prefix)) continue;
    const std::string_view rest = name.substr(prefix.size());
    size_t n = 0;
    while (n < rest.size() && IsAlnum(rest[n])) ++n;
    return rest.substr(0, n);
  }
  return {};
}

CollectiveLaunchRecorder::CollectiveLaunchRecorder(uint64_t (*now_ns)(), uint32_t (*thread_id)())
    : now_ns_(now_ns), thread_id_(thread_id) {
  std::memcpy(names_[0].text, kOverflowName.data(), kOverflowName.size());
}

bool CollectiveLaunchRecorder::OnLaunch(bool runtime, bool enter, const char* symbol) {
  if (!enter && !runtime) return false;  // only a runtime launch's exit matters (below)
  if (!MaybeNcclKernel(symbol)) return false;
  if (NcclKernelOp(symbol).empty()) return false;
  const uint32_t tid = thread_id_();
  if (!enter) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < open_runtime_count_; ++i) {
      if (open_runtime_[i] == tid) {
        open_runtime_[i] = open_runtime_[--open_runtime_count_];
        break;
      }
    }
    return false;
  }
  const uint64_t now = now_ns_();
  std::lock_guard<std::mutex> lock(mu_);
  if (runtime) {
    if (open_runtime_count_ == kMaxOpenRuntimeLaunches) open_runtime_count_ = 0;  // lost exits
    open_runtime_[open_runtime_count_++] = tid;
  } else {
    for (size_t i = 0; i < open_runtime_count_; ++i) {
      if (open_runtime_[i] == tid) return false;  // the runtime's own driver call
    }
  }
  CollectiveLaunchEntry e;
  e.wall_ns = static_cast<int64_t>(now);
  e.seq = seq_.fetch_add(1, std::memory_order_relaxed);
  e.tid = tid;
  e.name_index = Intern(symbol);
  if (size_ == kCapacity) {
    ring_[head_] = e;  // overwrite the oldest
    head_ = (head_ + 1) % kCapacity;
    ++dropped_;
    return true;
  }
  ring_[(head_ + size_) % kCapacity] = e;
  ++size_;
  return true;
}

uint32_t CollectiveLaunchRecorder::Intern(const char* symbol) {
  for (size_t i = 1; i < name_count_; ++i) {
    if (names_[i].pointer == symbol) return static_cast<uint32_t>(i);
  }
  const size_t length = strnlen(symbol, kMaxNameBytes - 1);
  for (size_t i = 1; i < name_count_; ++i) {
    if (std::strncmp(names_[i].text, symbol, length) == 0 && names_[i].text[length] == '\0') {
      return static_cast<uint32_t>(i);
    }
  }
  if (name_count_ == kMaxNames) return 0;
  NameSlot& slot = names_[name_count_];
  slot.pointer = symbol;
  std::memcpy(slot.text, symbol, length);
  slot.text[length] = '\0';
  return static_cast<uint32_t>(name_count_++);
}

size_t CollectiveLaunchRecorder::Take(CollectiveLaunchEntry* out, size_t max) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  while (n < max && size_ > 0) {
    out[n++] = ring_[head_];
    head_ = (head_ + 1) % kCapacity;
    --size_;
  }
  return n;
}

std::string_view CollectiveLaunchRecorder::Name(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id >= name_count_) return {};
  return names_[id].text;
}

uint64_t CollectiveLaunchRecorder::TakeDropped() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t n = dropped_;
  dropped_ = 0;
  return n;
}

size_t CollectiveLaunchRecorder::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = size_;
  dropped_ += n;
  head_ = size_ = 0;
  return n;
}

size_t CollectiveLaunchRecorder::ready() {
  std::lock_guard<std::mutex> lock(mu_);
  return size_;
}

}  // namespace profctl::inject
