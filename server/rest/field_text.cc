#include "server/rest/field_text.h"

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/util/time_util.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/http/http_target.h"

namespace metrics::server {

namespace {

using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

absl::Status Refused(absl::string_view text, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(QuoteForMessage(text), " is not ", what));
}

absl::Status SetFloating(Message* message, const FieldDescriptor* field,
                         absl::string_view text, TextForm form) {
  const Reflection* r = message->GetReflection();
  const bool repeated = field->is_repeated();
  double v;
  // The mapping's names for what a JSON number cannot write.
  const bool named = form != TextForm::kJsonLiteral;
  if (named && text == "NaN") {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (named && (text == "Infinity" || text == "-Infinity")) {
    v = text[0] == '-' ? -HUGE_VAL : HUGE_VAL;
  } else if (!IsJsonNumber(text) || !absl::SimpleAtod(text, &v) ||
             !std::isfinite(v)) {
    return Refused(text, "a finite number");
  }
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
    if (std::isfinite(v) && std::fabs(v) > std::numeric_limits<float>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(
          QuoteForMessage(text), " is out of range for a float"));
    }
    repeated ? r->AddFloat(message, field, static_cast<float>(v))
             : r->SetFloat(message, field, static_cast<float>(v));
  } else {
    repeated ? r->AddDouble(message, field, v)
             : r->SetDouble(message, field, v);
  }
  return absl::OkStatus();
}

absl::Status SetInteger(Message* message, const FieldDescriptor* field,
                        absl::string_view text, TextForm form) {
  const Reflection* r = message->GetReflection();
  const bool repeated = field->is_repeated();
  const FieldDescriptor::CppType type = field->cpp_type();
  const bool is_signed = type == FieldDescriptor::CPPTYPE_INT32 ||
                         type == FieldDescriptor::CPPTYPE_INT64;
  int64_t i64 = 0;
  uint64_t u64 = 0;
  bool ok = false;
  if (IsPlainInteger(text)) {
    ok = is_signed ? absl::SimpleAtoi(text, &i64)
                   : text[0] != '-' && absl::SimpleAtoi(text, &u64);
  } else if (form == TextForm::kJsonLiteral && IsJsonNumber(text)) {
    // A JSON number may write a whole number as 1e3 or 2.0: taken when a
    // double holds it exactly.
    double d;
    if (absl::SimpleAtod(text, &d) && d == std::floor(d) &&
        std::fabs(d) <= 9007199254740992.0) {
      ok = is_signed || d >= 0;
      i64 = static_cast<int64_t>(d);
      u64 = static_cast<uint64_t>(std::fabs(d));
    }
  }
  if (ok && type == FieldDescriptor::CPPTYPE_INT32) {
    ok = i64 >= std::numeric_limits<int32_t>::min() &&
         i64 <= std::numeric_limits<int32_t>::max();
  }
  if (ok && type == FieldDescriptor::CPPTYPE_UINT32) {
    ok = u64 <= std::numeric_limits<uint32_t>::max();
  }
  if (!ok) {
    return Refused(text, type == FieldDescriptor::CPPTYPE_INT32    ? "an int32"
                         : type == FieldDescriptor::CPPTYPE_INT64  ? "an int64"
                         : type == FieldDescriptor::CPPTYPE_UINT32 ? "a uint32"
                                                                   : "a uint64");
  }
  switch (type) {
    case FieldDescriptor::CPPTYPE_INT32:
      repeated ? r->AddInt32(message, field, static_cast<int32_t>(i64))
               : r->SetInt32(message, field, static_cast<int32_t>(i64));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      repeated ? r->AddInt64(message, field, i64)
               : r->SetInt64(message, field, i64);
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      repeated ? r->AddUInt32(message, field, static_cast<uint32_t>(u64))
               : r->SetUInt32(message, field, static_cast<uint32_t>(u64));
      break;
    default:
      repeated ? r->AddUInt64(message, field, u64)
               : r->SetUInt64(message, field, u64);
      break;
  }
  return absl::OkStatus();
}

absl::Status SetEnum(Message* message, const FieldDescriptor* field,
                     absl::string_view text, TextForm form) {
  const EnumValueDescriptor* e = nullptr;
  if (form != TextForm::kJsonLiteral) {
    e = field->enum_type()->FindValueByName(std::string(text));
  }
  int number;
  if (e == nullptr && form != TextForm::kJsonString && IsPlainInteger(text) &&
      absl::SimpleAtoi(text, &number)) {
    e = field->enum_type()->FindValueByNumber(number);
  }
  if (e == nullptr) {
    std::vector<std::string> names;
    for (int i = 0; i < field->enum_type()->value_count(); ++i) {
      names.push_back(field->enum_type()->value(i)->name());
    }
    return Refused(text, absl::StrCat("a value of ",
                                      field->enum_type()->full_name(),
                                      " (one of ", absl::StrJoin(names, ", "),
                                      ")"));
  }
  const Reflection* r = message->GetReflection();
  field->is_repeated() ? r->AddEnum(message, field, e)
                       : r->SetEnum(message, field, e);
  return absl::OkStatus();
}

}  // namespace

bool IsPlainInteger(absl::string_view text) {
  if (!text.empty() && text.front() == '-') text.remove_prefix(1);
  if (text.empty()) return false;
  for (char c : text) {
    if (!IsDigit(c)) return false;
  }
  return true;
}

bool IsJsonNumber(absl::string_view text) {
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    return i > start;
  };
  if (i < text.size() && text[i] == '-') ++i;
  if (i < text.size() && text[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == text.size();
}

bool SetTimeFromText(const std::string& text, Message* message) {
  // TimeUtil parses as the JSON mapping does, without its per-call set-up
  // (which cost ~80 us a value: a batch of 2 000 reports took 0.3 s).
  if (auto* t = dynamic_cast<google::protobuf::Timestamp*>(message)) {
    return google::protobuf::util::TimeUtil::FromString(text, t);
  }
  if (auto* d = dynamic_cast<google::protobuf::Duration*>(message)) {
    return google::protobuf::util::TimeUtil::FromString(text, d);
  }
  return false;
}

absl::Status SetFieldFromText(Message* message, const FieldDescriptor* field,
                              absl::string_view text, TextForm form) {
  const Reflection* r = message->GetReflection();
  const bool repeated = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
      return SetInteger(message, field, text, form);
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      return SetFloating(message, field, text, form);
    case FieldDescriptor::CPPTYPE_BOOL: {
      if (form == TextForm::kJsonString || (text != "true" && text != "false")) {
        return Refused(text, "true or false");
      }
      repeated ? r->AddBool(message, field, text == "true")
               : r->SetBool(message, field, text == "true");
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_ENUM:
      return SetEnum(message, field, text, form);
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string value(text);
      if (field->type() == FieldDescriptor::TYPE_BYTES &&
          !absl::Base64Unescape(text, &value) &&
          !absl::WebSafeBase64Unescape(text, &value)) {
        return Refused(text, "base64");
      }
      repeated ? r->AddString(message, field, std::move(value))
               : r->SetString(message, field, std::move(value));
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      const std::string& type = field->message_type()->full_name();
      const bool timestamp = type == "google.protobuf.Timestamp";
      if (!timestamp && type != "google.protobuf.Duration") {
        return absl::InvalidArgumentError(
            absl::StrCat("a ", type, " cannot be given as text"));
      }
      // Parsed apart first, so refused text leaves no empty element.
      google::protobuf::Timestamp t;
      google::protobuf::Duration d;
      Message* value = timestamp ? static_cast<Message*>(&t) : &d;
      if (!SetTimeFromText(std::string(text), value)) {
        return Refused(text, timestamp
                                 ? "an RFC 3339 time (2024-01-18T20:47:45.681Z)"
                                 : "a duration (\"1.5s\")");
      }
      (repeated ? r->AddMessage(message, field)
                : r->MutableMessage(message, field))
          ->CopyFrom(*value);
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError("is of an unsupported type");
}

}  // namespace metrics::server
