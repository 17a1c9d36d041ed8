// Internal to agent/: a deadline for the pending operations of one socket.
#pragma once

#include <utility>  // before asio: Boost 1.74's awaitable.hpp uses std::exchange

#include <chrono>
#include <functional>
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
  // `extend`, if given, is asked when the time is up: while it says true the
  // operations go on for another `ms` (a session busy with a sweep is not
  // idle), and the socket is never cancelled meanwhile, so no other pending
  // operation on it (a write) is disturbed.
  Deadline(boost::asio::ip::tcp::socket& sock, std::chrono::milliseconds ms, std::function<bool()> extend = {})
      : state_(std::make_shared<State>(sock, ms, std::move(extend))) {
    arm(state_);
  }
  Deadline(boost::asio::ip::tcp::socket& sock, int ms, std::function<bool()> extend = {})
      : Deadline(sock, std::chrono::milliseconds(ms), std::move(extend)) {}
  ~Deadline() {
    state_->finished = true;
    state_->timer.cancel();
  }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;
  bool expired() const { return state_->expired; }

 private:
  struct State {
    State(boost::asio::ip::tcp::socket& s, std::chrono::milliseconds m, std::function<bool()> e)
        : sock(&s), ms(m), extend(std::move(e)), timer(s.get_executor()) {}
    boost::asio::ip::tcp::socket* sock;
    std::chrono::milliseconds ms;
    std::function<bool()> extend;
    boost::asio::steady_timer timer;
    bool expired = false;
    bool finished = false;
  };
  // The handler holds the State (and so the timer) until it has run.
  static void arm(const std::shared_ptr<State>& st) {
    st->timer.expires_after(st->ms);
    st->timer.async_wait([st](boost::system::error_code ec) {
      if (ec || st->finished) return;
      if (st->extend && st->extend()) {
        arm(st);
        return;
      }
      st->expired = true;
      boost::system::error_code ignore;
      st->sock->cancel(ignore);
    });
  }
  std::shared_ptr<State> state_;
};

}  // namespace weft::agent::internal
