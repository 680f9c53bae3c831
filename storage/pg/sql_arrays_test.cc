// The binary bytea[] parameter against a real PostgreSQL: what the server
// reads is what was sent, for an empty array, empty elements and every
// byte value.
#include "storage/pg/sql_arrays.h"

#include <pqxx/binarystring>
#include <pqxx/connection>
#include <pqxx/nontransaction>

#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg {
namespace {

using ::metrics::test_util::TestDatabase;

TEST(ByteaArrayBinaryTest, TheServerReadsWhatWasSent) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestDatabase> db, TestDatabase::Create());
  pqxx::connection conn(db->url());
  pqxx::nontransaction tx(conn);
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  const std::vector<std::vector<std::string>> cases = {
      {}, {""}, {all_bytes}, {"a", "", std::string(70000, '\x01'), all_bytes}};
  for (const std::vector<std::string>& sent : cases) {
    const pqxx::binarystring param(ByteaArrayBinary(sent));
    EXPECT_EQ(tx.exec_params("SELECT cardinality($1::bytea[])", param)[0][0]
                  .as<size_t>(),
              sent.size());
    const pqxx::result back = tx.exec_params(
        "SELECT encode(e, 'hex') FROM unnest($1::bytea[]) WITH ORDINALITY "
        "AS u(e, n) ORDER BY n",
        param);
    ASSERT_EQ(back.size(), sent.size());
    for (size_t i = 0; i < sent.size(); ++i) {
      // Compared as booleans: an element is up to 70 000 bytes.
      EXPECT_TRUE("\\x" + back[i][0].as<std::string>() == ByteaHex(sent[i]))
          << "element " << i << " of " << sent.size();
    }
  }
}

}  // namespace
}  // namespace metrics::storage::pg
