// The profiler page's static files (web/), read into memory once at start
// and served by metricsd: "/" is web/index.html; "/ui/<file>" is a file of
// web/src/ (the page's own scripts and styles) or one of uPlot's two
// distribution files from web/node_modules/uplot/dist/ (installed by
// setup.sh with npm); "/ui/config.json" tells the page what the operator
// configured (the Grafana address). Nothing else under the root is
// reachable, so no request path is ever joined to a file path.
//
// The page calls only the public REST API; it needs nothing from the
// network but this server.
//
// Thread-safety: immutable after Create; Serve is thread-safe.
#ifndef METRICS_SERVER_WEB_WEB_ASSETS_H_
#define METRICS_SERVER_WEB_WEB_ASSETS_H_

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/http/http_server.h"

namespace metrics::server {

struct WebAssetsOptions {
  // The web/ folder of the source tree (or its installed copy).
  std::string root;
  // Grafana's base address ("http://localhost:3000"); empty: no link.
  std::string grafana_url;
};

class WebAssets {
 public:
  // Reads every file. NOT_FOUND naming the first missing one (with the
  // command that installs it); INVALID_ARGUMENT for a grafana_url that is
  // not http(s).
  static absl::StatusOr<std::unique_ptr<WebAssets>> Create(
      const WebAssetsOptions& options);

  // The response for a GET or HEAD of `path`, or nullopt when `path` is not
  // one of the page's.
  std::optional<HttpResponse> Serve(const std::string& path) const;

  size_t file_count() const { return files_.size(); }

 private:
  struct File {
    std::string content_type;
    std::string body;
  };

  explicit WebAssets(std::map<std::string, File> files)
      : files_(std::move(files)) {}

  const std::map<std::string, File> files_;  // by request path
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_WEB_WEB_ASSETS_H_
