#include "storage/pg/reads/agent_reports.h"


#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
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
// A sealed row longer than this comes in a page as its first bytes only
// (a window of a report a second is some 40 KB): it is a part of a dense
// window, read in pieces.
constexpr int64_t kWholeSealedBytes = 256 << 10;

// The columns of rows of the agent with end_time in [$3, $4), `values`
// being RawValueColumns' select list or just "packed_values", and
// `where` more conditions. Each half scans one of the profiling
// partition's indexes of system rows.
std::string RowsSql(absl::string_view values, absl::string_view where = "TRUE") {
  const auto half = [&](absl::string_view form) {
    return absl::StrCat(
        "SELECT ", EpochMicrosSql("end_time"), " AS t, id, total_batches, CASE WHEN ",
        "octet_length(sealed_values) > ", kWholeSealedBytes, " THEN substring(sealed_values ",
        "from 1 for ", kSealedHeadBytes, ") ELSE sealed_values END, octet_length(sealed_values) > ",
        kWholeSealedBytes, ", metrics IS NOT NULL, ", values,
        " FROM metrics_profiling WHERE trial_id = $1 AND ", SystemRowsOfAgentSql("$2"), " AND ",
        form, " AND ", where, " AND end_time >= ", TimestampFromMicrosSql("$3"),
        " AND end_time < ", TimestampFromMicrosSql("$4"));
  };
  return absl::StrCat("(", half("packed_values IS NOT NULL"), ") UNION ALL (",
                      half("packed_values IS NULL"), ") ORDER BY t, id LIMIT $5");
}

enum Column { kTime, kId, kBatches, kSealed, kHeadOnly, kIsJson, kValues };

bool AnyJson(const pqxx::result& rows) {
  return std::any_of(rows.begin(), rows.end(),
                     [](const pqxx::row& row) { return row[kIsJson].as<bool>(); });
}

}  // namespace

PreparedStatement AgentReportScan::Statement() {
  return {"agent_report_page", RowsSql("packed_values")};
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

pqxx::result AgentReportScan::Page(int64_t from, int64_t to, int64_t limit) {
  pqxx::result rows =
      prepared_ ? tx_.exec_prepared(Statement().name, trial_id_, agent_, from, to, limit)
                : tx_.exec_params(Statement().sql, trial_id_, agent_, from, to, limit);
  if (!AnyJson(rows)) return rows;
  return tx_.exec_params(RowsSql(columns_.sql()), trial_id_, agent_, from, to, limit);
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

absl::Status AgentReportScan::AddSealed(int64_t id, absl::string_view bytes, int64_t from,
                                        int64_t to, std::vector<StoredReport>& out,
                                        int64_t* last_us) {
  absl::StatusOr<std::vector<WindowReport>> window = UnsealWindow(bytes);
  if (!window.ok()) {
    return absl::DataLossError(
        absl::StrCat("sealed row ", id, " of agent ", agent_, ": ", window.status().message()));
  }
  if (last_us != nullptr && !window->empty()) *last_us = window->back().time_us;
  from = std::max(from, from_us_);
  to = std::min(to, to_us_);
  for (size_t k = 0; k < window->size(); ++k) {
    const WindowReport& w = (*window)[k];
    if (w.time_us < from || w.time_us >= to) continue;
    StoredReport& r = out.emplace_back();
    r.time_us = w.time_us;
    r.row_id = id;
    r.index = static_cast<int32_t>(k);
    r.batch = w.batch;
    columns_.Pick(w.values, [&](size_t i, double v) { r.values.emplace_back(i, v); });
  }
  return absl::OkStatus();
}

absl::Status AgentReportScan::AddRaw(const pqxx::row& row, std::vector<StoredReport>& out) {
  const int64_t t = row[kTime].as<int64_t>();
  if (t < from_us_) return absl::OkStatus();
  const int64_t id = row[kId].as<int64_t>();
  StoredReport& r = out.emplace_back();
  r.time_us = t;
  r.row_id = id;
  if (!row[kBatches].is_null()) r.batch = row[kBatches].as<int32_t>();
  // bytea's hex: "\x02..." for format 2.
  r.pending = !row[kValues].is_null() && absl::string_view(row[kValues].c_str()).substr(0, 4) == "\\x02";
  if (absl::Status read = columns_.Read(row, kValues, [&](size_t i, double v) {
        r.values.emplace_back(i, v);
      });
      !read.ok()) {
    return absl::DataLossError(
        absl::StrCat("row ", id, " of agent ", agent_, ": ", read.message()));
  }
  return absl::OkStatus();
}

bool AgentReportScan::Finish(std::vector<StoredReport>& out) const {
  std::sort(out.begin(), out.end(),
            [](const StoredReport& a, const StoredReport& b) { return a.key() < b.key(); });
  if (after_.has_value()) {
    out.erase(out.begin(), std::upper_bound(out.begin(), out.end(), *after_,
                                            [](const auto& after, const StoredReport& r) {
                                              return after < r.key();
                                            }));
  }
  for (StoredReport& r : out) std::sort(r.values.begin(), r.values.end());
  return !out.empty();
}

absl::Status AgentReportScan::StartPieces(int64_t window) {
  int64_t from = std::max(window, from_us_);
  if (after_.has_value()) from = std::max(from, std::get<0>(*after_));
  Pieces& pieces = pieces_.emplace(Pieces{window, from, {}});
  const pqxx::result parts = tx_.exec_params(
      absl::StrCat("SELECT id, substring(sealed_values from 1 for ", kSealedHeadBytes,
                   ") FROM metrics_profiling WHERE trial_id = $1 AND ", SystemRowsOfAgentSql("$2"),
                   " AND packed_values IS NULL AND sealed_values IS NOT NULL AND end_time = ",
                   TimestampFromMicrosSql("$3")),
      trial_id_, agent_, window);
  for (const pqxx::row& row : parts) {
    const int64_t id = row[0].as<int64_t>();
    absl::StatusOr<int64_t> first = SealedFirstTime(DecodeByteaHex(row[1].c_str()));
    if (!first.ok()) {
      return absl::DataLossError(
          absl::StrCat("sealed row ", id, " of agent ", agent_, ": ", first.status().message()));
    }
    pieces.parts.push_back({id, *first, std::nullopt});
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> AgentReportScan::NextPiece(std::vector<StoredReport>& out) {
  Pieces& pieces = *pieces_;
  const int64_t end = std::min(pieces.window + kWindowUs, to_us_);
  const int64_t from = pieces.from;
  // A piece ends where the next part starts, or where a page of raw rows
  // ends, so it holds about one part's reports.
  int64_t to = end;
  for (const Part& part : pieces.parts) {
    if (part.first_us > from) to = std::min(to, part.first_us);
  }
  const std::string raw_sql = RowsSql(columns_.sql(), "sealed_values IS NULL");
  pqxx::result rows;
  for (int64_t limit = kRowsPerPage;; limit *= 4) {
    rows = tx_.exec_params(raw_sql, trial_id_, agent_, from, to, limit);
    if (static_cast<int64_t>(rows.size()) < limit) break;
    // Rows of one time are one piece, however many.
    const int64_t last = rows.back()[kTime].as<int64_t>();
    if (last > from) {
      to = last;
      break;
    }
  }
  for (const pqxx::row& row : rows) {
    if (row[kTime].as<int64_t>() >= to) break;
    RETURN_IF_ERROR(AddRaw(row, out));
  }
  // Parts that may hold reports of [from, to), one at a time. A part holds
  // a stretch of time from its first report (a part that took late rows
  // may hold more), learnt once it is decoded.
  for (Part& part : pieces.parts) {
    if (part.first_us >= to || (part.last_us.has_value() && *part.last_us < from)) continue;
    const pqxx::result row = tx_.exec_params(
        absl::StrCat("SELECT sealed_values FROM metrics_profiling WHERE trial_id = $1 AND ",
                     SystemRowsOfAgentSql("$2"), " AND packed_values IS NULL AND end_time = ",
                     TimestampFromMicrosSql("$3"), " AND id = $4"),
        trial_id_, agent_, pieces.window, part.id);
    if (row.empty()) continue;  // gone meanwhile (outside a snapshot)
    int64_t last = 0;
    RETURN_IF_ERROR(
        AddSealed(part.id, DecodeByteaHex(row[0][0].c_str()), from, to, out, &last));
    part.last_us = last;
  }
  pieces.from = to;
  if (to >= end) {
    next_window_ = pieces.window + kWindowUs;
    pieces_.reset();
  }
  return Finish(out);
}

absl::StatusOr<bool> AgentReportScan::Next(std::vector<StoredReport>& out) {
  out.clear();
  while (true) {
    if (pieces_.has_value()) {
      ASSIGN_OR_RETURN(const bool any, NextPiece(out));
      if (any) return true;
      continue;
    }
    if (next_window_ >= to_us_) return false;
    const int64_t page_from = next_window_;
    int64_t page_to = to_us_ - next_window_ > windows_per_page_ * kWindowUs
                          ? next_window_ + windows_per_page_ * kWindowUs
                          : to_us_;
    pqxx::result rows = Page(next_window_, page_to, kRowsPerPage);
    bool dense = false;  // the first window is read in pieces
    if (static_cast<int64_t>(rows.size()) == kRowsPerPage) {
      // A full page may end inside a window: that window waits for the
      // next page, unless it is the only one.
      const int64_t last = AlignDown(rows.back()[kTime].as<int64_t>(), kWindowUs);
      if (last > next_window_) {
        page_to = last;
      } else {
        dense = true;
      }
    }
    // A window of more reports than a page (or with a sealed part too
    // large to fetch whole) is read in pieces, on a page of its own.
    int64_t window = next_window_, reports = 0;
    for (const pqxx::row& row : rows) {
      const int64_t t = row[kTime].as<int64_t>();
      if (t >= page_to) break;
      if (AlignDown(t, kWindowUs) != window) {
        window = AlignDown(t, kWindowUs);
        reports = 0;
      }
      if (row[kSealed].is_null()) {
        ++reports;
      } else if (row[kHeadOnly].as<bool>()) {
        reports = kReportsPerPage + 1;
      } else {
        const absl::string_view hex = row[kSealed].c_str();
        absl::StatusOr<int64_t> count =
            SealedReportCount(DecodeByteaHex(hex.substr(0, 2 + 2 * kSealedHeadBytes)));
        if (!count.ok()) {
          return absl::DataLossError(absl::StrCat("sealed row ", row[kId].as<int64_t>(),
                                                  " of agent ", agent_, ": ",
                                                  count.status().message()));
        }
        reports += *count;
      }
      if (reports > kReportsPerPage) {
        if (window > next_window_) {
          page_to = window;
        } else {
          dense = true;
        }
        break;
      }
    }
    if (dense) {
      windows_per_page_ = 1;
      RETURN_IF_ERROR(StartPieces(next_window_));
      continue;
    }
    if (rows.empty()) {  // a gap: skip to the next window with a row
      const std::optional<int64_t> next = NextWindow(page_to);
      next_window_ = next.value_or(to_us_);
      continue;
    }
    for (const pqxx::row& row : rows) {
      if (row[kTime].as<int64_t>() >= page_to) break;
      if (row[kSealed].is_null()) {
        RETURN_IF_ERROR(AddRaw(row, out));
      } else {
        RETURN_IF_ERROR(AddSealed(row[kId].as<int64_t>(), DecodeByteaHex(row[kSealed].c_str()),
                                  kYearOneMicros, kYearTenThousandMicros, out, nullptr));
      }
    }
    next_window_ = page_to;
    // The next page spans as many windows as hold about kReportsPerPage at
    // this page's density.
    const int64_t spanned = std::max<int64_t>(1, (page_to - page_from) / kWindowUs);
    windows_per_page_ = std::clamp<int64_t>(
        spanned * kReportsPerPage / std::max<int64_t>(1, static_cast<int64_t>(out.size())), 1,
        kWindowsPerPage);
    if (Finish(out)) return true;
  }
}

}  // namespace metrics::storage::pg
