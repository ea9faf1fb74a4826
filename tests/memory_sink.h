// A TraceSink that keeps files in memory, and can be told to fail one write.
#ifndef PROFCTL_TESTS_MEMORY_SINK_H_
#define PROFCTL_TESTS_MEMORY_SINK_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "coordinator/session/session_writer.h"

namespace profctl::testkit {

class MemorySink final : public coordinator::TraceSink {
 public:
  absl::StatusOr<std::string> Write(const std::string& name, absl::string_view data) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (on_write) on_write(name);
    if (name == fail_name) return absl::ResourceExhaustedError("disk full");
    files[name] = std::string(data);
    return name;
  }
  absl::StatusOr<std::unique_ptr<coordinator::TraceFile>> Create(const std::string&) override {
    if (on_create) on_create();
    return std::make_unique<File>(this);
  }
  absl::Status SyncCommitted() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++syncs;
    if (on_sync) on_sync();
    return sync_error;
  }
  absl::StatusOr<std::string> Read(const std::string& name) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++reads;
    auto it = files.find(name);
    if (it == files.end()) return absl::NotFoundError(name);
    return it->second;
  }
  std::string LocalPath(const std::string& name) const override {
    return dir.empty() ? std::string() : dir + "/" + name;
  }
  std::string location() const override { return "/mem/session"; }

  // A real folder for the files only a path-based writer can write (the pod trace); empty = none.
  std::string dir;

  std::string fail_name;  // a write or commit of this name fails
  std::map<std::string, std::string> files;
  int reads = 0;                                     // calls of Read
  int syncs = 0;                                     // calls of SyncCommitted
  absl::Status sync_error;                           // what SyncCommitted returns
  std::function<void()> on_sync;                     // called by every SyncCommitted
  std::function<void()> on_create;                   // called by every Create
  std::function<void(const std::string&)> on_write;  // called by every Write, with the name
  // Files made by Create and not yet destroyed (committed or dropped).
  int open_files() {
    std::lock_guard<std::mutex> lock(mu_);
    return open_files_;
  }

 private:
  class File final : public coordinator::TraceFile {
   public:
    explicit File(MemorySink* sink) : sink_(sink) {
      std::lock_guard<std::mutex> lock(sink_->mu_);
      ++sink_->open_files_;
    }
    ~File() override {
      std::lock_guard<std::mutex> lock(sink_->mu_);
      --sink_->open_files_;
    }
    File(const File&) = delete;
    File& operator=(const File&) = delete;
    absl::Status Append(absl::string_view data) override {
      data_.append(data.data(), data.size());
      return absl::OkStatus();
    }
    uint64_t size() const override { return data_.size(); }
    absl::StatusOr<std::string> ReadAll() override { return data_; }
    absl::StatusOr<std::string> Commit(const std::string& name) override {
      return sink_->Write(name, data_);
    }

   private:
    MemorySink* sink_;
    std::string data_;
  };
  std::mutex mu_;
  int open_files_ = 0;
};

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_MEMORY_SINK_H_
