// Internal to the agent (agent.cc, metrics_server.cc): the accept loop both
// servers share.
#pragma once

#include <utility>  // before asio: Boost 1.74's awaitable.hpp uses std::exchange

#include <boost/asio.hpp>

namespace weft::agent::internal {

// Hands every accepted connection to `take(tcp::socket)` until the acceptor
// is closed; an accept that fails otherwise (a peer that reset before it was
// accepted, no descriptor left) is skipped and the loop goes on.
template <class Take>
boost::asio::awaitable<void> accept_each(boost::asio::ip::tcp::acceptor& acceptor, Take take) {
  namespace asio = boost::asio;
  for (;;) {
    boost::system::error_code ec;
    asio::ip::tcp::socket s = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted) co_return;
    if (!ec) take(std::move(s));
  }
}

}  // namespace weft::agent::internal
