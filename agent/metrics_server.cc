// MetricsServer (metrics_server.h) on Boost.Beast and Asio C++20 coroutines:
// one coroutine per connection, keep-alive as Prometheus uses it, every read
// under a deadline (beast::tcp_stream::expires_after).
#include <utility>  // before asio: Boost 1.74's awaitable.hpp uses std::exchange

#include "weft/agent/metrics_server.h"

#include <list>
#include <memory>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "accept_each.h"
#include "weft/agent/metrics.h"

namespace weft::agent {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

constexpr uint32_t kMaxHeaderBytes = 8192;

http::response<http::string_body> respond(const http::request<http::empty_body>& req,
                                          const MetricsServer::Render& render) {
  http::response<http::string_body> res;
  res.version(req.version());
  res.keep_alive(req.keep_alive());
  res.set(http::field::server, "weft-agent");
  const bool head = req.method() == http::verb::head;
  if (req.method() != http::verb::get && !head) {
    res.result(http::status::method_not_allowed);
    res.set(http::field::allow, "GET, HEAD");
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = "only GET and HEAD\n";
  } else if (req.target() == "/metrics") {
    res.result(http::status::ok);
    res.set(http::field::content_type, std::string(kMetricsContentType));
    res.body() = render();
  } else if (req.target() == "/") {
    res.result(http::status::ok);
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = "weft agent: metrics at /metrics\n";
  } else {
    res.result(http::status::not_found);
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = "not found; metrics are at /metrics\n";
  }
  res.prepare_payload();
  if (head) res.body().clear();  // Content-Length stays that of the GET
  return res;
}

}  // namespace

struct MetricsServer::Impl {
  MetricsServerConfig cfg;
  Render render;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  struct Conn {
    explicit Conn(tcp::socket s) : stream(std::move(s)) {}
    beast::tcp_stream stream;
    std::list<std::shared_ptr<Conn>>::iterator pos;
    bool listed = false;
  };
  std::list<std::shared_ptr<Conn>> conns;  // oldest first; io thread only
  std::thread thread;

  void unlist(Conn& c) {
    if (!c.listed) return;
    conns.erase(c.pos);
    c.listed = false;
  }

  // At the limit a new connection closes the oldest: clients that connect and
  // stay idle cannot lock a scrape out (they were closed on accept instead),
  // and a scrape, which takes milliseconds, is cut only by max_connections
  // newer connections within it.
  asio::awaitable<void> accept_loop() {
    return internal::accept_each(acceptor, [this](tcp::socket s) {
      if (static_cast<int>(conns.size()) >= cfg.max_connections) {
        const std::shared_ptr<Conn> oldest = conns.front();
        unlist(*oldest);
        boost::system::error_code ignore;
        oldest->stream.socket().close(ignore);  // its serve() ends with operation_aborted
      }
      auto c = std::make_shared<Conn>(std::move(s));
      c->pos = conns.insert(conns.end(), c);
      c->listed = true;
      asio::co_spawn(io, serve(c), [this, c](std::exception_ptr) { unlist(*c); });
    }, "metrics");
  }

  asio::awaitable<void> serve(std::shared_ptr<Conn> conn) {
    beast::tcp_stream& stream = conn->stream;
    beast::flat_buffer buf(kMaxHeaderBytes);
    for (;;) {
      http::request_parser<http::empty_body> parser;
      parser.header_limit(kMaxHeaderBytes);
      parser.body_limit(0);
      boost::system::error_code ec;
      stream.expires_after(std::chrono::milliseconds(cfg.idle_timeout_ms));
      co_await http::async_read(stream, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;  // closed, timed out, oversize or malformed
      const auto res = respond(parser.get(), render);
      stream.expires_after(std::chrono::milliseconds(cfg.idle_timeout_ms));
      co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
      if (ec || !res.keep_alive()) break;
    }
    boost::system::error_code ignore;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignore);
  }
};

MetricsServer::MetricsServer() : impl_(std::make_unique<Impl>()) {}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const MetricsServerConfig& cfg, Render render) {
  std::unique_ptr<MetricsServer> srv(new MetricsServer());
  Impl& m = *srv->impl_;
  m.cfg = cfg;
  m.render = std::move(render);
  if (cfg.idle_timeout_ms < 1 || cfg.max_connections < 1) {
    return invalid_argument(fmt::format("metrics server: idle timeout {} ms and connections {} must be >= 1",
                                        cfg.idle_timeout_ms, cfg.max_connections));
  }
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(cfg.ip, ec);
  if (ec) return invalid_argument(fmt::format("metrics address '{}' is not an IP address", cfg.ip));
  const tcp::endpoint ep(addr, cfg.port);
  m.acceptor.open(ep.protocol(), ec);
  if (!ec) m.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(ep, ec);
  if (!ec) m.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return unavailable(fmt::format("metrics endpoint {}:{}: {}", cfg.ip, cfg.port, ec.message()));
  asio::co_spawn(m.io, m.accept_loop(), asio::detached);
  m.thread = std::thread([&m] { m.io.run(); });
  return srv;
}

MetricsServer::~MetricsServer() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

uint16_t MetricsServer::port() const { return impl_->acceptor.local_endpoint().port(); }

}  // namespace weft::agent
