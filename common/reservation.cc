#include "common/reservation.h"

#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace profctl {
namespace {

constexpr char kPayloadUrl[] = "type.googleapis.com/profctl.v1.ReservationConflict";

}  // namespace

absl::Status WithReservationConflict(absl::Status status, const ReservationConflict& conflict) {
  if (status.ok()) return status;
  status.SetPayload(kPayloadUrl,
                    absl::Cord(absl::StrCat(conflict.holder.session_start_ns, " ",
                                            conflict.holder.ticket, " ", conflict.remaining_ms)));
  return status;
}

std::optional<ReservationConflict> ReservationConflictOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  const std::vector<std::string> parts = absl::StrSplit(std::string(*payload), ' ');
  ReservationConflict c;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &c.holder.session_start_ns) ||
      !absl::SimpleAtoi(parts[1], &c.holder.ticket) ||
      !absl::SimpleAtoi(parts[2], &c.remaining_ms)) {
    return std::nullopt;
  }
  return c;
}

}  // namespace profctl
