// Status propagation macros (Debian 12's Abseil predates absl's own).
#ifndef PROFCTL_COMMON_STATUS_MACROS_H_
#define PROFCTL_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PROFCTL_CONCAT_INNER_(a, b) a##b
#define PROFCTL_CONCAT_(a, b) PROFCTL_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define PROFCTL_RETURN_IF_ERROR(expr)                                                           \
  do {                                                                                          \
    if (::absl::Status _profctl_status = (expr); !_profctl_status.ok()) return _profctl_status; \
  } while (0)

// `lhs = value of expr` when expr (a StatusOr) is OK, else returns its status.
#define PROFCTL_ASSIGN_OR_RETURN(lhs, expr) \
  PROFCTL_ASSIGN_OR_RETURN_IMPL_(PROFCTL_CONCAT_(_profctl_statusor_, __LINE__), lhs, expr)
// `tmp` is a name and `lhs` may be a declaration (`const std::string text`): neither can be
// parenthesized, as bugprone-macro-parentheses asks.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define PROFCTL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

#endif  // PROFCTL_COMMON_STATUS_MACROS_H_
