// A fresh directory under /tmp for one test, removed with everything in it when it goes away.
#ifndef PROFCTL_TESTS_TEMP_DIR_H_
#define PROFCTL_TESTS_TEMP_DIR_H_

#include <cstdlib>
#include <filesystem>
#include <string>

namespace profctl::testkit {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/profctl_test_XXXXXX";
    const char* made = mkdtemp(tmpl);
    path_ = made != nullptr ? made : "";
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_TEMP_DIR_H_
