#include "server/prometheus/prometheus_text.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace metrics::server {

namespace {

void AppendEscaped(std::string& out, absl::string_view text, bool quotes) {
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

void AppendValue(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else {
    absl::StrAppendFormat(&out, "%.17g", value);
  }
}

void AppendLabels(std::string& out, const PrometheusLabels& labels) {
  if (labels.empty()) return;
  out += '{';
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ',';
    absl::StrAppend(&out, labels[i].first, "=\"");
    AppendEscaped(out, labels[i].second, true);
    out += '"';
  }
  out += '}';
}

}  // namespace

void PrometheusText::Family(absl::string_view name, absl::string_view type,
                            absl::string_view help) {
  absl::StrAppend(&text_, "# HELP ", name, " ");
  AppendEscaped(text_, help, false);
  absl::StrAppend(&text_, "\n# TYPE ", name, " ", type, "\n");
}

void PrometheusText::Sample(absl::string_view name,
                            const PrometheusLabels& labels, double value) {
  text_.append(name.data(), name.size());
  AppendLabels(text_, labels);
  text_ += ' ';
  AppendValue(text_, value);
  text_ += '\n';
}

void PrometheusText::Histogram(absl::string_view name,
                               const PrometheusLabels& labels,
                               const common::HistogramSnapshot& snapshot) {
  const std::string bucket = absl::StrCat(name, "_bucket");
  for (size_t i = 0; i < snapshot.cumulative.size(); ++i) {
    std::string le = i < snapshot.upper_bounds.size()
                         ? absl::StrFormat("%g", snapshot.upper_bounds[i])
                         : "+Inf";
    PrometheusLabels with_le = labels;
    with_le.emplace_back("le", le);
    Sample(bucket, with_le, static_cast<double>(snapshot.cumulative[i]));
  }
  Sample(absl::StrCat(name, "_sum"), labels, snapshot.sum);
  Sample(absl::StrCat(name, "_count"), labels,
         snapshot.cumulative.empty()
             ? 0
             : static_cast<double>(snapshot.cumulative.back()));
}

std::string PrometheusName(absl::string_view text) {
  std::string name;
  for (char c : text) {
    const bool ok = absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
    name += ok ? c : '_';
  }
  if (!name.empty() && absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) {
    name.insert(name.begin(), '_');
  }
  return name;
}

}  // namespace metrics::server
