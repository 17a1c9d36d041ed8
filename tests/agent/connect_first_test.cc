// connect_first (agent/controller_internal.h): the watcher's reconnection races
// several sockets, keeps the first that connects and closes the others before
// a byte is sent; it ends with the last error when every attempt failed, and
// with timed_out at its deadline when no SYN is answered.
#include "controller_internal.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace weft::agent::internal {
namespace {

const asio::ip::address kLoopback = asio::ip::make_address("127.0.0.1");

// Runs connect_first on `io` to completion.
boost::system::error_code race(asio::io_context& io, tcp::socket& sock, const tcp::endpoint& to, int attempts,
                               int timeout_ms) {
  std::optional<boost::system::error_code> got;
  asio::co_spawn(io, connect_first(sock, to, attempts, timeout_ms),
                 [&](std::exception_ptr e, boost::system::error_code ec) {
                   if (e) std::rethrow_exception(e);
                   got = ec;
                 });
  io.run();
  io.restart();
  EXPECT_TRUE(got.has_value());
  return got.value_or(asio::error::fault);
}

class ConnectFirst : public ::testing::TestWithParam<int> {};

TEST_P(ConnectFirst, KeepsOneConnectionAndClosesEveryOtherBeforeAByte) {
  const int attempts = std::max(GetParam(), 1);  // 0 makes one attempt
  asio::io_context io;
  tcp::acceptor acc(io, tcp::endpoint(kLoopback, 0));
  tcp::socket sock(io);
  ASSERT_FALSE(race(io, sock, acc.local_endpoint(), attempts, 5000));
  ASSERT_TRUE(sock.is_open());
  const char byte = 'w';
  asio::write(sock, asio::buffer(&byte, 1));
  sock.shutdown(tcp::socket::shutdown_send);
  // One connection carries the byte; every other attempt that reached the
  // listener (a loser may be closed before its handshake ended) ends at once
  // with nothing.
  int with_byte = 0, empty = 0;
  acc.non_blocking(true);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (with_byte + empty < attempts && std::chrono::steady_clock::now() < until) {
    tcp::socket peer(io);
    boost::system::error_code ec;
    acc.accept(peer, ec);
    if (ec == asio::error::would_block) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    ASSERT_FALSE(ec) << ec.message();
    std::string got;
    asio::read(peer, asio::dynamic_buffer(got), ec);
    ASSERT_EQ(ec, asio::error::eof);
    (got == "w" ? with_byte : empty) += 1;
    ASSERT_TRUE(got.empty() || got == "w") << got;
  }
  EXPECT_EQ(with_byte, 1);
  EXPECT_LE(empty, attempts - 1);
}

TEST_P(ConnectFirst, APortNobodyListensOnIsRefusedOnceEveryAttemptFailed) {
  asio::io_context io;
  tcp::endpoint closed;
  {
    tcp::acceptor acc(io, tcp::endpoint(kLoopback, 0));
    closed = acc.local_endpoint();
  }
  tcp::socket sock(io);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(race(io, sock, closed, GetParam(), 5000), asio::error::connection_refused);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << "refused at once, not at the deadline";
  EXPECT_FALSE(sock.is_open());
}

// A listener whose accept queue is full drops every SYN (Linux, with
// tcp_abort_on_overflow off as by default: tcp(7)): no attempt connects and
// the race ends at its deadline.
TEST_P(ConnectFirst, NoAnsweredSynEndsTimedOutAtTheDeadline) {
  asio::io_context io;
  tcp::acceptor acc(io);
  acc.open(tcp::v4());
  acc.bind(tcp::endpoint(kLoopback, 0));
  ASSERT_EQ(::listen(acc.native_handle(), 0), 0);
  // Backlog 0 queues one connection; two fill it for sure.
  std::vector<tcp::socket> fillers;
  for (int i = 0; i < 2; ++i) {  // non-blocking: the second's SYN may be dropped already
    fillers.emplace_back(io);
    fillers.back().open(tcp::v4());
    fillers.back().non_blocking(true);
    // ::connect itself: asio's connect waits for the connection whatever the mode.
    const auto to = acc.local_endpoint();
    (void)::connect(fillers.back().native_handle(), to.data(), static_cast<socklen_t>(to.size()));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  tcp::socket sock(io);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(race(io, sock, acc.local_endpoint(), GetParam(), 300), asio::error::timed_out);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(300));
  EXPECT_LT(took, std::chrono::milliseconds(900)) << "ended at the deadline, not at a SYN retransmission";
  EXPECT_FALSE(sock.is_open());
}

INSTANTIATE_TEST_SUITE_P(Attempts, ConnectFirst, ::testing::Values(0, 1, 2, 3),
                         [](const auto& p) { return "attempts_" + std::to_string(p.param); });

}  // namespace
}  // namespace weft::agent::internal
