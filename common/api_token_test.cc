// Token secrets: shape, uniqueness, the hash (a known SHA-256 vector) and
// the constant-time comparison.
#include "common/api_token.h"

#include <set>

#include "absl/strings/escaping.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace metrics::common {
namespace {

TEST(ApiTokenTest, SecretsAreFreshAndOfTheirShape) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_OK_AND_ASSIGN(std::string secret, NewApiTokenSecret());
    EXPECT_EQ(secret.size(), 68u);
    EXPECT_TRUE(LooksLikeApiToken(secret)) << secret;
    EXPECT_TRUE(seen.insert(secret).second) << "repeated: " << secret;
  }
}

TEST(ApiTokenTest, OtherTextIsNotAToken) {
  const std::string good = "mtk_" + std::string(64, 'a');
  EXPECT_TRUE(LooksLikeApiToken(good));
  EXPECT_FALSE(LooksLikeApiToken(""));
  EXPECT_FALSE(LooksLikeApiToken("mtk_"));
  EXPECT_FALSE(LooksLikeApiToken(good.substr(1)));
  EXPECT_FALSE(LooksLikeApiToken(good + "a"));
  EXPECT_FALSE(LooksLikeApiToken("mtk_" + std::string(64, 'A')));
  EXPECT_FALSE(LooksLikeApiToken("mtk_" + std::string(63, 'a') + "g"));
  EXPECT_FALSE(LooksLikeApiToken("xyz_" + std::string(64, 'a')));
}

TEST(ApiTokenTest, HashIsSha256) {
  EXPECT_EQ(absl::BytesToHexString(ApiTokenHash("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(ApiTokenHash("abc").size(), 32u);
}

TEST(ApiTokenTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("same", "same"));
  EXPECT_FALSE(ConstantTimeEquals("same", "samf"));
  EXPECT_FALSE(ConstantTimeEquals("same", "sam"));
}

}  // namespace
}  // namespace metrics::common
