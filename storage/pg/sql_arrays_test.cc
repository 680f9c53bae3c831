// The binary bytea[] parameter against a real PostgreSQL: what the server
// reads is what was sent, for an empty array, empty elements and every
// byte value. And bytea's hex output read back byte for byte, malformed
// text refused.
#include "storage/pg/sql_arrays.h"

#include <pqxx/binarystring>
#include <pqxx/connection>
#include <pqxx/nontransaction>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
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

TEST(DecodeByteaHexTest, ReadsWhatTheServerWrites) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestDatabase> db, TestDatabase::Create());
  pqxx::connection conn(db->url());
  pqxx::nontransaction tx(conn);
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  std::string reused = "left from an earlier row";
  for (const std::string& sent : {std::string(), all_bytes + all_bytes}) {
    const pqxx::result back = tx.exec_params(
        "SELECT $1::bytea", pqxx::binarystring(sent.data(), sent.size()));
    const absl::string_view text(back[0][0].c_str(), back[0][0].size());
    EXPECT_TRUE(DecodeByteaHex(text) == sent);
    ASSERT_TRUE(DecodeByteaHexInto(text, reused));
    EXPECT_TRUE(reused == sent);
  }
  EXPECT_EQ(DecodeByteaHex("\\x0A0b"), "\n\x0b");  // either case
}

TEST(DecodeByteaHexTest, RefusesMalformedText) {
  std::string out = "stale";
  for (absl::string_view text :
       {"", "\\", "0a0b", "\\x0", "\\x0a0", "\\x0g", "\\xg0", "\\x\xff\xff"}) {
    EXPECT_FALSE(DecodeByteaHexInto(text, out)) << text;
    EXPECT_EQ(out, "") << text;
    EXPECT_EQ(DecodeByteaHex(text), "") << text;
  }
}

}  // namespace
}  // namespace metrics::storage::pg
