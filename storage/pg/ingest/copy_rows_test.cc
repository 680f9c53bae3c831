// CopyRows against a real PostgreSQL: every field comes back as written
// (escapes, NULLs, all byte values, timestamps of any year), across the
// pieces a large COPY is sent in; and the fast timestamp text equals
// absl::FormatTime's.
#include "storage/pg/ingest/copy_rows.h"

#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/transaction>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg {
namespace {

using ::metrics::test_util::TestDatabase;

std::string SlowTimestampText(int64_t micros) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%E6S+00",
                          absl::FromUnixMicros(micros), absl::UTCTimeZone());
}

TEST(TimestampTextTest, EqualsFormatTimeForAnyInstant) {
  std::mt19937_64 random(11);
  // 1000-01-01 to 9999-12-31, and beyond (the slow path).
  std::uniform_int_distribution<int64_t> any(-30610224000000000,
                                             253402300799999999);
  std::vector<int64_t> instants = {0, -1, 1, 951782400000000 /* 2000-02-29 */,
                                   -30610224000000000, 253402300799999999,
                                   253402300800000000, 1763800000123456};
  for (int i = 0; i < 200000; ++i) instants.push_back(any(random));
  for (int64_t t : instants) {
    ASSERT_EQ(TimestampText(t), SlowTimestampText(t)) << t;
  }
  // Years before 1000 have four digits: PostgreSQL reads "1-01-01" as 2001.
  EXPECT_EQ(TimestampText(-62135596800000000), "0001-01-01 00:00:00.000000+00");
}

TEST(CopyRowsTest, EveryFieldComesBackAsWritten) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestDatabase> db, TestDatabase::Create());
  pqxx::connection conn(db->url());
  {
    pqxx::nontransaction tx(conn);
    tx.exec("CREATE TABLE copied (id bigint, label text, n bigint, "
            "at timestamptz, bytes bytea)");
  }
  struct Row {
    int64_t id;
    std::string label;
    bool null_n;
    int64_t at;
    std::string bytes;
  };
  std::mt19937_64 random(5);
  std::uniform_int_distribution<int64_t> any_time(-62135596800000000,
                                                  253402300799999999);
  std::vector<Row> rows;
  const std::vector<std::string> labels = {
      "plain", "", "back\\slash", "tab\there", "new\nline", "cr\rhere",
      "\\N", "ünïcode ✓", "trailing\\"};
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  // About 3 MB of COPY text: several pieces.
  for (int64_t i = 0; i < 6000; ++i) {
    rows.push_back({i - 3000, labels[static_cast<size_t>(i) % labels.size()],
                    i % 7 == 0, any_time(random),
                    i % 2 == 0 ? all_bytes : all_bytes.substr(static_cast<size_t>(i) % 256)});
  }
  {
    pqxx::work tx(conn);
    CopyRows copy(tx, "copied", {"id", "label", "n", "at", "bytes"});
    for (const Row& r : rows) {
      copy.Int(r.id).Text(r.label);
      if (r.null_n) {
        copy.Null();
      } else {
        copy.Int(r.id * 1000003);
      }
      copy.Timestamp(r.at).Bytea(r.bytes);
      copy.EndRow();
    }
    copy.Complete();
    tx.commit();
  }
  pqxx::nontransaction tx(conn);
  const pqxx::result back = tx.exec(
      "SELECT id, label, n, (extract(epoch FROM at) * 1000000)::bigint, "
      "encode(bytes, 'hex') FROM copied ORDER BY id");
  ASSERT_EQ(back.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    ASSERT_EQ(back[i][0].as<int64_t>(), r.id);
    EXPECT_EQ(back[i][1].as<std::string>(), r.label) << r.id;
    if (r.null_n) {
      EXPECT_TRUE(back[i][2].is_null()) << r.id;
    } else {
      EXPECT_EQ(back[i][2].as<int64_t>(), r.id * 1000003);
    }
    EXPECT_EQ(back[i][3].as<int64_t>(), r.at) << r.id;
    EXPECT_EQ("\\x" + back[i][4].as<std::string>(), ByteaHex(r.bytes)) << r.id;
  }
}

}  // namespace
}  // namespace metrics::storage::pg
