// RETURN_IF_ERROR and ASSIGN_OR_RETURN: early returns for absl::Status and
// absl::StatusOr, in the style of zetasql's status_macros.h.
//
// Thread-safety: macros only; no state.
#ifndef METRICS_COMMON_STATUS_MACROS_H_
#define METRICS_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns from the enclosing function if `expr` yields a non-OK Status. The
// switch-based else-blocker keeps a following `else` from binding here.
#define RETURN_IF_ERROR(expr)                                  \
  switch (0)                                                   \
  case 0:                                                      \
  default:                                                     \
    if (::absl::Status metrics_status_ = (expr); metrics_status_.ok()) { \
    } else /* NOLINT */                                        \
      return metrics_status_

#define METRICS_STATUS_CONCAT_INNER_(a, b) a##b
#define METRICS_STATUS_CONCAT_(a, b) METRICS_STATUS_CONCAT_INNER_(a, b)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its Status,
// otherwise moves the value into `lhs`, which may be a declaration.
#define ASSIGN_OR_RETURN(lhs, rexpr)                                        \
  ASSIGN_OR_RETURN_IMPL_(METRICS_STATUS_CONCAT_(metrics_statusor_, __LINE__), \
                         lhs, rexpr)

#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                           \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)

#endif  // METRICS_COMMON_STATUS_MACROS_H_
