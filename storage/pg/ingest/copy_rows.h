// Rows for COPY ... FROM STDIN (text format), written into one buffer and
// sent in pieces of 64 KB. libpqxx's stream_to formats and
// escapes every field character by character and sends each row alone: in
// the bulk ingest benchmark that was a sixth of the writer's time, for
// fields that need almost no escaping (numbers, hex, printable labels).
//
// Thread-safety: thread-compatible; lives within one transaction.
#ifndef METRICS_STORAGE_PG_INGEST_COPY_ROWS_H_
#define METRICS_STORAGE_PG_INGEST_COPY_ROWS_H_

#include <pqxx/tablewriter>
#include <pqxx/transaction_base>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace metrics::storage::pg {

class CopyRows {
 public:
  // Starts COPY into `columns` of `table` in `tx`. Throws libpqxx's
  // exceptions (callers run under GuardPg).
  CopyRows(pqxx::transaction_base& tx, const std::string& table,
           const std::vector<std::string>& columns);
  ~CopyRows();

  // The fields of a row, in column order.
  CopyRows& Int(int64_t value);
  CopyRows& Text(absl::string_view text);
  CopyRows& Null();
  CopyRows& Timestamp(int64_t micros);  // a timestamptz
  CopyRows& Bytea(absl::string_view bytes);
  void EndRow();

  // Sends what is left and ends the COPY.
  void Complete();

 private:
  void StartField();
  void Send();

  std::unique_ptr<pqxx::tablewriter> writer_;
  std::string buffer_;
  bool first_field_ = true;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_INGEST_COPY_ROWS_H_
