#include "server/rest/json_body.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "server/http/http_target.h"
#include "server/rest/field_text.h"

namespace metrics::server {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr int kMaxDepth = 64;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

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

  // One value of `field` (an element, for a repeated one). Its JSON kind
  // is checked here; its text is set by the rules every door shares
  // (field_text.h).
  absl::Status ParseOne(Message* message, const FieldDescriptor* field,
                        const std::string& where, FieldPath& path, int depth) {
    SkipSpace();
    const char c = Peek();
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      const std::string& type = field->message_type()->full_name();
      if (type == "google.protobuf.Timestamp" ||
          type == "google.protobuf.Duration") {
        return ParseWellKnown(message, field, where);
      }
      const Reflection* r = message->GetReflection();
      Message* child = field->is_repeated() ? r->AddMessage(message, field)
                                            : r->MutableMessage(message, field);
      return ParseObject(child, where, path, depth + 1);
    }
    const bool number = c == '-' || IsDigit(c);
    absl::string_view expected;
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        if (c != '"') expected = "a string";
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        if (c != 't' && c != 'f') expected = "true or false";
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        if (c != '"' && !number) expected = "an enum name";
        break;
      default:  // numbers; the mapping allows their text in a string
        if (c != '"' && !number) expected = "a number";
        break;
    }
    if (!expected.empty()) {
      return Field(where, absl::StrCat("expected ", expected, ", got ", KindAt(c)));
    }
    std::string quoted;
    absl::string_view text;
    TextForm form = TextForm::kJsonLiteral;
    if (c == '"') {
      if (absl::Status s = ParseString(quoted); !s.ok()) return s;
      text = quoted;
      form = TextForm::kJsonString;
    } else if (number) {
      if (absl::Status s = ParseNumber(text); !s.ok()) return s;
    } else if (ConsumeWord("true")) {
      text = "true";
    } else if (ConsumeWord("false")) {
      text = "false";
    } else {
      return Field(where, absl::StrCat("expected true or false, got ", KindAt(c)));
    }
    if (absl::Status s = SetFieldFromText(message, field, text, form); !s.ok()) {
      return Field(where, s.message());
    }
    return absl::OkStatus();
  }

  absl::Status ParseWellKnown(Message* message, const FieldDescriptor* field,
                              const std::string& where) {
    if (Peek() != '"') {
      const bool timestamp =
          field->message_type()->full_name() == "google.protobuf.Timestamp";
      return Field(where, absl::StrCat("expected ",
                                       timestamp ? "an RFC 3339 time string"
                                                 : "a duration string",
                                       ", got ", KindAt(Peek())));
    }
    std::string text;
    if (absl::Status s = ParseString(text); !s.ok()) return s;
    if (absl::Status s =
            SetFieldFromText(message, field, text, TextForm::kJsonString);
        !s.ok()) {
      return Field(where, s.message());
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
