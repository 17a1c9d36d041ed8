// Bootstrap of the verbs transport (internal). The QPs' endpoint records
// (QPN, PSN, GID, MTU, receive depth) go through the rendezvous store; one
// TCP socket per pair of ranks, found through the store too, carries the
// "ready" barrier at setup and then only control frames and liveness.
//
// Who connects: the lower rank of a pair connects to the higher one's
// listening socket and introduces itself (Hello); the higher one accepts.
// Every rank publishes its address before it reads anyone's and connects
// before it accepts, and connect() completes against the listen backlog, so
// no order of ranks can wait on each other in a cycle.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tcp/socket.h"
#include "weft/collectives/store.h"
#include "weft/collectives/transport.h"

namespace weft::verbs::internal {

// Where rank `from` publishes the endpoint record of its QP to rank `to`.
std::string endpoint_key(const coll::TransportConfig& config, int from, int to);

// Sockets to `peers`, in the order of `peers`, connected and identified.
// `address` is where this rank listens (IPv4). Connections that are not a
// peer's are dropped (tcp::accept_hellos) and counted in *dropped if given.
Result<std::vector<coll::tcp::Fd>> connect_mesh(const coll::TransportConfig& config, const std::vector<int>& peers,
                                                const std::string& address, coll::Store& store,
                                                coll::Deadline deadline, std::uint64_t* dropped = nullptr);

// One byte each way on every socket: returns when every peer has reached
// the same point (its QPs are ready to receive).
Status exchange_ready(std::span<const int> fds, const std::vector<int>& peers, coll::Deadline deadline);

// Control frames after setup: a 8-byte header (magic, type, length, big-
// endian) and at most kMaxFramePayload bytes.
enum class FrameType : std::uint16_t { kAbort = 1, kBye = 2 };
inline constexpr std::size_t kMaxFramePayload = 1024;
struct Frame {
  FrameType type;
  std::string payload;
};
std::string encode_frame(FrameType type, std::string_view payload);

// Reads whatever a non-blocking socket holds and returns the frames it
// completed. *eof is set when the peer closed its end. Garbage or a socket
// error is an error.
class FrameReader {
 public:
  Result<std::vector<Frame>> read(int fd, bool* eof);

 private:
  std::string buf_;
};

}  // namespace weft::verbs::internal
