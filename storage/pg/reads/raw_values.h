// Reading series' values out of raw `metrics` rows of either stored form:
// packed_values (migration 0004 on, decoded here in C++) or the jsonb of rows
// written before (extracted in SQL by ReportValueSql). A reader adds its
// columns to a SELECT over the profiling partition and decodes each row.
//
// Thread-safety: immutable after construction; use from one transaction's
// thread.
#ifndef METRICS_STORAGE_PG_READS_RAW_VALUES_H_
#define METRICS_STORAGE_PG_READS_RAW_VALUES_H_

#include <pqxx/row>
#include <pqxx/transaction_base>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace metrics::storage::pg {

// The condition (after "trial_id = ... AND") selecting an agent's system
// rows in metrics_profiling so that every plan can use the index
// metrics_profiling_system_idx (trial_id, hashtext(agent_id), end_time)
// WHERE metric_group = 'system'. `agent` is an SQL expression.
std::string SystemRowsOfAgentSql(absl::string_view agent);

class RawValueColumns {
 public:
  struct Series {
    int64_t id = 0;
    std::string name;
    std::string gpu_uuid;
  };

  // `tx` quotes the names into the SQL; it is not kept.
  RawValueColumns(pqxx::transaction_base& tx, const std::vector<Series>& series);

  // The select list to add ("packed_values, <one jsonb value per series>").
  // A prepared statement may write the same columns with parameters in
  // place of the quoted names; Read reads either.
  const std::string& sql() const { return sql_; }

  // Calls found(i, value) for each series i of the constructor's list that
  // has a value in `row`, whose columns of sql() start at `first`.
  // DATA_LOSS when the packed values are corrupt.
  absl::Status Read(const pqxx::row& row, int first,
                    absl::FunctionRef<void(size_t, double)> found) const;

  // The same for values already decoded (ascending series id).
  void Pick(const std::vector<std::pair<int64_t, double>>& values,
            absl::FunctionRef<void(size_t, double)> found) const;

 private:
  std::string sql_;
  std::vector<std::pair<int64_t, size_t>> by_id_;  // sorted (id, index)
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_READS_RAW_VALUES_H_
