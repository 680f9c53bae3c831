#include "common/utf8.h"

#include "gtest/gtest.h"

namespace metrics::common {
namespace {

TEST(Utf8Test, AcceptsWellFormedText) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("gpu_util"));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9"));                 // é
  EXPECT_TRUE(IsValidUtf8("\xE2\x82\xAC"));                // €
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x98\x80"));            // U+1F600
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));            // U+10FFFF
  EXPECT_TRUE(IsValidUtf8(absl::string_view("a\0b", 3)));  // NUL is UTF-8
}

TEST(Utf8Test, RefusesMalformedText) {
  EXPECT_FALSE(IsValidUtf8("\xFF\xFE"));
  EXPECT_FALSE(IsValidUtf8("\x80"));              // lone continuation
  EXPECT_FALSE(IsValidUtf8("caf\xC3"));           // truncated
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));          // truncated €
  EXPECT_FALSE(IsValidUtf8("\xE2\x28\xA1"));      // bad continuation
}

}  // namespace
}  // namespace metrics::common
