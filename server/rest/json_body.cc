#include "server/rest/json_body.h"

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/util/time_util.h>

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "server/http/http_target.h"

namespace metrics::server {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr int kMaxDepth = 64;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

bool IsPlainInteger(absl::string_view text) {
  if (!text.empty() && text.front() == '-') text.remove_prefix(1);
  if (text.empty()) return false;
  for (char c : text) {
    if (!IsDigit(c)) return false;
  }
  return true;
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

const FieldDescriptor* FindFieldByAnyName(const Descriptor* type,
                                          absl::string_view name) {
  const std::string key(name);
  if (const FieldDescriptor* f = type->FindFieldByName(key)) return f;
  for (int i = 0; i < type->field_count(); ++i) {
    if (type->field(i)->json_name() == key) return type->field(i);
  }
  return nullptr;
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

namespace {

// What a JSON value is, for "expected ..., got ..." messages.
absl::string_view KindAt(char c) {
  switch (c) {
    case '{':
      return "an object";
    case '[':
      return "an array";
    case '"':
      return "a string";
    case 't':
    case 'f':
      return "a boolean";
    case 'n':
      return "null";
    default:
      return "a number";
  }
}

class Parser {
 public:
  Parser(absl::string_view json, const std::vector<FieldPath>& bound)
      : json_(json), bound_(bound) {}

  absl::Status ParseTop(Message* message) {
    SkipSpace();
    if (pos_ == json_.size()) return absl::OkStatus();  // empty: no fields
    FieldPath path;
    if (absl::Status s = ParseObject(message, "", path, 0); !s.ok()) return s;
    SkipSpace();
    if (pos_ != json_.size()) return Syntax("unexpected text after the value");
    return absl::OkStatus();
  }

 private:
  absl::Status Syntax(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "request body: not valid JSON at byte ", pos_, ": ", what));
  }
  static absl::Status Field(absl::string_view where, absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("request body: \"", where, "\": ", what));
  }

  void SkipSpace() {
    while (pos_ < json_.size() &&
           (json_[pos_] == ' ' || json_[pos_] == '\t' || json_[pos_] == '\n' ||
            json_[pos_] == '\r')) {
      ++pos_;
    }
  }
  char Peek() const { return pos_ < json_.size() ? json_[pos_] : '\0'; }
  bool Consume(char c) {
    SkipSpace();
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }

  absl::Status ParseString(std::string& out) {
    if (Peek() != '"') return Syntax("expected a string");
    ++pos_;
    out.clear();
    while (true) {
      if (pos_ >= json_.size()) return Syntax("unterminated string");
      const char c = json_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (static_cast<unsigned char>(c) < 0x20) {
        return Syntax("a control character must be escaped in a string");
      }
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= json_.size()) return Syntax("unterminated string");
      const char e = json_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out.push_back(e);
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          uint32_t code = 0;
          if (absl::Status s = Hex4(code); !s.ok()) return s;
          if (code >= 0xDC00 && code <= 0xDFFF) {
            return Syntax("a \\u escape is a lone low surrogate");
          }
          if (code >= 0xD800 && code <= 0xDBFF) {
            uint32_t low = 0;
            if (json_.substr(pos_, 2) != "\\u") {
              return Syntax("a \\u escape is a lone high surrogate");
            }
            pos_ += 2;
            if (absl::Status s = Hex4(low); !s.ok()) return s;
            if (low < 0xDC00 || low > 0xDFFF) {
              return Syntax("a \\u escape is a lone high surrogate");
            }
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          AppendUtf8(out, code);
          break;
        }
        default:
          return Syntax("unknown escape in a string");
      }
    }
  }

  absl::Status Hex4(uint32_t& code) {
    if (json_.size() - pos_ < 4) return Syntax("short \\u escape");
    code = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = json_[pos_++];
      int v = IsDigit(c)               ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (v < 0) return Syntax("malformed \\u escape");
      code = code * 16 + static_cast<uint32_t>(v);
    }
    return absl::OkStatus();
  }

  static void AppendUtf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out.push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (code >> 6)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (code >> 12)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (code >> 18)));
      out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
  }

  // A number's text, checked against the JSON grammar.
  absl::Status ParseNumber(absl::string_view& out) {
    const size_t start = pos_;
    while (pos_ < json_.size() &&
           (IsDigit(json_[pos_]) || json_[pos_] == '-' || json_[pos_] == '+' ||
            json_[pos_] == '.' || json_[pos_] == 'e' || json_[pos_] == 'E')) {
      ++pos_;
    }
    out = json_.substr(start, pos_ - start);
    if (!IsJsonNumber(out)) {
      pos_ = start;
      return Syntax("not a JSON value");
    }
    return absl::OkStatus();
  }

  // Whether a JSON value can start here.
  bool AtValue() const {
    return pos_ < json_.size() &&
           absl::string_view("{[\"tfn-0123456789").find(json_[pos_]) !=
               absl::string_view::npos;
  }

  bool ConsumeWord(absl::string_view word) {
    if (json_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool IsBound(const FieldPath& path) const {
    for (const FieldPath& b : bound_) {
      if (b == path) return true;
    }
    return false;
  }

  absl::Status ParseObject(Message* message, const std::string& where,
                           FieldPath& path, int depth) {
    if (depth > kMaxDepth) return Syntax("nested too deeply");
    SkipSpace();
    if (Peek() != '{') {
      return where.empty()
                 ? Syntax(
                       absl::StrCat("expected an object, got ", KindAt(Peek())))
                 : Field(where, absl::StrCat("expected an object, got ",
                                             KindAt(Peek())));
    }
    ++pos_;
    if (Consume('}')) return absl::OkStatus();
    const Descriptor* type = message->GetDescriptor();
    std::vector<const FieldDescriptor*> seen;
    do {
      SkipSpace();
      std::string key;
      if (absl::Status s = ParseString(key); !s.ok()) return s;
      if (!Consume(':')) return Syntax("expected ':' after a key");
      const std::string here =
          where.empty() ? key : absl::StrCat(where, ".", key);
      const FieldDescriptor* field = FindFieldByAnyName(type, key);
      if (field == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("request body: ", QuoteForMessage(here),
                         ": is not a field of ", type->full_name()));
      }
      for (const FieldDescriptor* s : seen) {
        if (s == field) return Field(here, "is given twice");
        if (s->containing_oneof() != nullptr &&
            s->containing_oneof() == field->containing_oneof()) {
          return Field(
              here,
              absl::StrCat("is in oneof ", field->containing_oneof()->name(),
                           " with ", s->json_name(), ", which is set already"));
        }
      }
      seen.push_back(field);
      path.push_back(field);
      if (IsBound(path)) {
        return Field(here,
                     "is set by the request's path; leave it out of the body");
      }
      absl::Status s = ParseField(message, field, here, path, depth);
      path.pop_back();
      if (!s.ok()) return s;
    } while (Consume(','));
    if (!Consume('}')) return Syntax("expected ',' or '}' in an object");
    return absl::OkStatus();
  }

  absl::Status ParseField(Message* message, const FieldDescriptor* field,
                          const std::string& where, FieldPath& path,
                          int depth) {
    SkipSpace();
    if (!AtValue()) return Syntax("not a JSON value");
    if (ConsumeWord("null")) return absl::OkStatus();  // the default
    if (!field->is_repeated()) {
      return ParseOne(message, field, where, path, depth);
    }
    if (field->is_map()) return Field(where, "map fields are not supported");
    if (Peek() != '[') {
      return Field(where,
                   absl::StrCat("expected an array, got ", KindAt(Peek())));
    }
    ++pos_;
    if (Consume(']')) return absl::OkStatus();
    int index = 0;
    do {
      SkipSpace();
      const std::string item = absl::StrCat(where, "[", index++, "]");
      if (Peek() == 'n') return Field(item, "null is not allowed in an array");
      if (!AtValue()) return Syntax("not a JSON value");
      if (absl::Status s = ParseOne(message, field, item, path, depth + 1);
          !s.ok()) {
        return s;
      }
    } while (Consume(','));
    if (!Consume(']')) return Syntax("expected ',' or ']' in an array");
    return absl::OkStatus();
  }

  // One value of `field` (an element, for a repeated one).
  absl::Status ParseOne(Message* message, const FieldDescriptor* field,
                        const std::string& where, FieldPath& path, int depth) {
    const Reflection* r = message->GetReflection();
    const bool repeated = field->is_repeated();
    SkipSpace();
    const char c = Peek();
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      Message* child = repeated ? r->AddMessage(message, field)
                                : r->MutableMessage(message, field);
      const std::string& type = field->message_type()->full_name();
      if (type == "google.protobuf.Timestamp" ||
          type == "google.protobuf.Duration") {
        return ParseWellKnown(child, type, where);
      }
      return ParseObject(child, where, path, depth + 1);
    }
    auto expected = [&](absl::string_view what) {
      return Field(where, absl::StrCat("expected ", what, ", got ", KindAt(c)));
    };
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING: {
        if (c != '"') return expected("a string");
        std::string text;
        if (absl::Status s = ParseString(text); !s.ok()) return s;
        if (field->type() == FieldDescriptor::TYPE_BYTES) {
          std::string bytes;
          if (!absl::Base64Unescape(text, &bytes) &&
              !absl::WebSafeBase64Unescape(text, &bytes)) {
            return Field(where, "is not base64");
          }
          text = std::move(bytes);
        }
        repeated ? r->AddString(message, field, std::move(text))
                 : r->SetString(message, field, std::move(text));
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_BOOL: {
        bool v;
        if (ConsumeWord("true")) {
          v = true;
        } else if (ConsumeWord("false")) {
          v = false;
        } else {
          return expected("true or false");
        }
        repeated ? r->AddBool(message, field, v)
                 : r->SetBool(message, field, v);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_ENUM: {
        const google::protobuf::EnumValueDescriptor* e = nullptr;
        if (c == '"') {
          std::string name;
          if (absl::Status s = ParseString(name); !s.ok()) return s;
          e = field->enum_type()->FindValueByName(name);
        } else if (c == '-' || IsDigit(c)) {
          absl::string_view number;
          if (absl::Status s = ParseNumber(number); !s.ok()) return s;
          int v;
          if (IsPlainInteger(number) && absl::SimpleAtoi(number, &v)) {
            e = field->enum_type()->FindValueByNumber(v);
          }
        } else {
          return expected("an enum name");
        }
        if (e == nullptr) {
          return Field(where, absl::StrCat("is not a value of ",
                                           field->enum_type()->full_name()));
        }
        repeated ? r->AddEnum(message, field, e)
                 : r->SetEnum(message, field, e);
        return absl::OkStatus();
      }
      default:
        return ParseNumberField(message, field, where, c);
    }
  }

  absl::Status ParseNumberField(Message* message, const FieldDescriptor* field,
                                const std::string& where, char c) {
    const Reflection* r = message->GetReflection();
    const bool repeated = field->is_repeated();
    // The proto3 JSON mapping allows a number's decimal text in a string.
    std::string quoted;
    absl::string_view text;
    if (c == '"') {
      if (absl::Status s = ParseString(quoted); !s.ok()) return s;
      text = quoted;
    } else if (c == '-' || IsDigit(c)) {
      if (absl::Status s = ParseNumber(text); !s.ok()) return s;
    } else {
      return Field(where, absl::StrCat("expected a number, got ", KindAt(c)));
    }
    const FieldDescriptor::CppType type = field->cpp_type();
    if (type == FieldDescriptor::CPPTYPE_DOUBLE ||
        type == FieldDescriptor::CPPTYPE_FLOAT) {
      double v;
      if (text == "NaN" && c == '"') {
        v = std::numeric_limits<double>::quiet_NaN();
      } else if ((text == "Infinity" || text == "-Infinity") && c == '"') {
        v = text[0] == '-' ? -HUGE_VAL : HUGE_VAL;
      } else if (!IsJsonNumber(text) || !absl::SimpleAtod(text, &v) ||
                 !std::isfinite(v)) {
        return Field(where, absl::StrCat(QuoteForMessage(text),
                                         " is not a finite number"));
      }
      if (type == FieldDescriptor::CPPTYPE_FLOAT) {
        if (std::isfinite(v) &&
            std::fabs(v) > std::numeric_limits<float>::max()) {
          return Field(where, "is out of range for a float");
        }
        repeated ? r->AddFloat(message, field, static_cast<float>(v))
                 : r->SetFloat(message, field, static_cast<float>(v));
      } else {
        repeated ? r->AddDouble(message, field, v)
                 : r->SetDouble(message, field, v);
      }
      return absl::OkStatus();
    }
    // Integers: plain digits, or (unquoted) any JSON number whose value is a
    // whole number that a double holds exactly.
    int64_t i64 = 0;
    uint64_t u64 = 0;
    const bool is_signed = type == FieldDescriptor::CPPTYPE_INT32 ||
                           type == FieldDescriptor::CPPTYPE_INT64;
    bool ok = false;
    if (IsPlainInteger(text)) {
      ok = is_signed ? absl::SimpleAtoi(text, &i64)
                     : text[0] != '-' && absl::SimpleAtoi(text, &u64);
    } else if (c != '"' && IsJsonNumber(text)) {
      double d;
      if (absl::SimpleAtod(text, &d) && d == std::floor(d) &&
          std::fabs(d) <= 9007199254740992.0) {
        ok = is_signed || d >= 0;
        i64 = static_cast<int64_t>(d);
        u64 = static_cast<uint64_t>(std::fabs(d));
      }
    }
    const absl::string_view kind =
        type == FieldDescriptor::CPPTYPE_INT32    ? "an int32"
        : type == FieldDescriptor::CPPTYPE_INT64  ? "an int64"
        : type == FieldDescriptor::CPPTYPE_UINT32 ? "a uint32"
                                                  : "a uint64";
    if (ok && type == FieldDescriptor::CPPTYPE_INT32) {
      ok = i64 >= std::numeric_limits<int32_t>::min() &&
           i64 <= std::numeric_limits<int32_t>::max();
    }
    if (ok && type == FieldDescriptor::CPPTYPE_UINT32) {
      ok = u64 <= std::numeric_limits<uint32_t>::max();
    }
    if (!ok) {
      return Field(where,
                   absl::StrCat(QuoteForMessage(text), " is not ", kind));
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

  absl::Status ParseWellKnown(Message* child, const std::string& type,
                              const std::string& where) {
    const bool timestamp = type == "google.protobuf.Timestamp";
    if (Peek() != '"') {
      return Field(where, absl::StrCat("expected ",
                                       timestamp ? "an RFC 3339 time string"
                                                 : "a duration string",
                                       ", got ", KindAt(Peek())));
    }
    std::string text;
    if (absl::Status s = ParseString(text); !s.ok()) return s;
    if (!SetTimeFromText(text, child)) {
      return Field(
          where,
          absl::StrCat(QuoteForMessage(text), " is not ",
                       timestamp ? "an RFC 3339 time (2024-01-18T20:47:45.681Z)"
                                 : "a duration (\"1.5s\")"));
    }
    return absl::OkStatus();
  }

  const absl::string_view json_;
  const std::vector<FieldPath>& bound_;
  size_t pos_ = 0;
};

}  // namespace

absl::Status ParseJsonBody(absl::string_view json,
                           const std::vector<FieldPath>& bound,
                           Message* message) {
  if (!common::IsValidUtf8(json)) {
    return absl::InvalidArgumentError("request body: is not valid UTF-8");
  }
  return Parser(json, bound).ParseTop(message);
}

}  // namespace metrics::server
