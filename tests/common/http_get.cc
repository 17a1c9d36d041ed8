#include "http_get.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <optional>

namespace weft::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

Result<std::string> http_get(std::string_view host, uint16_t port, std::string_view target,
                             std::chrono::milliseconds timeout) {
  const std::string where = fmt::format("GET {}:{}{}", host, port, target);
  asio::io_context io;
  beast::tcp_stream stream(io);
  http::request<http::empty_body> req{http::verb::get, std::string(target), 11};
  req.set(http::field::host, std::string(host));
  req.set(http::field::connection, "close");
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  std::optional<beast::error_code> failed;
  beast::error_code ec;
  const auto addr = asio::ip::make_address(std::string(host), ec);
  if (ec) return invalid_argument(fmt::format("{}: '{}' is not an IP address", where, host));
  // One deadline for the whole exchange: each async step re-arms it with what is left.
  const auto end = std::chrono::steady_clock::now() + timeout;
  auto arm = [&] { stream.expires_at(end); };
  arm();
  stream.async_connect(asio::ip::tcp::endpoint(addr, port), [&](beast::error_code e) {
    if (e) return void(failed = e);
    arm();
    http::async_write(stream, req, [&](beast::error_code e2, size_t) {
      if (e2) return void(failed = e2);
      arm();
      http::async_read(stream, buf, res, [&](beast::error_code e3, size_t) { failed = e3; });
    });
  });
  io.run();
  if (failed && *failed) return unavailable(fmt::format("{}: {}", where, failed->message()));
  if (res.result() != http::status::ok) {
    return unavailable(fmt::format("{}: HTTP {} '{}'", where, res.result_int(), res.body().substr(0, 80)));
  }
  return std::move(res.body());
}

double prometheus_sample(std::string_view text, std::string_view series) {
  for (size_t at = 0; at < text.size();) {
    const size_t eol = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, eol - at);
    if (line.size() > series.size() && line.substr(0, series.size()) == series && line[series.size()] == ' ') {
      return std::strtod(std::string(line.substr(series.size() + 1)).c_str(), nullptr);
    }
    at = eol + 1;
  }
  return -1;
}

}  // namespace weft::test
