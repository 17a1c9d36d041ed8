// The verbs transport: weft::coll::Transport over RoCE v2 RC queue pairs
// (make_transport("verbs"), registered by weft::collectives when built with
// rdma-core; programs link weft::collectives as for any other transport).
//
// Per peer: one RC QP (connection.h: receive-driven, a recv is a credit
// carrying address/rkey/length, a send an RDMA WRITE WITH IMMEDIATE into it)
// and one TCP bootstrap socket. The QPs' endpoint records (QPN, PSN, GID,
// MTU, receive depth) are swapped through the rendezvous store; the socket
// carries a ready barrier at setup, then only control frames: "abort" (with
// the reason: the peer fails every call naming this rank) and "bye" (clean
// shutdown). End-of-file
// without "bye" means the peer died: rxe and many NICs raise no completion
// error for a dead peer while nothing is outstanding, the socket always
// tells. Routes: TransportConfig::routes[peer].sport becomes the QP's UDP
// source port (flow label at RTR, source_port.h; 49152..65535).
//
// Options: TransportConfig::verbs (coll::VerbsOptions: device or device
// list, port, GID index, queue depth, spin polls, ACK timeout), set through
// CommConfig::verbs.
//
// Memory: register_memory() registers a new region every time (ibv_reg_mr,
// memory_region.h) and the region goes with the Memory (or with the last
// message in flight from or into it). Nothing is cached by address: a cache
// keyed by virtual address cannot see free() + mmap() put new pages under an
// old address, and a stale registration makes RDMA move pages the process
// no longer uses. The communicator keeps registrations only of memory it
// owns and of buffers the application registered (register_buffer);
// anything else it copies through its own or registers per call.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/collectives/transport.h"
#include "weft/common/status.h"

namespace weft::verbs {

// One QP of the transport, for tests and diagnostics.
struct QpRoute {
  int peer = -1;
  std::uint32_t qpn = 0;
  std::uint32_t remote_qpn = 0;
  std::uint16_t planned_sport = 0;  // 0 = no plan (the kernel hashes the QPNs)
  std::uint32_t flow_label = 0;
  std::string local_ip, remote_ip;  // the GIDs' addresses: equal = one device (rxe loops back)
  std::uint64_t bytes_sent = 0;     // payload of the completed sends to the peer
};

// The verbs transport's extra surface (dynamic_cast a Transport* to it).
class VerbsTransportInfo {
 public:
  virtual ~VerbsTransportInfo() = default;
  virtual std::string device_name() const = 0;
  virtual std::vector<QpRoute> qp_routes() const = 0;
  // Fault injection: the QP to `peer` enters the error state as on a NIC
  // fatal error; outstanding and later work fails with IBV_WC_WR_FLUSH_ERR.
  virtual Status inject_qp_error(int peer) = 0;
  // Memory regions registered for register_memory so far (ibv_reg_mr calls
  // of the caller's and the communicator's buffers; not the QPs' own).
  virtual std::uint64_t memory_registrations() const = 0;
};

// The factory registered as "verbs" (collectives/transport.cc).
Result<std::unique_ptr<coll::Transport>> make_verbs_transport(const coll::TransportConfig& config, coll::Store& store,
                                                              coll::Deadline deadline);

}  // namespace weft::verbs
