// Internal to agent/: a deadline for the pending operations of one socket.
#pragma once

#include <utility>  // before asio: Boost 1.74's awaitable.hpp uses std::exchange

#include <chrono>
#include <memory>

#include <boost/asio.hpp>

namespace weft::agent::internal {

// Cancels `sock`'s pending operations when `ms` pass before the Deadline is
// destroyed; expired() says whether that happened.
//
// Lifetime: a timer that has already fired has its handler queued, and
// cancel() cannot take it back (basic_waitable_timer::cancel: handlers of an
// expired timer "have already been invoked; or have been queued for invocation
// in the near future"). So the handler must not capture `this`, locals or the
// socket by reference: it shares a small State with the Deadline, and the
// destructor marks it finished, after which the handler touches nothing. The
// socket outlives the Deadline (the caller's operation runs on it), and timer
// and socket complete on one thread (a single io_context::run), so a handler
// that sees the State unfinished sees a live socket.
class Deadline {
 public:
  Deadline(boost::asio::ip::tcp::socket& sock, std::chrono::milliseconds ms)
      : timer_(sock.get_executor()), state_(std::make_shared<State>()) {
    state_->sock = &sock;
    timer_.expires_after(ms);
    timer_.async_wait([st = state_](boost::system::error_code ec) {
      if (ec || st->finished) return;
      st->expired = true;
      boost::system::error_code ignore;
      st->sock->cancel(ignore);
    });
  }
  Deadline(boost::asio::ip::tcp::socket& sock, int ms) : Deadline(sock, std::chrono::milliseconds(ms)) {}
  ~Deadline() {
    state_->finished = true;
    timer_.cancel();
  }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;
  bool expired() const { return state_->expired; }

 private:
  struct State {
    boost::asio::ip::tcp::socket* sock = nullptr;
    bool expired = false;
    bool finished = false;
  };
  boost::asio::steady_timer timer_;
  std::shared_ptr<State> state_;
};

}  // namespace weft::agent::internal
