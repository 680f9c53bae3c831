// Reading a test's data file as JSON: the shared cases the C++ and Python
// tests both read (client/testdata/*.json).
//
//   const boost::json::value cases = test_util::ReadJsonFile(TESTDATA_DIR "/labels.json");
//
// Thread-safety: test-only; a function of its argument.
#ifndef METRICS_COMMON_TESTING_JSON_FILE_H_
#define METRICS_COMMON_TESTING_JSON_FILE_H_

#include <boost/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace metrics::test_util {

// The file's JSON; a test failure naming the file (and null) when it
// cannot be read, an exception when it is not JSON.
inline boost::json::value ReadJsonFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    ADD_FAILURE() << "cannot read " << path;
    return nullptr;
  }
  std::stringstream text;
  text << file.rdbuf();
  return boost::json::parse(text.str());
}

}  // namespace metrics::test_util

#endif  // METRICS_COMMON_TESTING_JSON_FILE_H_
