#include "bootstrap.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

namespace weft::verbs::internal {
namespace {

constexpr std::uint32_t kHelloMagic = 0x57465648;  // "WFVH"
constexpr std::uint32_t kFrameMagic = 0x57465643;  // "WFVC"
constexpr std::size_t kHelloBytes = 16;
constexpr std::size_t kHeaderBytes = 8;
constexpr int kSocketBuffer = 64 << 10;

void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}
std::uint32_t get32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}

std::string key_of(const coll::TransportConfig& c, int rank) {
  return fmt::format("{}/verbs/addr/{}", c.store_prefix, rank);
}

}  // namespace

std::string endpoint_key(const coll::TransportConfig& config, int from, int to) {
  return fmt::format("{}/verbs/qp/{}/{}", config.store_prefix, from, to);
}

Result<std::vector<coll::tcp::Fd>> connect_mesh(const coll::TransportConfig& config, const std::vector<int>& peers,
                                                const std::string& address, coll::Store& store,
                                                coll::Deadline deadline, std::uint64_t* dropped) {
  coll::tcp::Endpoint bound;
  WEFT_ASSIGN_OR_RETURN(coll::tcp::Fd listener, coll::tcp::listen_on(address, 0, &bound));
  WEFT_RETURN_IF_ERROR(store.set_by(key_of(config, config.rank), bound.to_string(), deadline));
  std::vector<coll::tcp::Fd> fds(peers.size());
  std::size_t lower = 0;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const int p = peers[i];
    if (p < config.rank) {
      ++lower;
      continue;
    }
    WEFT_ASSIGN_OR_RETURN(std::string addr, store.get(key_of(config, p), deadline));
    WEFT_ASSIGN_OR_RETURN(coll::tcp::Endpoint to, coll::tcp::Endpoint::parse(addr));
    auto fd = coll::tcp::connect_to(to, address, 0, kSocketBuffer, deadline);
    if (!fd) return fd.status().with_context(fmt::format("bootstrap connection to rank {}", p));
    std::uint8_t hello[kHelloBytes] = {};
    put32(hello, kHelloMagic);
    put32(hello + 4, static_cast<std::uint32_t>(config.rank));
    put32(hello + 8, static_cast<std::uint32_t>(config.size));
    WEFT_RETURN_IF_ERROR(coll::tcp::write_all(fd->get(), hello, sizeof hello, deadline)
                             .with_context(fmt::format("greeting rank {}", p)));
    fds[i] = std::move(*fd);
  }
  // A connection that is not a peer's (a stray client, a process of
  // another job) is dropped and counted, never fatal; if a peer never
  // arrives, the error says why the last connection was dropped (a peer
  // started with another world size is one).
  const auto take = [&](coll::tcp::Fd& fd, const char* bytes) -> std::string {
    const auto* hello = reinterpret_cast<const std::uint8_t*>(bytes);
    const auto from = static_cast<int>(get32(hello + 4));
    const auto size = static_cast<int>(get32(hello + 8));
    if (get32(hello) != kHelloMagic) return "a connection that is not a weft verbs peer";
    if (size != config.size) return fmt::format("rank {} was started with {} ranks, this rank with {}", from, size, config.size);
    auto it = std::find(peers.begin(), peers.end(), from);
    if (from >= config.rank || it == peers.end() || fds[static_cast<std::size_t>(it - peers.begin())]) {
      return fmt::format("unexpected bootstrap connection from rank {}", from);
    }
    fds[static_cast<std::size_t>(it - peers.begin())] = std::move(fd);
    return "";
  };
  std::uint64_t ignored = 0;
  Status s = coll::tcp::accept_hellos(listener.get(), lower, kHelloBytes, deadline, take, dropped ? dropped : &ignored);
  if (!s) {
    std::string missing;
    for (std::size_t i = 0; i < peers.size(); ++i) {
      if (peers[i] < config.rank && !fds[i]) missing += (missing.empty() ? "" : ", ") + std::to_string(peers[i]);
    }
    return s.with_context(fmt::format("waiting for rank(s) {} to connect", missing));
  }
  return fds;
}

Status exchange_ready(std::span<const int> fds, const std::vector<int>& peers, coll::Deadline deadline) {
  const char ready = 'R';
  for (std::size_t i = 0; i < fds.size(); ++i) {
    WEFT_RETURN_IF_ERROR(coll::tcp::write_all(fds[i], &ready, 1, deadline)
                             .with_context(fmt::format("telling rank {} this rank is ready", peers[i])));
  }
  for (std::size_t i = 0; i < fds.size(); ++i) {
    char got = 0;
    WEFT_RETURN_IF_ERROR(coll::tcp::read_all(fds[i], &got, 1, deadline)
                             .with_context(fmt::format("waiting for rank {} to be ready", peers[i])));
    if (got != ready) return data_loss(fmt::format("rank {} sent {:#x} instead of its ready byte", peers[i], got));
  }
  return ok_status();
}

std::string encode_frame(FrameType type, std::string_view payload) {
  payload = payload.substr(0, kMaxFramePayload);
  std::string out(kHeaderBytes, '\0');
  auto* h = reinterpret_cast<std::uint8_t*>(out.data());
  put32(h, kFrameMagic);
  put32(h + 4, static_cast<std::uint32_t>(type) << 16 | static_cast<std::uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

Result<std::vector<Frame>> FrameReader::read(int fd, bool* eof) {
  *eof = false;
  char chunk[4096];
  for (;;) {
    ssize_t n = ::recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n > 0) {
      buf_.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      *eof = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    if (errno == ECONNRESET) {  // a killed process's socket may reset instead of closing
      *eof = true;
      break;
    }
    return io_error("recv(bootstrap socket)", errno);
  }
  std::vector<Frame> frames;
  while (buf_.size() >= kHeaderBytes) {
    const auto* h = reinterpret_cast<const std::uint8_t*>(buf_.data());
    const std::uint32_t tl = get32(h + 4);
    const std::size_t len = tl & 0xFFFF;
    const auto type = static_cast<FrameType>(tl >> 16);
    if (get32(h) != kFrameMagic || len > kMaxFramePayload || (type != FrameType::kAbort && type != FrameType::kBye)) {
      return data_loss("garbage on the bootstrap socket");
    }
    if (buf_.size() < kHeaderBytes + len) break;
    frames.push_back(Frame{type, buf_.substr(kHeaderBytes, len)});
    buf_.erase(0, kHeaderBytes + len);
  }
  return frames;
}

}  // namespace weft::verbs::internal
