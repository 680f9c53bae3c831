// AgentReportScan: one agent's stored system reports in a window of time,
// whatever form holds them (rows of packed values, rows of the jsonb form,
// sealed windows), decoded and in storage order: by time, then by the row
// that holds them (its id; a sealed window keeps the smallest id of the rows
// it took) and the report's place in it. That order is the order of
// ingest for every agent whose reports have distinct times.
//
// Rows are read a page at a time, each page whole windows of
// kSealedWindowSeconds (the rows of a window are sorted together: a late
// raw row may fall between a sealed window's reports), as many as hold
// about 4000 reports, a few MB. A window holding more (an agent reporting
// many times a second: more than a page of raw rows, or a sealed part of
// over 256 KB) is read in pieces of time, each ending where the next of
// its sealed parts starts or a page of its raw rows ends, the parts
// fetched and decoded one at a time: a piece holds about one part, which
// the sealer's memory budget bounds, whatever the window holds.
// A reader that needs one snapshot across pages runs the scan in a
// REPEATABLE READ transaction.
//
// Usage:
//   AgentReportScan scan(tx, trial, agent, series, from_us, to_us, true);
//   std::vector<StoredReport> page;
//   while (true) {
//     ASSIGN_OR_RETURN(bool more, scan.Next(page));
//     if (!more) break;
//     ... page's reports, in order ...
//   }
//
// Thread-safety: thread-compatible; use from the transaction's thread.
#ifndef METRICS_STORAGE_PG_READS_AGENT_REPORTS_H_
#define METRICS_STORAGE_PG_READS_AGENT_REPORTS_H_

#include <pqxx/result>
#include <pqxx/row>
#include <pqxx/transaction_base>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/pg/prepared.h"
#include "storage/pg/reads/raw_values.h"

namespace metrics::storage::pg {

struct StoredReport {
  int64_t time_us = 0;
  int64_t row_id = 0;  // the row holding it
  int32_t index = 0;   // its place in a sealed window; 0 in a raw row
  std::optional<int32_t> batch;  // metrics.total_batches
  // A raw row whose values are not in the rollups yet (packed format 2).
  bool pending = false;
  // (index into the scan's series, value), by series index.
  std::vector<std::pair<size_t, double>> values;

  std::tuple<int64_t, int64_t, int32_t> key() const { return {time_us, row_id, index}; }
};

class AgentReportScan {
 public:
  // The page statement, for pools whose readers pass prepared = true.
  static PreparedStatement Statement();

  // Reports of `agent` in trial `trial_id` with a time in [from_us, to_us),
  // with the values of `series` (the agent's; others are skipped). With
  // `prepared`, the connection has Statement().
  AgentReportScan(pqxx::transaction_base& tx, int32_t trial_id, std::string agent,
                  const std::vector<RawValueColumns::Series>& series, int64_t from_us,
                  int64_t to_us, bool prepared);

  // Only reports whose key() is greater than `after`'s (a cursor).
  void After(std::tuple<int64_t, int64_t, int32_t> after);

  // Replaces `out` with the next reports (one or more whole windows, with
  // at least one report); false, with `out` empty, after the last.
  // DATA_LOSS for a row whose values do not decode.
  absl::StatusOr<bool> Next(std::vector<StoredReport>& out);

 private:
  // A sealed part of a dense window: its id, its first report's time and,
  // once decoded, its last's. (No default member initializers: clang then
  // takes these for not constructible inside the enclosing class, and
  // std::optional<Pieces> with them.)
  struct Part {
    int64_t id;
    int64_t first_us;
    std::optional<int64_t> last_us;
  };
  // A dense window read in pieces: the next starts at `from`.
  struct Pieces {
    int64_t window;
    int64_t from;
    std::vector<Part> parts;
  };

  // The rows of windows [from, to): at most `limit` of them.
  pqxx::result Page(int64_t from, int64_t to, int64_t limit);
  // The start of the first window holding a row at or after `from`, if any.
  std::optional<int64_t> NextWindow(int64_t from);
  // Adds the reports of sealed row `id` with a time in [from, to) (and the
  // scan's span); `last_us`, if given, gets the row's last report's time.
  absl::Status AddSealed(int64_t id, absl::string_view bytes, int64_t from, int64_t to,
                         std::vector<StoredReport>& out, int64_t* last_us);
  // Adds the report of a raw row.
  absl::Status AddRaw(const pqxx::row& row, std::vector<StoredReport>& out);
  // Sorts `out`, drops what is not after the cursor; false when empty.
  bool Finish(std::vector<StoredReport>& out) const;
  // Starts reading `window` in pieces: learns its sealed parts.
  absl::Status StartPieces(int64_t window);
  // The next piece of the window being read in pieces.
  absl::StatusOr<bool> NextPiece(std::vector<StoredReport>& out);

  pqxx::transaction_base& tx_;
  const int32_t trial_id_;
  const std::string agent_;
  const RawValueColumns columns_;
  const int64_t from_us_, to_us_;
  const bool prepared_;
  std::optional<std::tuple<int64_t, int64_t, int32_t>> after_;
  int64_t next_window_;  // where the next page starts
  int64_t windows_per_page_;  // the windows the next page spans at most
  std::optional<Pieces> pieces_;  // a dense window being read in pieces
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_READS_AGENT_REPORTS_H_
