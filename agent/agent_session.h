// Internal to the agent (agent.cc, agent_session.cc): one control connection
// and the frame reader.
#pragma once

#include <utility>  // before asio: Boost 1.74's awaitable.hpp uses std::exchange

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include "weft/agent/channel.h"
#include "weft/agent/control.h"
#include "weft/probe/skip_set.h"

namespace weft::agent::internal {

namespace asio = boost::asio;
using asio::ip::tcp;

// One control connection. Everything but `cancel` is touched only on the io
// thread. Frames leave through one writer coroutine in the order send() queued
// them, so the sealer's counters match the order on the wire.
//
// A peer that stops reading cannot make the agent hoard: a frame the socket
// does not take within `write_timeout_ms`, or more than `max_queued` bytes
// waiting for it, closes the session and calls `on_stalled` with why
// (counted as not_reading). A peer that reads, however slowly, and keeps
// up with less than `max_queued` behind is never closed for it: results
// have no other flow control.
struct Session : std::enable_shared_from_this<Session> {
  Session(tcp::socket s, int write_timeout_ms, std::size_t max_queued);

  tcp::socket sock;
  asio::ip::address peer;
  asio::steady_timer wake;  // the writer sleeps on it while `out` is empty
  std::deque<std::string> out;
  std::size_t queued = 0;  // bytes in `out`
  int write_timeout_ms;
  std::size_t max_queued;
  std::function<void(const std::string& why)> on_stalled;
  bool closed = false;
  bool close_when_drained = false;
  std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);  // sweeps watch it
  // Sweeps of this session still running (counted on the io thread): the
  // controller sends nothing while it waits for their results, so the
  // session is not idle meanwhile, nor for `idle` after the last one ended.
  int sweeps_running = 0;
  std::chrono::steady_clock::time_point last_sweep_end{};
  void sweep_ended() {
    --sweeps_running;
    last_sweep_end = std::chrono::steady_clock::now();
  }
  bool busy_within(std::chrono::milliseconds idle) const {
    return sweeps_running > 0 || std::chrono::steady_clock::now() - last_sweep_end < idle;
  }

  // Admission (agent.cc): strangers are unauthenticated sessions, oldest first.
  bool stranger = false;
  bool authenticated = false;
  std::list<std::shared_ptr<Session>>::iterator stranger_pos;

  // After the handshake: the sealed channel and the controller's host list.
  std::optional<Sealer> sealer;
  std::optional<Opener> opener;
  std::optional<std::unordered_set<uint32_t>> hosts;
  // Resume: the skip set of the next campaign of skip_run, as its "skip"
  // frames arrive (control.h).
  uint32_t skip_run = 0;
  uint32_t skip_frames = 0;
  probe::SkipSet skip;

  // Queues a frame: sealed once the channel is up, plain JSON before.
  void send(const nlohmann::json& j);
  asio::awaitable<void> writer();
  void close();
  // Lets the writer flush what is queued (a last "error"), then closes; at most
  // `linger_ms` later it closes regardless.
  void close_after_flush(int linger_ms);
};

// Reads one frame of at most `max_len` bytes within `timeout_ms`; the length
// is checked before anything is allocated. On failure *why is the reason to
// count (kTimeout, kOversize, kTruncated) or kCount when there is none: the
// peer closed between frames, or the session was closed here. While `busy`
// (if given) says true, the time does not run out.
asio::awaitable<Result<std::string>> read_frame(tcp::socket& s, uint32_t max_len, int timeout_ms,
                                                ControlReject* why, std::function<bool()> busy = {});

}  // namespace weft::agent::internal
