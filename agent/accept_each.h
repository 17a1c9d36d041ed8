// Internal to the agent (agent.cc, metrics_server.cc): the accept loop both
// servers share.
#pragma once

#include <utility>  // before asio: Boost 1.74's awaitable.hpp uses std::exchange

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string_view>

#include <boost/asio.hpp>
#include <spdlog/spdlog.h>

namespace weft::agent::internal {

// Hands every accepted connection to `take(tcp::socket)` until the acceptor
// is closed. A connection that failed before it was accepted (reset, aborted)
// is skipped at once. When the process is out of descriptors or memory
// (EMFILE, ENFILE, ENOBUFS, ENOMEM: accept(2)) the connection stays queued
// and every accept fails at once, so the loop would spin a core: it waits,
// 5 ms doubling to 1 s while the shortage lasts (as Go's net/http server
// does), with one warning per shortage, and goes on once accept succeeds.
template <class Take>
boost::asio::awaitable<void> accept_each(boost::asio::ip::tcp::acceptor& acceptor, Take take,
                                         std::string_view what = "control") {
  namespace asio = boost::asio;
  using std::chrono::milliseconds;
  milliseconds pause{0};
  asio::steady_timer timer(acceptor.get_executor());
  for (;;) {
    boost::system::error_code ec;
    asio::ip::tcp::socket s = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted) co_return;
    if (!ec) {
      if (pause.count() > 0) spdlog::info("{}: accepting connections again", what);
      pause = milliseconds(0);
      take(std::move(s));
      continue;
    }
    const int e = ec.category() == boost::system::system_category() ? ec.value() : 0;
    if (e != EMFILE && e != ENFILE && e != ENOBUFS && e != ENOMEM) continue;
    if (pause.count() == 0) {
      spdlog::warn("{}: cannot accept a connection: {} (raise the descriptor limit, LimitNOFILE=); retrying",
                   what, ec.message());
    }
    pause = std::clamp(pause * 2, milliseconds(5), milliseconds(1000));
    timer.expires_after(pause);
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!acceptor.is_open()) co_return;
  }
}

}  // namespace weft::agent::internal
