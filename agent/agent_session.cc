// A control connection of the agent (agent_session.h).
#include "agent_session.h"

#include <fmt/format.h>

#include "deadline.h"

namespace weft::agent::internal {

Session::Session(tcp::socket s, int write_timeout, std::size_t max_queued_bytes)
    : sock(std::move(s)), wake(sock.get_executor()), write_timeout_ms(write_timeout), max_queued(max_queued_bytes) {
  boost::system::error_code ec;
  const auto ep = sock.remote_endpoint(ec);
  if (!ec) peer = ep.address();
}

void Session::send(const nlohmann::json& j) {
  if (closed) return;
  out.push_back(sealer ? sealer->seal(j) : frame(j));
  queued += out.back().size();
  if (queued > max_queued) {
    if (on_stalled) on_stalled(fmt::format("left {} bytes unread (more than {})", queued, max_queued));
    close();
    return;
  }
  wake.cancel();
}

asio::awaitable<void> Session::writer() {
  auto self = shared_from_this();
  while (!closed) {
    if (out.empty()) {
      if (close_when_drained) {
        close();
        break;
      }
      wake.expires_at(asio::steady_timer::time_point::max());
      boost::system::error_code ec;
      co_await wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    boost::system::error_code ec;
    bool expired = false;
    {
      Deadline d(sock, write_timeout_ms);
      co_await asio::async_write(sock, asio::buffer(out.front()), asio::redirect_error(asio::use_awaitable, ec));
      expired = d.expired();
    }
    queued -= out.front().size();
    out.pop_front();
    if (expired) {
      // before close(): the reader may see its read cancelled first
      if (on_stalled) on_stalled(fmt::format("took no frame for {} ms", write_timeout_ms));
      close();
    } else if (ec) {
      close();  // the peer is gone (reset, or TCP gave up): its sweeps stop too
    }
  }
}

void Session::close() {
  closed = true;
  cancel->store(true);
  boost::system::error_code ec;
  sock.shutdown(tcp::socket::shutdown_both, ec);
  sock.close(ec);
  wake.cancel();
}

void Session::close_after_flush(int linger_ms) {
  if (closed) return;
  close_when_drained = true;
  cancel->store(true);
  wake.cancel();
  // The timer owns what its handler needs (the session), never a reference.
  auto t = std::make_shared<asio::steady_timer>(sock.get_executor(), std::chrono::milliseconds(linger_ms));
  t->async_wait([self = shared_from_this(), t](boost::system::error_code) { self->close(); });
}

asio::awaitable<Result<std::string>> read_frame(tcp::socket& s, uint32_t max_len, int timeout_ms,
                                                ControlReject* why, std::function<bool()> busy) {
  Deadline d(s, timeout_ms, std::move(busy));
  *why = ControlReject::kCount;
  uint8_t hdr[4];
  boost::system::error_code ec;
  const size_t got = co_await asio::async_read(s, asio::buffer(hdr), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    if (d.expired()) *why = ControlReject::kTimeout;
    else if (got > 0 && ec != asio::error::operation_aborted) *why = ControlReject::kTruncated;
    co_return Result<std::string>(unavailable(d.expired() ? "peer silent" : ec.message()));
  }
  const uint32_t n = frame_length(hdr);
  if (n > max_len) {
    *why = ControlReject::kOversize;
    co_return Result<std::string>(invalid_argument(fmt::format("frame of {} bytes exceeds {}", n, max_len)));
  }
  std::string body(n, '\0');
  co_await asio::async_read(s, asio::buffer(body), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    *why = d.expired() ? ControlReject::kTimeout : ControlReject::kTruncated;
    if (ec == asio::error::operation_aborted && !d.expired()) *why = ControlReject::kCount;  // closed here
    co_return Result<std::string>(unavailable(d.expired() ? "peer silent mid-frame" : ec.message()));
  }
  co_return Result<std::string>(std::move(body));
}

}  // namespace weft::agent::internal
