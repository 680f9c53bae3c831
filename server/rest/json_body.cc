#include "server/rest/json_body.h"

#include <boost/json/basic_parser_impl.hpp>
#include <google/protobuf/struct.pb.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "server/http/http_target.h"
#include "server/rest/field_text.h"

namespace metrics::server {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::ListValue;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::Struct;
using google::protobuf::Value;

// Objects and arrays nested in each other at most.
constexpr std::size_t kMaxDepth = 64;

}  // namespace

const FieldDescriptor* FindFieldByAnyName(const Descriptor* type,
                                          absl::string_view name) {
  const std::string key(name);
  if (const FieldDescriptor* f = type->FindFieldByName(key)) return f;
  for (int i = 0; i < type->field_count(); ++i) {
    if (type->field(i)->json_name() == key) return type->field(i);
  }
  return nullptr;
}

namespace {

// What a JSON value is, for "expected ..., got ..." messages.
enum class Kind { kObject, kArray, kString, kNumber, kBoolean, kNull };

absl::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kObject:
      return "an object";
    case Kind::kArray:
      return "an array";
    case Kind::kString:
      return "a string";
    case Kind::kNumber:
      return "a number";
    case Kind::kBoolean:
      return "a boolean";
    case Kind::kNull:
      return "null";
  }
  return "a value";
}

bool IsStruct(const FieldDescriptor* field) {
  return field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
         field->message_type() == Struct::descriptor();
}

bool IsWellKnownString(const FieldDescriptor* field) {
  if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) return false;
  const std::string& type = field->message_type()->full_name();
  return type == "google.protobuf.Timestamp" ||
         type == "google.protobuf.Duration";
}

// Boost.JSON's SAX handler: maps each value onto the message as it is
// parsed (the tokenizer, its escapes, UTF-8 and number grammar are Boost's;
// the mapping and its messages are ours). A handler that refuses returns
// false with `failure_` set, which stops the parser.
class Mapper {
 public:
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);

  using error_code = boost::json::error_code;
  using string_view = boost::json::string_view;

  Mapper(Message* root, const std::vector<FieldPath>& bound,
         const JsonBodyOptions& options,
         std::vector<FieldPath>* repeated_bound)
      : root_(root),
        bound_(bound),
        options_(options),
        repeated_bound_(repeated_bound) {}

  const absl::Status& failure() const { return failure_; }

  bool on_document_begin(error_code&) { return true; }
  bool on_document_end(error_code&) { return true; }

  bool on_object_begin(error_code& ec) {
    if (frames_.empty()) {
      frames_.push_back(Frame(root_, "", nullptr, false));
      return true;
    }
    const Target t = Next();
    if (t.value != nullptr) {
      PushStruct(t.value->mutable_struct_value(), t.where);
      return true;
    }
    if (!Accepts(t, Kind::kObject)) return Refused(ec);
    const Reflection* r = t.message->GetReflection();
    Message* child = t.field->is_repeated()
                         ? r->AddMessage(t.message, t.field)
                         : r->MutableMessage(t.message, t.field);
    if (IsStruct(t.field)) {
      // Generated code is linked for every served message.
      PushStruct(static_cast<Struct*>(child), t.where);
      return true;
    }
    frames_.push_back(Frame(child, t.where, nullptr, false));
    return true;
  }

  bool on_object_end(std::size_t, error_code&) {
    frames_.pop_back();
    if (!frames_.empty()) ValueDone();
    return true;
  }

  bool on_array_begin(error_code& ec) {
    if (frames_.empty()) return Refuse(ec, TopLevel(Kind::kArray));
    const Target t = Next();
    if (t.value != nullptr) {
      Frame list(nullptr, t.where, nullptr, true);
      list.list = t.value->mutable_list_value();
      frames_.push_back(std::move(list));
      return true;
    }
    if (!Accepts(t, Kind::kArray)) return Refused(ec);
    frames_.push_back(Frame(t.message, t.where, t.field, true));
    return true;
  }

  bool on_array_end(std::size_t, error_code&) {
    frames_.pop_back();
    ValueDone();
    return true;
  }

  bool on_key_part(string_view s, std::size_t, error_code&) {
    text_.append(s.data(), s.size());
    return true;
  }

  bool on_key(string_view s, std::size_t, error_code& ec) {
    std::string key = TakeText(s);
    Frame& object = frames_.back();
    if (object.strukt != nullptr) {
      std::string here = absl::StrCat(object.where, "[", QuoteForMessage(key), "]");
      if (object.strukt->fields().contains(key)) {
        return Refuse(ec, Field(here, "is given twice"));
      }
      object.key = std::move(key);
      object.field_where = std::move(here);
      return true;
    }
    const std::string here =
        object.where.empty() ? key : absl::StrCat(object.where, ".", key);
    const Descriptor* type = object.message->GetDescriptor();
    const FieldDescriptor* field = FindFieldByAnyName(type, key);
    if (field == nullptr) {
      return Refuse(ec, absl::InvalidArgumentError(absl::StrCat(
                            "request body: ", QuoteForMessage(here),
                            ": is not a field of ", type->full_name())));
    }
    for (const FieldDescriptor* s : object.seen) {
      if (s == field) return Refuse(ec, Field(here, "is given twice"));
      if (s->containing_oneof() != nullptr &&
          s->containing_oneof() == field->containing_oneof()) {
        return Refuse(
            ec, Field(here, absl::StrCat("is in oneof ",
                                         field->containing_oneof()->name(),
                                         " with ", s->json_name(),
                                         ", which is set already")));
      }
    }
    object.seen.push_back(field);
    path_.push_back(field);
    for (const FieldPath& b : bound_) {
      if (b != path_) continue;
      if (options_.path_fields_may_repeat && repeated_bound_ != nullptr) {
        repeated_bound_->push_back(path_);
        break;
      }
      return Refuse(
          ec, Field(here, "is set by the request's path; leave it out of "
                          "the body"));
    }
    object.field = field;
    object.field_where = here;
    return true;
  }

  bool on_string_part(string_view s, std::size_t, error_code&) {
    text_.append(s.data(), s.size());
    return true;
  }

  bool on_string(string_view s, std::size_t, error_code& ec) {
    return Scalar(ec, Kind::kString, TakeText(s), TextForm::kJsonString);
  }

  bool on_number_part(string_view s, error_code&) {
    text_.append(s.data(), s.size());
    return true;
  }
  // The number's text, not Boost's value: field_text.h converts it by the
  // field's type, exactly (a 64-bit id) and with its own range checks.
  bool on_int64(int64_t, string_view s, error_code& ec) { return Number(s, ec); }
  bool on_uint64(uint64_t, string_view s, error_code& ec) {
    return Number(s, ec);
  }
  bool on_double(double, string_view s, error_code& ec) { return Number(s, ec); }

  bool on_bool(bool b, error_code& ec) {
    return Scalar(ec, Kind::kBoolean, b ? "true" : "false",
                  TextForm::kJsonLiteral);
  }

  bool on_null(error_code& ec) {
    if (frames_.empty()) return Refuse(ec, TopLevel(Kind::kNull));
    const Target t = Next();
    if (t.value != nullptr) {
      t.value->set_null_value(google::protobuf::NULL_VALUE);
      return true;
    }
    if (t.in_array) {
      return Refuse(ec, Field(t.where, "null is not allowed in an array"));
    }
    ValueDone();  // null leaves the field at its default
    return true;
  }

  // Comments are refused by the parser's options before they get here.
  bool on_comment_part(string_view, error_code&) { return true; }
  bool on_comment(string_view, error_code&) { return true; }

 private:
  // An object being filled, or a repeated field's array; or, inside a
  // Struct field, a JSON object (`strukt`) or array (`list`).
  struct Frame {
    Frame(Message* message, std::string where, const FieldDescriptor* field,
          bool is_array)
        : message(message),
          where(std::move(where)),
          field(field),
          next_index(0),
          is_array(is_array) {}

    Message* message;
    std::string where;  // its path as sent ("batch.reports[0]")
    // An object's field whose value comes next; an array's field.
    const FieldDescriptor* field;
    std::string field_where;  // an object's: the path of `field` (or key)
    std::vector<const FieldDescriptor*> seen;  // an object's fields so far
    int next_index;                            // an array's
    bool is_array;
    Struct* strukt = nullptr;
    ListValue* list = nullptr;
    std::string key;  // a Struct object's: the member whose value comes next
  };

  // Where the next value goes: a message's field, or (inside a Struct) a
  // Value.
  struct Target {
    Message* message;
    const FieldDescriptor* field;
    std::string where;
    bool in_array;  // an element of a repeated field
    Value* value = nullptr;
  };

  void PushStruct(Struct* strukt, const std::string& where) {
    Frame object(nullptr, where, nullptr, false);
    object.strukt = strukt;
    frames_.push_back(std::move(object));
  }

  static absl::Status Field(absl::string_view where, absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("request body: \"", where, "\": ", what));
  }
  static absl::Status TopLevel(Kind got) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request body: expected an object, got ", KindName(got)));
  }

  bool Refuse(error_code& ec, absl::Status failure) {
    failure_ = std::move(failure);
    return Refused(ec);
  }
  // Stops the parser; failure_ says why.
  static bool Refused(error_code& ec) {
    ec = boost::json::error::exception;
    return false;
  }

  Target Next() {
    Frame& top = frames_.back();
    if (top.list != nullptr) {
      return Target{nullptr, nullptr,
                    absl::StrCat(top.where, "[", top.next_index++, "]"), true,
                    top.list->add_values()};
    }
    if (top.strukt != nullptr) {
      return Target{nullptr, nullptr, top.field_where, false,
                    &(*top.strukt->mutable_fields())[top.key]};
    }
    if (top.is_array) {
      return Target{top.message, top.field,
                    absl::StrCat(top.where, "[", top.next_index++, "]"), true,
                    nullptr};
    }
    return Target{top.message, top.field, top.field_where, false, nullptr};
  }

  // A value of an object's field has ended: its key leaves the path.
  void ValueDone() {
    if (frames_.back().is_array || frames_.back().strukt != nullptr) return;
    path_.pop_back();
    frames_.back().field = nullptr;
  }

  // Whether `t` takes a value of kind `got` (not null); else failure_.
  bool Accepts(const Target& t, Kind got) {
    const FieldDescriptor* field = t.field;
    if (field->is_repeated() && !t.in_array) {
      if (field->is_map()) {
        failure_ = Field(t.where, "map fields are not supported");
        return false;
      }
      if (got == Kind::kArray) return true;
      failure_ = Field(t.where, absl::StrCat("expected an array, got ",
                                             KindName(got)));
      return false;
    }
    absl::string_view expected;
    if (IsWellKnownString(field)) {
      if (got != Kind::kString) {
        expected = field->message_type()->full_name() ==
                           "google.protobuf.Timestamp"
                       ? "an RFC 3339 time string"
                       : "a duration string";
      }
    } else {
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_MESSAGE:
          if (got != Kind::kObject) expected = "an object";
          break;
        case FieldDescriptor::CPPTYPE_STRING:
          if (got != Kind::kString) expected = "a string";
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          if (got != Kind::kBoolean) expected = "true or false";
          break;
        case FieldDescriptor::CPPTYPE_ENUM:
          if (got != Kind::kString && got != Kind::kNumber) {
            expected = "an enum name";
          }
          break;
        default:  // numbers; the mapping allows their text in a string
          if (got != Kind::kString && got != Kind::kNumber) {
            expected = "a number";
          }
          break;
      }
    }
    if (expected.empty()) return true;
    failure_ = Field(t.where, absl::StrCat("expected ", expected, ", got ",
                                           KindName(got)));
    return false;
  }

  bool Number(string_view last, error_code& ec) {
    return Scalar(ec, Kind::kNumber, TakeText(last), TextForm::kJsonLiteral);
  }

  // A key, string or number whole: the parts given so far, then `last`.
  std::string TakeText(string_view last) {
    text_.append(last.data(), last.size());
    std::string whole;
    whole.swap(text_);
    return whole;
  }

  // A string, number or boolean: its kind is checked here, its text set by
  // the rules every door shares (field_text.h).
  bool Scalar(error_code& ec, Kind kind, absl::string_view text,
              TextForm form) {
    if (frames_.empty()) return Refuse(ec, TopLevel(kind));
    const Target t = Next();
    if (t.value != nullptr) {
      switch (kind) {
        case Kind::kString:
          t.value->set_string_value(std::string(text));
          return true;
        case Kind::kBoolean:
          t.value->set_bool_value(text == "true");
          return true;
        default: {
          double number = 0;
          if (!absl::SimpleAtod(text, &number) || !std::isfinite(number)) {
            return Refuse(ec, Field(t.where, "is out of the range of a double"));
          }
          t.value->set_number_value(number);
          return true;
        }
      }
    }
    if (!Accepts(t, kind)) return Refused(ec);
    if (absl::Status s = SetFieldFromText(t.message, t.field, text, form);
        !s.ok()) {
      return Refuse(ec, Field(t.where, s.message()));
    }
    ValueDone();
    return true;
  }

  Message* const root_;
  const std::vector<FieldPath>& bound_;
  const JsonBodyOptions& options_;
  std::vector<FieldPath>* const repeated_bound_;
  std::vector<Frame> frames_;
  FieldPath path_;    // the fields from the top down to the current key
  std::string text_;  // a key, string or number given in parts
  absl::Status failure_;
};

// A syntax error's words: Boost's, in ours where they say more. `at` is
// where the parser stopped.
std::string SyntaxWords(const boost::json::error_code& ec,
                        absl::string_view json, std::size_t at) {
  using boost::json::error;
  if (ec == error::extra_data) return "unexpected text after the value";
  if (ec == error::too_deep) return "nested too deeply";
  if (ec == error::incomplete) return "the body ends inside a value";
  if (ec == error::expected_hex_digit) return "malformed \\u escape";
  if (ec == error::illegal_leading_surrogate) {
    return "a \\u escape is a lone low surrogate";
  }
  // A high surrogate's escape not followed by a low one's: Boost stops
  // just after it.
  const auto high_surrogate_before = [&] {
    if (at < 6) return false;
    const absl::string_view escape = json.substr(at - 6, 4);
    return escape[0] == '\\' && escape[1] == 'u' &&
           (escape[2] == 'd' || escape[2] == 'D') &&
           absl::string_view("89abAB").find(escape[3]) !=
               absl::string_view::npos;
  };
  if (ec == error::illegal_trailing_surrogate || high_surrogate_before()) {
    return "a \\u escape is a lone high surrogate";
  }
  return ec.message();
}

}  // namespace

std::string QuotePythonNonFinite(absl::string_view json) {
  std::string out;
  out.reserve(json.size());
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < json.size()) {
        out += json[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (absl::string_view token : {"-Infinity", "Infinity", "NaN"}) {
      if (json.substr(i, token.size()) == token) {
        absl::StrAppend(&out, "\"", token, "\"");
        i += token.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

absl::Status ParseJsonBody(absl::string_view json,
                           const std::vector<FieldPath>& bound,
                           Message* message, const JsonBodyOptions& options,
                           std::vector<FieldPath>* repeated_bound) {
  if (!common::IsValidUtf8(json)) {
    return absl::InvalidArgumentError("request body: is not valid UTF-8");
  }
  std::string quoted;
  if (options.python_non_finite) {
    quoted = QuotePythonNonFinite(json);
    json = quoted;
  }
  if (json.find_first_not_of(" \t\n\r") == absl::string_view::npos) {
    return absl::OkStatus();  // empty: no fields
  }
  boost::json::parse_options parse_options;  // strict RFC 8259
  parse_options.max_depth = kMaxDepth;
  boost::json::basic_parser<Mapper> parser(parse_options, message, bound,
                                           options, repeated_bound);
  boost::json::error_code ec;
  std::size_t parsed =
      parser.write_some(/*more=*/false, json.data(), json.size(), ec);
  if (!parser.handler().failure().ok()) return parser.handler().failure();
  if (!ec && parsed < json.size()) {
    // The parser stops after the value; anything but space is extra.
    const std::size_t extra = json.find_first_not_of(" \t\n\r", parsed);
    if (extra != absl::string_view::npos) {
      parsed = extra;
      ec = boost::json::error::extra_data;
    }
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("request body: not valid JSON at byte ", parsed, ": ",
                     SyntaxWords(ec, json, parsed)));
  }
  return absl::OkStatus();
}

}  // namespace metrics::server
