#include "storage/pg/reads/agent_reports.h"

#include <pqxx/result>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "storage/format/sealed_window.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "storage/rollup.h"

namespace metrics::storage::pg {

namespace {

constexpr int64_t kWindowUs = int64_t{kSealedWindowSeconds} * 1000000;
// A page's bounds: rows, and windows (a sealed window is some 40 KB, twice
// that as hex). The windows a page spans shrink or grow so that it decodes
// about kReportsPerPage reports: 48 sealed windows of an agent a second
// are some 29 000 reports, 14 MB decoded with 25 values each.
constexpr int64_t kRowsPerPage = 2000;
constexpr int64_t kWindowsPerPage = 48;
constexpr int64_t kReportsPerPage = 4000;

// The columns of a page; `values` is RawValueColumns' select list or just
// "packed_values". Each half scans one of the profiling partition's
// indexes of system rows.
std::string PageSql(absl::string_view values) {
  const auto half = [&](absl::string_view form) {
    return absl::StrCat("SELECT ", EpochMicrosSql("end_time"),
                        " AS t, id, total_batches, sealed_values, metrics IS NOT NULL, ", values,
                        " FROM metrics_profiling WHERE trial_id = $1 AND ",
                        SystemRowsOfAgentSql("$2"), " AND ", form, " AND end_time >= ",
                        TimestampFromMicrosSql("$3"), " AND end_time < ",
                        TimestampFromMicrosSql("$4"));
  };
  return absl::StrCat("(", half("packed_values IS NOT NULL"), ") UNION ALL (",
                      half("packed_values IS NULL"), ") ORDER BY t, id LIMIT $5");
}

enum Column { kTime, kId, kBatches, kSealed, kIsJson, kValues };

}  // namespace

PreparedStatement AgentReportScan::Statement() {
  return {"agent_report_page", PageSql("packed_values")};
}

AgentReportScan::AgentReportScan(pqxx::transaction_base& tx, int32_t trial_id,
                                 std::string agent,
                                 const std::vector<RawValueColumns::Series>& series,
                                 int64_t from_us, int64_t to_us, bool prepared)
    : tx_(tx),
      trial_id_(trial_id),
      agent_(std::move(agent)),
      columns_(tx, series),
      from_us_(from_us),
      to_us_(to_us),
      prepared_(prepared),
      next_window_(AlignDown(from_us, kWindowUs)),
      windows_per_page_(1) {}  // grown once the first page shows the density

void AgentReportScan::After(std::tuple<int64_t, int64_t, int32_t> after) {
  after_ = after;
  next_window_ = std::max(next_window_, AlignDown(std::get<0>(after), kWindowUs));
}

pqxx::result AgentReportScan::Page(int64_t from, int64_t to, int64_t limit, bool with_json) {
  if (with_json) {
    return tx_.exec_params(PageSql(columns_.sql()), trial_id_, agent_, from, to, limit);
  }
  if (prepared_) {
    return tx_.exec_prepared(Statement().name, trial_id_, agent_, from, to, limit);
  }
  return tx_.exec_params(Statement().sql, trial_id_, agent_, from, to, limit);
}

std::optional<int64_t> AgentReportScan::NextWindow(int64_t from) {
  const auto half = [&](absl::string_view form) {
    return absl::StrCat("SELECT ", EpochMicrosSql("end_time"),
                        " AS t FROM metrics_profiling WHERE trial_id = $1 AND ",
                        SystemRowsOfAgentSql("$2"), " AND ", form, " AND end_time >= ",
                        TimestampFromMicrosSql("$3"), " AND end_time < ",
                        TimestampFromMicrosSql("$4"), " ORDER BY end_time LIMIT 1");
  };
  const pqxx::result next = tx_.exec_params(
      absl::StrCat("(", half("packed_values IS NOT NULL"), ") UNION ALL (",
                   half("packed_values IS NULL"), ") ORDER BY t LIMIT 1"),
      trial_id_, agent_, from, to_us_);
  if (next.empty()) return std::nullopt;
  return AlignDown(next[0][0].as<int64_t>(), kWindowUs);
}

absl::StatusOr<bool> AgentReportScan::Next(std::vector<StoredReport>& out) {
  out.clear();
  while (next_window_ < to_us_) {
    const int64_t page_from = next_window_;
    int64_t page_to = to_us_ - next_window_ > windows_per_page_ * kWindowUs
                          ? next_window_ + windows_per_page_ * kWindowUs
                          : to_us_;
    int64_t limit = kRowsPerPage;
    pqxx::result rows;
    while (true) {
      rows = Page(next_window_, page_to, limit, false);
      if (std::any_of(rows.begin(), rows.end(),
                      [](const pqxx::row& row) { return row[kIsJson].as<bool>(); })) {
        rows = Page(next_window_, page_to, limit, true);
      }
      if (static_cast<int64_t>(rows.size()) < limit) break;
      // A full page may end inside a window: that window waits for the
      // next page, unless it is the only one (then a larger page).
      const int64_t last = AlignDown(rows.back()[kTime].as<int64_t>(), kWindowUs);
      if (last > next_window_) {
        page_to = last;
        break;
      }
      limit *= 4;
    }
    if (rows.empty()) {  // a gap: skip to the next window with a row
      const std::optional<int64_t> next = NextWindow(page_to);
      next_window_ = next.value_or(to_us_);
      continue;
    }
    for (const pqxx::row& row : rows) {
      const int64_t t = row[kTime].as<int64_t>();
      if (t >= page_to) break;
      const int64_t id = row[kId].as<int64_t>();
      std::optional<int32_t> batch;
      if (!row[kBatches].is_null()) batch = row[kBatches].as<int32_t>();
      if (!row[kSealed].is_null()) {
        absl::StatusOr<std::vector<WindowReport>> window =
            UnsealWindow(DecodeByteaHex(row[kSealed].c_str()));
        if (!window.ok()) {
          return absl::DataLossError(absl::StrCat("sealed row ", id, " of agent ", agent_,
                                                  ": ", window.status().message()));
        }
        for (size_t k = 0; k < window->size(); ++k) {
          const WindowReport& w = (*window)[k];
          if (w.time_us < from_us_ || w.time_us >= to_us_) continue;
          StoredReport& r = out.emplace_back();
          r.time_us = w.time_us;
          r.row_id = id;
          r.index = static_cast<int32_t>(k);
          r.batch = w.batch;
          columns_.Pick(w.values, [&](size_t i, double v) { r.values.emplace_back(i, v); });
        }
        continue;
      }
      if (t < from_us_) continue;
      StoredReport& r = out.emplace_back();
      r.time_us = t;
      r.row_id = id;
      r.batch = batch;
      // bytea's hex: "\x02..." for format 2.
      r.pending = !row[kValues].is_null() && absl::string_view(row[kValues].c_str()).substr(0, 4) == "\\x02";
      if (absl::Status read = columns_.Read(row, kValues, [&](size_t i, double v) {
            r.values.emplace_back(i, v);
          });
          !read.ok()) {
        return absl::DataLossError(
            absl::StrCat("row ", id, " of agent ", agent_, ": ", read.message()));
      }
    }
    next_window_ = page_to;
    // The next page spans as many windows as hold about kReportsPerPage at
    // this page's density.
    const int64_t spanned = std::max<int64_t>(1, (page_to - page_from) / kWindowUs);
    windows_per_page_ = std::clamp<int64_t>(
        spanned * kReportsPerPage / std::max<int64_t>(1, static_cast<int64_t>(out.size())), 1,
        kWindowsPerPage);
    std::sort(out.begin(), out.end(),
              [](const StoredReport& a, const StoredReport& b) { return a.key() < b.key(); });
    if (after_.has_value()) {
      out.erase(out.begin(), std::upper_bound(out.begin(), out.end(), *after_,
                                              [](const auto& after, const StoredReport& r) {
                                                return after < r.key();
                                              }));
    }
    for (StoredReport& r : out) std::sort(r.values.begin(), r.values.end());
    if (!out.empty()) return true;
  }
  return false;
}

}  // namespace metrics::storage::pg
