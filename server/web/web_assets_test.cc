#include "server/web/web_assets.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Pair;

// A web root laid out as web/ is after setup.sh, in a temporary folder.
class WebAssetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/web_assets_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
    Write("index.html", "<!doctype html><title>page</title>");
    Write("src/main.js", "import './api.js';");
    Write("src/app.css", "body {}");
    Write("src/notes.txt", "not served");
    Write("node_modules/uplot/dist/uPlot.iife.min.js", "var uPlot;");
    Write("node_modules/uplot/dist/uPlot.min.css", ".uplot {}");
    Write("node_modules/uplot/package.json", "{}");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Write(const std::string& relative, const std::string& text) {
    const std::filesystem::path path = std::filesystem::path(root_) / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  std::string root_;
};

TEST_F(WebAssetsTest, ServesThePageItsScriptsAndUplotOnly) {
  ASSERT_OK_AND_ASSIGN(auto web, WebAssets::Create({root_, ""}));
  std::optional<HttpResponse> index = web->Serve("/");
  ASSERT_TRUE(index.has_value());
  EXPECT_EQ(index->body, "<!doctype html><title>page</title>");
  EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
  EXPECT_THAT(index->headers,
              Contains(Pair("Content-Security-Policy", HasSubstr("default-src 'self'"))));
  ASSERT_TRUE(web->Serve("/ui/").has_value());
  EXPECT_EQ(web->Serve("/ui/").value().body, index->body);

  std::optional<HttpResponse> script = web->Serve("/ui/main.js");
  ASSERT_TRUE(script.has_value());
  EXPECT_EQ(script->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(script->body, "import './api.js';");
  EXPECT_EQ(web->Serve("/ui/uPlot.iife.min.js").value().body, "var uPlot;");
  EXPECT_EQ(web->Serve("/ui/uPlot.min.css").value().content_type,
            "text/css; charset=utf-8");

  // Only the listed files: no other extension, no path into the root.
  EXPECT_FALSE(web->Serve("/ui/notes.txt").has_value());
  EXPECT_FALSE(web->Serve("/ui/../index.html").has_value());
  EXPECT_FALSE(web->Serve("/ui/src/main.js").has_value());
  EXPECT_FALSE(web->Serve("/node_modules/uplot/package.json").has_value());
  EXPECT_FALSE(web->Serve("/api/v1/trials").has_value());
  // index.html, 2 scripts, 2 of uPlot's and config.json.
  EXPECT_EQ(web->file_count(), 6u);
}

TEST_F(WebAssetsTest, ConfigCarriesTheGrafanaAddress) {
  ASSERT_OK_AND_ASSIGN(auto web,
                       WebAssets::Create({root_, "http://grafana:3000/\"x"}));
  std::optional<HttpResponse> config = web->Serve("/ui/config.json");
  ASSERT_TRUE(config.has_value());
  EXPECT_EQ(config->content_type, "application/json");
  EXPECT_EQ(config->body, "{\"grafanaUrl\":\"http://grafana:3000/\\\"x\"}");

  EXPECT_THAT(WebAssets::Create({root_, "grafana:3000"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--grafana-url: \"grafana:3000\" is not an "
                                 "http:// or https:// address")));
}

TEST_F(WebAssetsTest, MissingFilesAreNamedWithTheFix) {
  std::filesystem::remove_all(std::filesystem::path(root_) / "node_modules");
  EXPECT_THAT(WebAssets::Create({root_, ""}),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("uPlot.iife.min.js (uPlot, from npm: run "
                                 "./setup.sh, or npm ci --prefix web)")));
  EXPECT_THAT(WebAssets::Create({root_ + "/nowhere", ""}),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("/nowhere/index.html")));
}

}  // namespace
}  // namespace metrics::server
