// A throwaway database for a test, on the PostgreSQL server the libpq PG*
// variables name (for example one started by pg_virtualenv): empty (from
// template0), or with the real migrations applied, copied from a database
// the first such test on the server migrated (metrics_test_template_<hash
// of the migrations>, kept for the server's life). Dropped when the object
// dies unless $METRICS_KEEP_TEST_DB is set.
//
// Usage:
//   ASSERT_OK_AND_ASSIGN(auto db, TestDatabase::Create());
//   ... connect to db->url() ...
//
// Thread-safety: thread-compatible.
#ifndef METRICS_TESTS_TESTING_TEST_DATABASE_H_
#define METRICS_TESTS_TESTING_TEST_DATABASE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace metrics::test_util {

struct TestDatabaseOptions {
  // Apply every embedded migration after creating the database.
  bool migrate = true;
};

class TestDatabase {
 public:
  // Creates metrics_test_<pid>_<random>. The error says to run under
  // pg_virtualenv when no server answers.
  static absl::StatusOr<std::unique_ptr<TestDatabase>> Create(
      TestDatabaseOptions options = {});
  ~TestDatabase();

  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;

  // A libpq connection string for the database.
  const std::string& url() const { return url_; }
  const std::string& name() const { return name_; }

 private:
  TestDatabase(std::string name, std::string url)
      : name_(std::move(name)), url_(std::move(url)) {}

  std::string name_;
  std::string url_;
};

}  // namespace metrics::test_util

#endif  // METRICS_TESTS_TESTING_TEST_DATABASE_H_
