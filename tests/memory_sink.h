// A TraceSink that keeps files in memory, and can be told to fail one write.
#ifndef PROFCTL_TESTS_MEMORY_SINK_H_
#define PROFCTL_TESTS_MEMORY_SINK_H_

#include <map>
#include <mutex>
#include <string>

#include "coordinator/session_writer.h"

namespace profctl::testing {

class MemorySink final : public coordinator::TraceSink {
 public:
  absl::StatusOr<std::string> Write(const std::string& name, absl::string_view data) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (name == fail_name) return absl::ResourceExhaustedError("disk full");
    files[name] = std::string(data);
    return name;
  }
  std::string location() const override { return "/mem/session"; }

  std::string fail_name;  // a write of this name fails
  std::map<std::string, std::string> files;

 private:
  std::mutex mu_;
};

}  // namespace profctl::testing

#endif  // PROFCTL_TESTS_MEMORY_SINK_H_
