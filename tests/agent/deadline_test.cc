// The socket deadline (agent/deadline.h) when its timer fires as the guarded
// operation completes: the timer's handler is already queued when the Deadline
// goes away, and must then touch neither the Deadline nor the socket.
#include "deadline.h"

#include <gtest/gtest.h>

#include <thread>

namespace weft::agent::internal {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// A connected pair of sockets on loopback; `a` is the one a Deadline guards.
class DeadlineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tcp::acceptor acc(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    a.connect(acc.local_endpoint());
    acc.accept(b);
  }
  asio::io_context io;
  tcp::socket a{io}, b{io};
};

TEST_F(DeadlineTest, AHandlerQueuedAfterTheDeadlineIsGoneTouchesNothing) {

  // A read on `a` that nothing will satisfy; only a cancel would end it.
  bool read_done = false;
  boost::system::error_code read_ec;
  uint8_t byte = 0;
  a.async_read_some(asio::buffer(&byte, 1), [&](boost::system::error_code ec, size_t) {
    read_done = true;
    read_ec = ec;
  });

  auto d = std::make_unique<Deadline>(a, std::chrono::milliseconds(0));
  // Queue order (asio's scheduler): the reactor task, then this handler. The
  // next run_one lets the reactor queue the expired timer's handler behind it,
  // then runs it: the Deadline is destroyed while its timer's handler waits.
  asio::post(io, [&] { d.reset(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(io.run_one(), 1u);
  ASSERT_EQ(d, nullptr) << "the posted reset did not run first";
  io.poll();  // the timer's handler, with success: its deadline passed
  EXPECT_FALSE(read_done) << "a deadline that no longer exists cancelled the socket (" << read_ec.message() << ")";
  a.close();
  io.poll();
  EXPECT_TRUE(read_done);
}

TEST_F(DeadlineTest, CancelsThePendingOperationWhenItPasses) {
  boost::system::error_code read_ec;
  uint8_t byte = 0;
  Deadline d(a, std::chrono::milliseconds(20));
  a.async_read_some(asio::buffer(&byte, 1), [&](boost::system::error_code ec, size_t) { read_ec = ec; });
  io.run_for(std::chrono::seconds(2));
  EXPECT_EQ(read_ec, asio::error::operation_aborted);
  EXPECT_TRUE(d.expired());
}

// While `extend` says the socket is busy (a session's sweep runs) the time
// does not run out: nothing is cancelled, and the operation is cancelled one
// period after `extend` first says no.
class DeadlineExtendTest : public DeadlineTest, public ::testing::WithParamInterface<int> {};

TEST_P(DeadlineExtendTest, IsPostponedWhileExtendSaysBusy) {
  const int busy_periods = GetParam();
  int asked = 0;
  boost::system::error_code read_ec;
  bool read_done = false;
  uint8_t byte = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration took{};
  Deadline d(a, std::chrono::milliseconds(20), [&] { return ++asked <= busy_periods; });
  a.async_read_some(asio::buffer(&byte, 1), [&](boost::system::error_code ec, size_t) {
    read_done = true;
    read_ec = ec;
    took = std::chrono::steady_clock::now() - t0;
  });
  io.run_for(std::chrono::seconds(3));
  ASSERT_TRUE(read_done);
  EXPECT_EQ(read_ec, asio::error::operation_aborted);
  EXPECT_TRUE(d.expired());
  EXPECT_EQ(asked, busy_periods + 1);
  EXPECT_GE(took, std::chrono::milliseconds(20 * (busy_periods + 1)));
}

INSTANTIATE_TEST_SUITE_P(Periods, DeadlineExtendTest, ::testing::Values(0, 1, 5));

}  // namespace
}  // namespace weft::agent::internal
