// Internal to the controller (controller.cc, controller_run.cc): agent
// connections and their request helpers.
#pragma once

#include <utility>  // before asio: Boost 1.74's awaitable.hpp uses std::exchange

#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <fmt/format.h>

#include "deadline.h"
#include "weft/agent/channel.h"
#include "weft/agent/control.h"
#include "weft/agent/controller.h"

namespace weft::agent::internal {

namespace asio = boost::asio;
using asio::ip::tcp;
using nlohmann::json;

// WEFT_RETURN_IF_ERROR for coroutines (a coroutine must co_return).
#define WEFT_CO_RETURN_IF_ERROR(expr)                                \
  do {                                                               \
    ::weft::Status weft_status_ = ::weft::internal::as_status(expr); \
    if (!weft_status_.is_ok()) co_return weft_status_;               \
  } while (0)

struct Conn {
  explicit Conn(asio::io_context& io) : sock(io) {}
  HostEntry host;
  int index = 0;
  int64_t host_id = 0;
  tcp::socket sock;
  probe::ProbeStats reflector_before, reflector_after;
  std::string error;
  bool done = false;
  // After the handshake: the sealed channel (channel.h).
  std::optional<Sealer> sealer;
  std::optional<Opener> opener;
  std::string where() const { return fmt::format("agent {} ({}:{})", host.name, host.ip, host.control_port); }
};

// A co_spawn completion handler that hands an exception escaping a
// coroutine to `fail` as a Status. asio::detached drops it, and with it the
// coroutine's own error handling: a run went on as if the coroutine had
// succeeded.
template <typename Fail>
auto on_exception(Fail fail) {
  return [fail = std::move(fail)](std::exception_ptr e) mutable {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      fail(internal_error(fmt::format("unexpected: {}", x.what())));
    } catch (...) {
      fail(internal_error("unexpected exception"));
    }
  };
}

// How long the controller waits for a sweep's next frame before it takes the
// agent for lost: four times the longest a window may take to settle (every
// round's attempts each waiting out the timeout), at least 30 s. In int64_t:
// the largest plan an agent accepts (control.cc decode_campaign: timeout_ms
// 60000, retries 100, probes 1000) gives 2.4e10 ms, past INT_MAX. Capped at
// a day: an agent sends an empty "results" frame every sweep_heartbeat_ms
// (agent.h) while it sweeps, so a longer silence is a lost agent anyway.
inline int sweep_silence_ms(const probe::CampaignPlan& p) {
  constexpr int64_t kFloorMs = 30000, kCapMs = 24LL * 3600 * 1000;
  const int64_t window_ms = int64_t{p.timeout_ms} * (int64_t{p.retries} + 1) * int64_t{p.probes_per_port};
  return static_cast<int>(std::clamp<int64_t>(4 * window_ms, kFloorMs, kCapMs));
}

inline asio::awaitable<Status> write_msg(Conn& c, const json& j, int timeout_ms) {
  const std::string f = c.sealer ? c.sealer->seal(j) : frame(j);
  Deadline d(c.sock, timeout_ms);
  boost::system::error_code ec;
  co_await asio::async_write(c.sock, asio::buffer(f), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return unavailable(fmt::format("{}: sending: {}", c.where(), d.expired() ? "timed out" : ec.message()));
  co_return ok_status();
}

inline asio::awaitable<Result<ControlMessage>> read_msg(Conn& c, int timeout_ms) {
  Deadline d(c.sock, timeout_ms);
  uint8_t hdr[4];
  boost::system::error_code ec;
  co_await asio::async_read(c.sock, asio::buffer(hdr), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    co_return Result<ControlMessage>(unavailable(fmt::format(
        "{}: {}", c.where(), d.expired() ? "no answer in time" : "connection lost (" + ec.message() + ")")));
  }
  const uint32_t n = frame_length(hdr);
  const uint32_t limit = c.opener ? kMaxFrame : kMaxPreAuthFrame;
  if (n > limit) {
    co_return Result<ControlMessage>(data_loss(fmt::format("{}: frame of {} bytes over {}", c.where(), n, limit)));
  }
  std::string body(n, '\0');
  co_await asio::async_read(c.sock, asio::buffer(body), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return Result<ControlMessage>(unavailable(c.where() + ": connection lost mid-frame"));
  if (c.opener) {
    // The agent's frames are sealed like ours: a forged, replayed, reordered or
    // truncated one ends the session (its reason in the message).
    ControlReject why{};
    auto text = c.opener->open(body, &why);
    if (!text) {
      boost::system::error_code ignore;
      c.sock.close(ignore);
      co_return Result<ControlMessage>(Status(text.status().code(),
          fmt::format("{}: control frame rejected ({}): {}", c.where(), control_reject_name(why),
                      text.status().message())));
    }
    body = std::move(*text);
  }
  auto m = parse_control(body);
  if (!m) co_return Result<ControlMessage>(m.status().with_context(c.where()));
  if (m->type == "error") {
    co_return Result<ControlMessage>(
        failed_precondition(fmt::format("{}: {}", c.where(), m->body["message"].get<std::string>())));
  }
  co_return m;
}

inline asio::awaitable<Result<ControlMessage>> expect(Conn& c, const std::string& type, int timeout_ms) {
  auto m = co_await read_msg(c, timeout_ms);
  if (m && m->type != type) {
    co_return Result<ControlMessage>(data_loss(fmt::format("{}: expected '{}', got '{}'", c.where(), type, m->type)));
  }
  co_return m;
}

// Connects `sock` to `to` from `attempts` (at least 1) sockets at once and
// keeps the first that connects. Each socket has its own ephemeral port, so
// under ECMP each SYN hashes onto a path of its own: a reconnection after a
// link failed is lost only if every attempt's path crosses it. The others are
// closed before this side sends a byte, their agent's hello unread (an agent
// counts no rejection for a connection that ends before its first frame:
// agent_session.cc read_frame). The racing sockets are this call's own:
// closing `sock` meanwhile cancels nothing. Returns the error of the last
// attempt that failed (a refusal says more than a timeout), else timed_out.
inline asio::awaitable<boost::system::error_code> connect_first(tcp::socket& sock, const tcp::endpoint& to,
                                                                int attempts, int timeout_ms) {
  // Shared with the handlers, which may run after this returns.
  struct Race {
    explicit Race(const asio::any_io_executor& ex) : done(ex) {}
    std::vector<tcp::socket> socks;
    int pending = 0, winner = -1;
    boost::system::error_code last = asio::error::timed_out;
    asio::steady_timer done;
  };
  attempts = std::max(attempts, 1);
  auto race = std::make_shared<Race>(sock.get_executor());
  for (int i = 0; i < attempts; ++i) race->socks.emplace_back(sock.get_executor());
  race->pending = attempts;
  for (int i = 0; i < attempts; ++i) {
    race->socks[static_cast<size_t>(i)].async_connect(to, [race, i](boost::system::error_code ec) {
      --race->pending;
      if (race->winner >= 0) return;
      if (!ec) {
        race->winner = i;
        race->done.cancel();
      } else {
        race->last = ec;
        if (race->pending == 0) race->done.cancel();
      }
    });
  }
  race->done.expires_after(std::chrono::milliseconds(timeout_ms));
  boost::system::error_code ec;
  co_await race->done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  for (int i = 0; i < attempts; ++i) {
    if (i == race->winner) continue;
    boost::system::error_code ignore;
    race->socks[static_cast<size_t>(i)].close(ignore);  // its handler sees operation_aborted
  }
  if (race->winner < 0) co_return race->last;
  sock = std::move(race->socks[static_cast<size_t>(race->winner)]);
  co_return boost::system::error_code{};
}

// Connects (racing `attempts` sockets for at most `connect_ms`, -1:
// timeout_ms; connect_first), authenticates both ways, switches to the sealed
// channel and sends the host list (`hosts`: every host of the campaign, host
// order).
inline asio::awaitable<Status> connect_and_auth(Conn& c, const probe::MacKey& secret, const std::vector<uint32_t>& hosts,
                                                int timeout_ms, int attempts = 1, int connect_ms = -1) {
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(c.host.ip, ec);
  if (ec) co_return invalid_argument(c.where() + ": bad address");
  ec = co_await connect_first(c.sock, tcp::endpoint(addr, c.host.control_port), attempts,
                              connect_ms < 0 ? timeout_ms : connect_ms);
  if (ec) {
    co_return unavailable(fmt::format("{}: cannot connect: {}", c.where(),
                                      ec == asio::error::timed_out ? "timed out" : ec.message()));
  }
  c.sock.set_option(tcp::no_delay(true));
  auto hello = co_await expect(c, "hello", timeout_ms);
  if (!hello) co_return hello.status();
  if (const int v = peer_version(hello->body); v != kControlVersion) {
    co_return failed_precondition(fmt::format("{}: the agent speaks control protocol version {}, this controller {}: "
                                              "run the same weft version on both", c.where(), v, kControlVersion));
  }
  const std::string agent_nonce = hello->body["nonce"].get<std::string>();
  const std::string nonce = probe::to_hex(probe::random_bytes(16));
  // (GCC 12 rejects braced JSON temporaries inside co_await: build messages first.)
  const json auth = {{"type", "auth"}, {"version", kControlVersion}, {"nonce", nonce},
                     {"mac", client_proof(secret, agent_nonce, nonce)}};
  WEFT_CO_RETURN_IF_ERROR(co_await write_msg(c, auth, timeout_ms));
  auto ok = co_await expect(c, "auth_ok", timeout_ms);
  if (!ok) co_return ok.status().with_context("authentication (is the secret the same on both ends?)");
  if (!proof_matches(agent_proof(secret, nonce, agent_nonce), ok->body["mac"].get<std::string>())) {
    co_return Status(StatusCode::kPermissionDenied, c.where() + ": agent failed to prove it knows the secret");
  }
  const SessionKeys k = session_keys(secret, agent_nonce, nonce);
  c.sealer.emplace(k.to_agent, Direction::kToAgent);
  c.opener.emplace(k.to_controller, Direction::kToController);
  const json list = {{"type", "hosts"}, {"ips", hosts}};
  WEFT_CO_RETURN_IF_ERROR(co_await write_msg(c, list, timeout_ms));
  co_return (co_await expect(c, "ok", timeout_ms)).status();
}

inline asio::awaitable<Result<probe::ProbeStats>> reflector_stats(Conn& c, int timeout_ms) {
  const json req = {{"type", "status"}};
  Status sent = co_await write_msg(c, req, timeout_ms);
  if (!sent) co_return Result<probe::ProbeStats>(sent);
  auto st = co_await expect(c, "status", timeout_ms);
  if (!st) co_return Result<probe::ProbeStats>(st.status());
  co_return decode_stats(st->body.value("reflector", json::object()));
}

inline probe::ProbeStats minus(const probe::ProbeStats& a, const probe::ProbeStats& b) {
  probe::ProbeStats d;
  d.sent = a.sent - b.sent;
  d.answered = a.answered - b.answered;
  d.send_errors = a.send_errors - b.send_errors;
  for (size_t i = 0; i < d.rejected.size(); ++i) d.rejected[i] = a.rejected[i] - b.rejected[i];
  return d;
}


}  // namespace weft::agent::internal
