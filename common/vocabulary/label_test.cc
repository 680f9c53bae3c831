// The label rule on every case of client/testdata/labels.json, the cases
// the server's batch check and both clients' record are tested on too.

#include "common/vocabulary/label.h"

#include <string>

#include "common/testing/json_file.h"
#include "gtest/gtest.h"

namespace metrics::signals {
namespace {

TEST(LabelTest, EveryCaseOfTheSharedTable) {
  const boost::json::value table = test_util::ReadJsonFile(LABEL_CASES);
  ASSERT_FALSE(table.is_null());
  const boost::json::array& cases = table.at("cases").as_array();
  ASSERT_GE(cases.size(), 10u);
  for (const boost::json::value& c : cases) {
    const std::string value(c.at("value").as_string());
    const bool allow_empty = c.as_object().contains("allow_empty");
    const std::string problem = LabelProblem(
        value, static_cast<size_t>(c.at("max").as_int64()), allow_empty);
    SCOPED_TRACE("\"" + value + "\"");
    if (c.as_object().contains("problem")) {
      EXPECT_EQ(problem.rfind(std::string(c.at("problem").as_string()), 0), 0u) << problem;
    } else {
      EXPECT_EQ(problem, "");
    }
  }
}

}  // namespace
}  // namespace metrics::signals
