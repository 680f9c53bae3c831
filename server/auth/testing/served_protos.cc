#include "server/auth/testing/served_protos.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "proto/determined/api/v1/profiler.pb.h"
#include "proto/metrics/v1/ingest.pb.h"
#include "proto/metrics/v1/query.pb.h"
#include "proto/metrics/v1/tokens.pb.h"
#include "proto/metrics/v1/trials.pb.h"
#include "proto/opentelemetry/proto/collector/metrics/v1/metrics_service.pb.h"

namespace metrics::server::test_util {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

bool SetAt(Message& message, absl::Span<const std::string> path,
           int32_t value) {
  const FieldDescriptor* field =
      message.GetDescriptor()->FindFieldByName(path[0]);
  if (field == nullptr) return false;
  const auto* reflection = message.GetReflection();
  if (path.size() == 1) {
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_INT32) return false;
    if (field->is_repeated()) {  // a list of trials: this one alone
      reflection->ClearField(&message, field);
      reflection->AddInt32(&message, field, value);
    } else {
      reflection->SetInt32(&message, field, value);
    }
    return true;
  }
  if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) return false;
  Message* child = field->is_repeated()
                       ? reflection->AddMessage(&message, field)
                       : reflection->MutableMessage(&message, field);
  return SetAt(*child, path.subspan(1), value);
}

}  // namespace

std::vector<const google::protobuf::FileDescriptor*> ServedProtoFiles() {
  return {v1::CreateTrialRequest::descriptor()->file(),
          v1::CreateTokenRequest::descriptor()->file(),
          v1::ReportSystemMetricsRequest::descriptor()->file(),
          v1::QuerySeriesRequest::descriptor()->file(),
          determined::api::v1::GetTrialProfilerMetricsRequest::descriptor()
              ->file(),
          opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest::
              descriptor()
                  ->file()};
}

std::vector<const google::protobuf::MethodDescriptor*> ServedMethods() {
  std::vector<const google::protobuf::MethodDescriptor*> methods;
  for (const google::protobuf::FileDescriptor* file : ServedProtoFiles()) {
    for (int s = 0; s < file->service_count(); ++s) {
      for (int m = 0; m < file->service(s)->method_count(); ++m) {
        methods.push_back(file->service(s)->method(m));
      }
    }
  }
  return methods;
}

std::string FullName(const google::protobuf::MethodDescriptor* method) {
  return absl::StrCat("/", method->service()->full_name(), "/", method->name());
}

std::unique_ptr<Message> NewRequest(
    const google::protobuf::MethodDescriptor* method) {
  return std::unique_ptr<Message>(
      google::protobuf::MessageFactory::generated_factory()
          ->GetPrototype(method->input_type())
          ->New());
}

bool SetInt32At(Message& message, absl::string_view path, int32_t value) {
  std::vector<std::string> parts = absl::StrSplit(path, '.');
  return SetAt(message, parts, value);
}

}  // namespace metrics::server::test_util
