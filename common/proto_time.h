// google.protobuf.Timestamp to and from the service's times: absl::Time on
// the way in (nanoseconds kept; the server rounds to the store's
// microseconds where it stores), int64 microseconds since the epoch (the
// store's times) on the way out.
//
// Thread-safety: pure functions.
#ifndef METRICS_COMMON_PROTO_TIME_H_
#define METRICS_COMMON_PROTO_TIME_H_

#include <google/protobuf/timestamp.pb.h>

#include <cstdint>

#include "absl/time/time.h"

namespace metrics::common {

absl::Time TimeFromProto(const google::protobuf::Timestamp& t);

void MicrosToProto(int64_t micros, google::protobuf::Timestamp* proto);

}  // namespace metrics::common

#endif  // METRICS_COMMON_PROTO_TIME_H_
