#include "common/check.h"

#include <cstdio>
#include <cstdlib>

namespace profctl::check_internal {

void DcheckFailed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: DCHECK failed: %s\n", file, line, condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace profctl::check_internal
