// SqlDecoderTest: the gtest fixture of tests that hold a decoder written in
// a migration's SQL (metrics_unpack, metrics_unseal) against the C++ one: a
// throwaway database with the real migrations and a connection to it; and
// a double's bits as SQL's float8send gives them, to compare bit for bit.
//
// Thread-safety: test-only; one test at a time.
#ifndef METRICS_STORAGE_PG_TESTING_SQL_DECODER_TEST_H_
#define METRICS_STORAGE_PG_TESTING_SQL_DECODER_TEST_H_

#include <pqxx/connection>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg::test_util {

// A double's bits as float8send gives them: big-endian hex.
inline std::string Float8SendHex(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return absl::StrFormat("%016x", bits);
}

class SqlDecoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<::metrics::test_util::TestDatabase>> db =
        ::metrics::test_util::TestDatabase::Create();
    ASSERT_OK(db);
    db_ = *std::move(db);
    conn_ = std::make_unique<pqxx::connection>(db_->url());
  }

  std::unique_ptr<::metrics::test_util::TestDatabase> db_;
  std::unique_ptr<pqxx::connection> conn_;
};

}  // namespace metrics::storage::pg::test_util

#endif  // METRICS_STORAGE_PG_TESTING_SQL_DECODER_TEST_H_
