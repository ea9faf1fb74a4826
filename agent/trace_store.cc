#include "agent/trace_store.h"

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "spdlog/spdlog.h"

namespace profctl::agent {

struct TraceStore::Entry {
  std::string map_key;
  std::string session_id;  // for the log
  bool complete = false;
  std::vector<FetchCallback> waiters;  // while !complete
  std::shared_ptr<const StoredTrace> trace;
  int64_t complete_mono = 0;
  uint64_t seq = 0;  // position in State::order, once retained
};

struct TraceStore::State : std::enable_shared_from_this<State> {
  State(Dependencies d, TraceStoreOptions o) : deps(d), options(o) {}

  static std::string MapKey(const void* scope, const std::string& id, const std::string& key) {
    // Ids and keys never hold '\n' (ValidateSessionId, ValidateSessionKey).
    return absl::StrCat(reinterpret_cast<uintptr_t>(scope), "\n", id, "\n", key);
  }

  void Ref(const std::shared_ptr<const std::string>& buffer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto [it, inserted] = held.try_emplace(buffer.get(), Held{buffer->size(), 0});
    if (inserted) held_bytes += buffer->size();
    ++it->second.refs;
  }

  void Unref(const std::string* buffer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = held.find(buffer);
    if (it == held.end()) return;
    if (--it->second.refs == 0) {
      held_bytes -= it->second.size;
      held.erase(it);
    }
  }

  // Forgets a retained entry; its trace (and buffer) goes into `freed` so that the memory is
  // released outside the lock.
  void Evict(std::map<uint64_t, std::shared_ptr<Entry>>::iterator it, const char* why,
             std::vector<std::shared_ptr<const StoredTrace>>* freed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const std::shared_ptr<Entry> entry = it->second;
    order.erase(it);
    if (auto m = entries.find(entry->map_key); m != entries.end() && m->second == entry) {
      entries.erase(m);
    }
    retained_bytes -= entry->trace->data->size();
    Unref(entry->trace->data.get());
    spdlog::debug("retained trace of session {} ({} bytes) evicted: {}", entry->session_id,
                  entry->trace->data->size(), why);
    freed->push_back(std::move(entry->trace));
  }

  void PruneExpired(std::vector<std::shared_ptr<const StoredTrace>>* freed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const int64_t now = deps.clock->MonoNs();
    const int64_t ttl = options.retain_ms * kNanosPerMilli;
    while (!order.empty() && now - order.begin()->second->complete_mono >= ttl) {
      Evict(order.begin(), "expired (--retain-ms)", freed);
    }
  }

  void PruneExpiredNow() {
    std::vector<std::shared_ptr<const StoredTrace>> freed;
    absl::MutexLock lock(&mu);
    PruneExpired(&freed);
  }

  struct Held {
    uint64_t size = 0;
    int refs = 0;
  };

  const Dependencies deps;
  const TraceStoreOptions options;
  mutable absl::Mutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<Entry>> entries ABSL_GUARDED_BY(mu);
  // Retained (complete) entries, oldest first.
  std::map<uint64_t, std::shared_ptr<Entry>> order ABSL_GUARDED_BY(mu);
  uint64_t next_seq ABSL_GUARDED_BY(mu) = 1;
  uint64_t retained_bytes ABSL_GUARDED_BY(mu) = 0;
  absl::flat_hash_map<const std::string*, Held> held ABSL_GUARDED_BY(mu);
  uint64_t held_bytes ABSL_GUARDED_BY(mu) = 0;
};

TraceStore::Hold& TraceStore::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    Release();
    state_ = std::move(other.state_);
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

TraceStore::Hold::~Hold() { Release(); }

void TraceStore::Hold::Release() {
  if (state_ == nullptr || buffer_ == nullptr) return;
  {
    absl::MutexLock lock(&state_->mu);
    state_->Unref(buffer_.get());
  }
  state_.reset();
  buffer_.reset();
}

TraceStore::TraceStore(Dependencies deps, TraceStoreOptions options)
    : options_(options), state_(std::make_shared<State>(deps, options)) {}

TraceStore::~TraceStore() = default;

TraceStore::Ticket TraceStore::Expect(const void* scope, const std::string& id,
                                      const std::string& key) {
  auto entry = std::make_shared<Entry>();
  entry->map_key = State::MapKey(scope, id, key);
  entry->session_id = id;
  std::vector<std::shared_ptr<const StoredTrace>> freed;
  absl::MutexLock lock(&state_->mu);
  if (auto it = state_->entries.find(entry->map_key);
      it != state_->entries.end() && it->second->complete) {
    state_->Evict(state_->order.find(it->second->seq), "replaced by a new session", &freed);
  }
  state_->entries[entry->map_key] = entry;
  return entry;
}

void TraceStore::Complete(const Ticket& ticket, const std::shared_ptr<const StoredTrace>& trace) {
  std::vector<FetchCallback> waiters;
  std::vector<std::shared_ptr<const StoredTrace>> freed;
  {
    State& s = *state_;
    absl::MutexLock lock(&s.mu);
    waiters = std::move(ticket->waiters);
    ticket->waiters.clear();
    ticket->complete = true;
    ticket->trace = trace;
    auto it = s.entries.find(ticket->map_key);
    const bool current = it != s.entries.end() && it->second == ticket;
    if (current && options_.retain_ms > 0 && options_.retain_bytes > 0) {
      ticket->complete_mono = s.deps.clock->MonoNs();
      ticket->seq = s.next_seq++;
      s.order.emplace(ticket->seq, ticket);
      s.retained_bytes += trace->data->size();
      s.Ref(trace->data);
      s.PruneExpired(&freed);
      while (!s.order.empty() && s.retained_bytes > static_cast<uint64_t>(options_.retain_bytes)) {
        s.Evict(s.order.begin(), "over --retain-mb", &freed);
      }
      while (!s.order.empty() && s.held_bytes > static_cast<uint64_t>(options_.max_held_bytes)) {
        s.Evict(s.order.begin(), "over --max-held-mb", &freed);
      }
      if (s.deps.executor != nullptr) {
        s.deps.executor->PostAt(ticket->complete_mono + options_.retain_ms * kNanosPerMilli,
                                [weak = std::weak_ptr<State>(state_)] {
                                  if (auto state = weak.lock()) state->PruneExpiredNow();
                                });
      }
    } else if (current) {
      s.entries.erase(it);
    }
  }
  for (FetchCallback& done : waiters) std::move(done)(trace);
}

void TraceStore::Fetch(const void* scope, const std::string& id, const std::string& key,
                       FetchCallback done) {
  std::shared_ptr<const StoredTrace> trace;
  std::vector<std::shared_ptr<const StoredTrace>> freed;
  {
    absl::MutexLock lock(&state_->mu);
    state_->PruneExpired(&freed);
    auto it = state_->entries.find(State::MapKey(scope, id, key));
    if (it != state_->entries.end()) {
      if (!it->second->complete) {
        it->second->waiters.push_back(std::move(done));
        return;
      }
      trace = it->second->trace;
    }
  }
  if (trace == nullptr) {
    std::move(done)(absl::NotFoundError(
        "this agent holds no trace for that session id and key (never recorded with a key, "
        "expired, evicted, or another key)"));
    return;
  }
  std::move(done)(std::move(trace));
}

absl::Status TraceStore::CheckCapacity() {
  std::vector<std::shared_ptr<const StoredTrace>> freed;
  State& s = *state_;
  absl::MutexLock lock(&s.mu);  // through `s`, so clang's -Wthread-safety sees s.mu held
  s.PruneExpired(&freed);
  const auto cap = static_cast<uint64_t>(options_.max_held_bytes);
  while (!s.order.empty() && s.held_bytes > cap) {
    s.Evict(s.order.begin(), "over --max-held-mb before a new capture", &freed);
  }
  if (s.held_bytes <= cap) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat("the agent holds ", s.held_bytes,
                                                   " bytes of traces its clients have not read "
                                                   "yet, over its cap of ",
                                                   cap, " bytes (--max-held-mb); retry later"));
}

TraceStore::Hold TraceStore::HoldBuffer(std::shared_ptr<const std::string> buffer) {
  absl::MutexLock lock(&state_->mu);
  state_->Ref(buffer);
  return Hold(state_, std::move(buffer));
}

uint64_t TraceStore::held_bytes() const {
  absl::MutexLock lock(&state_->mu);
  return state_->held_bytes;
}

uint64_t TraceStore::retained_bytes() const {
  absl::MutexLock lock(&state_->mu);
  return state_->retained_bytes;
}

size_t TraceStore::retained_count() const {
  absl::MutexLock lock(&state_->mu);
  return state_->order.size();
}

}  // namespace profctl::agent
