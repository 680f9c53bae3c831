#include "bench/peer_http.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace metrics::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;

absl::StatusOr<std::string> PeerRequest(int port, absl::string_view method,
                                        absl::string_view target, std::string body,
                                        absl::Duration timeout) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(absl::ToChronoNanoseconds(timeout));
  beast::error_code error;
  stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"),
                                         static_cast<unsigned short>(port)),
                 error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("connecting to port ", port, ": ", error.message()));
  }
  http::request<http::string_body> request(
      http::string_to_verb({method.data(), method.size()}),
      {target.data(), target.size()}, 11);
  request.set(http::field::host, absl::StrCat("127.0.0.1:", port));
  request.body() = std::move(body);
  request.prepare_payload();
  http::write(stream, request, error);
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);
  beast::flat_buffer buffer;
  if (!error) http::read(stream, buffer, parser, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat(method, " ", target, " on port ",
                                               port, ": ", error.message()));
  }
  const auto& response = parser.get();
  if (response.result_int() / 100 != 2) {
    return absl::InternalError(absl::StrCat(method, " ", target.substr(0, 200),
                                            ": HTTP ", response.result_int(), ": ",
                                            response.body().substr(0, 500)));
  }
  return std::move(parser.release().body());
}

absl::StatusOr<int> FreePort() {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io);
  beast::error_code error;
  acceptor.open(asio::ip::tcp::v4(), error);
  if (!error) {
    acceptor.bind({asio::ip::make_address("127.0.0.1"), 0}, error);
  }
  if (error) return absl::UnavailableError(absl::StrCat("no free port: ", error.message()));
  return acceptor.local_endpoint().port();
}

absl::StatusOr<std::vector<RangeSeries>> ParseQueryRange(absl::string_view text) {
  json::error_code error;
  const json::value root = json::parse({text.data(), text.size()}, error);
  const json::object* object = root.if_object();
  const json::value* data = object ? object->if_contains("data") : nullptr;
  const json::value* result =
      data && data->is_object() ? data->as_object().if_contains("result") : nullptr;
  if (error || result == nullptr || !result->is_array()) {
    return absl::DataLossError(absl::StrCat("not a query_range answer: ",
                                            text.substr(0, 200)));
  }
  std::vector<RangeSeries> series;
  for (const json::value& item : result->as_array()) {
    RangeSeries& s = series.emplace_back();
    if (const json::value* metric = item.as_object().if_contains("metric")) {
      for (const auto& [name, value] : metric->as_object()) {
        if (value.is_string()) s.labels[name] = value.as_string().c_str();
      }
    }
    const json::value* values = item.as_object().if_contains("values");
    if (values == nullptr || !values->is_array()) continue;
    for (const json::value& point : values->as_array()) {
      // [seconds (a number), "value" (a string)]
      const json::array& pair = point.as_array();
      double v = 0;
      if (pair.size() != 2 || !pair[1].is_string() ||
          !absl::SimpleAtod(pair[1].as_string().c_str(), &v)) {
        return absl::DataLossError("a query_range point is not [time, \"value\"]");
      }
      s.time_ms.push_back(std::llround(pair[0].to_number<double>() * 1000));
      s.values.push_back(v);
    }
  }
  return series;
}

std::string UrlEncode(absl::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += absl::StrFormat("%%%02X", c);
    }
  }
  return out;
}

}  // namespace metrics::bench
