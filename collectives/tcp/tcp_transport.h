// TCP transport: non-blocking sockets and one epoll set per transport, driven
// by the calling thread inside post/poll/wait (no I/O thread: a wait spins
// briefly on epoll_wait(0), then blocks until the deadline).
//
// Connections: one per direction and peer (x connections_per_peer). The
// data of a -> b rides only on the connection a opened to b, so its 5-tuple
// (a's planned source port -> b's listen port) is what the route plan chose,
// and the reverse direction of that connection carries ACKs alone
// (routing/weft/routing/plan.h).
//
// Connections are made at setup for TransportConfig::connect_at_setup and
// later on demand (Transport::connect_peers, tcp_connect.cc); connections
// are accepted as they arrive, whichever peer they come from.
//
// Wire: every message is a 16-byte Header then the payload. Large messages
// (>= 256 KiB) are striped over the connections of a pair, part j on
// connection j; the receiver computes the same split from the length.
//   kData   payload = the bytes of one send()
//   kAbort  payload = a one-line reason; the receiver fails every call
//           naming the sender (a peer that gave up tells everyone at once)
//   kBye    clean shutdown; EOF without it means the peer died
//   kStall  no payload; `arg` = whom the notice's origin waits on + 1,
//           `len` = the origin + 1 (0: the sender itself; a relayed notice
//           names its origin): a stall notice (transport.h). It travels on
//           the reverse direction of the connection the receiver opened,
//           which carries nothing else, so it never waits behind data the
//           receiver has not asked for.
//   kSwitch no payload; `arg` = the origin + 1, `len` = a plan epoch: an
//           in-call plan switch (tcp_rebuild.cc), on the same reverse
//           direction as kStall, passed on once by each rank.
// Each connection opens with a 24-byte Hello: who, which connection, and
// the generation (in-call switches so far); tcp_rebuild.cc says why.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "weft/collectives/transport.h"

namespace weft::coll::tcp {

struct ConnectionPorts {
  bool outgoing;  // true: this rank opened it (carries data to the peer)
  uint16_t local_port;
  uint16_t remote_port;
  std::string congestion_control;  // TCP_CONGESTION of the socket
  // SO_COOKIE (socket(7)): unique per socket while the system runs, so a
  // connection made again (a new plan epoch) shows another.
  uint64_t cookie = 0;
};

// The TCP transport's extra surface, for tests and diagnostics.
class TcpTransportInfo {
 public:
  virtual ~TcpTransportInfo() = default;
  // getsockname/getpeername (and the congestion control) of every
  // connection to `peer`.
  virtual std::vector<ConnectionPorts> connection_ports(int peer) const = 0;
  virtual uint16_t listen_port() const = 0;
  // Payload bytes sent from the callers' pages so far (TcpOptions::
  // splice_min_bytes): 0 where held sends were all copied.
  virtual uint64_t spliced_bytes() const = 0;
  // Sockets this transport holds open: the listening one, every
  // connection, accepted ones whose hello is still due, outgoing ones of
  // the previous plan epoch (tcp_reroute.cc). Read it while no
  // other thread is inside the transport.
  virtual int socket_count() const = 0;
  // Connections to the listening port that were not a peer's (a bad or no
  // hello) and were dropped during setup.
  virtual uint64_t dropped_connections() const = 0;
};

Result<std::unique_ptr<Transport>> make_tcp_transport(const TransportConfig& config, Store& store,
                                                      Deadline deadline);

}  // namespace weft::coll::tcp
