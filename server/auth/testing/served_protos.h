// Test helpers over the proto files metricsd serves: their descriptors (so
// tests cover every method, including ones added later) and a way to put a
// trial id at a rule's field path in any request.
//
// Thread-safety: pure functions.
#ifndef METRICS_SERVER_AUTH_TESTING_SERVED_PROTOS_H_
#define METRICS_SERVER_AUTH_TESTING_SERVED_PROTOS_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace metrics::server::test_util {

// The files of the services metricsd serves (a message of each links it in).
std::vector<const google::protobuf::FileDescriptor*> ServedProtoFiles();

// Every method of every service in those files.
std::vector<const google::protobuf::MethodDescriptor*> ServedMethods();

// "/package.Service/Method".
std::string FullName(const google::protobuf::MethodDescriptor* method);

// An empty request of `method`.
std::unique_ptr<google::protobuf::Message> NewRequest(
    const google::protobuf::MethodDescriptor* method);

// Sets the int32 at the dotted `path` (adding one element to repeated
// messages on the way; a repeated int32 becomes that one value). False when
// the path names no such field.
bool SetInt32At(google::protobuf::Message& message, absl::string_view path,
                int32_t value);

}  // namespace metrics::server::test_util

#endif  // METRICS_SERVER_AUTH_TESTING_SERVED_PROTOS_H_
