#include "server/web/web_assets.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json_text.h"

namespace metrics::server {

namespace {

// The page loads nothing from elsewhere; the policy makes the browser
// refuse it too. uPlot sets element styles from script, which style-src
// does not govern.
constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'";

std::optional<std::string> ContentType(const std::string& name) {
  if (absl::EndsWith(name, ".html")) return "text/html; charset=utf-8";
  if (absl::EndsWith(name, ".js")) return "text/javascript; charset=utf-8";
  if (absl::EndsWith(name, ".css")) return "text/css; charset=utf-8";
  if (absl::EndsWith(name, ".svg")) return "image/svg+xml";
  return std::nullopt;
}

absl::StatusOr<std::string> ReadWhole(const std::string& path,
                                      absl::string_view hint) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("--web-root: cannot read ", path,
                                            hint));
  }
  std::ostringstream body;
  body << in.rdbuf();
  return body.str();
}

// The names of the servable files directly in `dir`, sorted.
absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("--web-root: no folder ", dir, " (the page's scripts)"));
  }
  std::vector<std::string> names;
  while (const dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name[0] != '.' && ContentType(name).has_value()) names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WebAssets>> WebAssets::Create(
    const WebAssetsOptions& options) {
  if (!options.grafana_url.empty() &&
      !absl::StartsWith(options.grafana_url, "http://") &&
      !absl::StartsWith(options.grafana_url, "https://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grafana-url: \"", options.grafana_url,
        "\" is not an http:// or https:// address"));
  }
  std::map<std::string, File> files;
  const auto add = [&](const std::string& request_path, const std::string& path,
                       absl::string_view hint) -> absl::Status {
    absl::StatusOr<std::string> body = ReadWhole(path, hint);
    if (!body.ok()) return body.status();
    files[request_path] = File{*ContentType(path), *std::move(body)};
    return absl::OkStatus();
  };
  const std::string& root = options.root;
  if (absl::Status s = add("/", root + "/index.html", ""); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> own = ListFiles(root + "/src");
  if (!own.ok()) return own.status();
  for (const std::string& name : *own) {
    if (absl::Status s = add("/ui/" + name, root + "/src/" + name, "");
        !s.ok()) {
      return s;
    }
  }
  constexpr absl::string_view kNpmHint =
      " (uPlot, from npm: run ./setup.sh, or npm ci --prefix web)";
  for (const char* name : {"uPlot.iife.min.js", "uPlot.min.css"}) {
    const std::string path =
        absl::StrCat(root, "/node_modules/uplot/dist/", name);
    if (absl::Status s = add(absl::StrCat("/ui/", name), path, kNpmHint);
        !s.ok()) {
      return s;
    }
  }
  std::string config = "{\"grafanaUrl\":";
  common::AppendJsonString(config, options.grafana_url);
  config += "}";
  files["/ui/config.json"] = File{"application/json", std::move(config)};
  return std::unique_ptr<WebAssets>(new WebAssets(std::move(files)));
}

std::optional<HttpResponse> WebAssets::Serve(const std::string& path) const {
  auto it = files_.find(path == "/ui/" || path == "/ui" ? "/" : path);
  if (it == files_.end()) return std::nullopt;
  HttpResponse response;
  response.content_type = it->second.content_type;
  response.body = it->second.body;
  // The files change only with a new metricsd; revalidating each load is
  // cheap on loopback and never shows a stale page after an upgrade.
  response.headers.emplace_back("Cache-Control", "no-cache");
  response.headers.emplace_back("X-Content-Type-Options", "nosniff");
  response.headers.emplace_back("Content-Security-Policy",
                                kContentSecurityPolicy);
  return response;
}

}  // namespace metrics::server
