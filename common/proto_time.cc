#include "common/proto_time.h"

namespace metrics::common {

absl::Time TimeFromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

void MicrosToProto(int64_t micros, google::protobuf::Timestamp* proto) {
  // Timestamp's nanos are never negative: floor the seconds.
  int64_t seconds = micros / 1000000;
  int64_t rest = micros % 1000000;
  if (rest < 0) {
    --seconds;
    rest += 1000000;
  }
  proto->set_seconds(seconds);
  proto->set_nanos(static_cast<int32_t>(rest * 1000));
}

}  // namespace metrics::common
