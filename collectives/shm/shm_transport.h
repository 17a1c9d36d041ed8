// Shared-memory transport for ranks on one host.
//
// Every rank owns one POSIX shared-memory segment holding a single-producer
// single-consumer byte ring per sender, a doorbell (a futex word), and its
// abort and liveness words; every rank maps the segments of its peers. The
// names are unlinked as soon as every peer has mapped them, so a crash after
// setup leaves nothing behind in /dev/shm; a rank killed during setup (while
// it waits for a late peer) leaves its segment, /dev/shm/weft-<pid>-<rank>-*,
// which nothing else removes: another container's ranks may share /dev/shm
// with pids of their own, so a pid that is not alive here proves nothing. A
// mapping is address space only: the
// rings of a pair are faulted in (and the peer watched for death) when the
// pair is connected — at setup for TransportConfig::connect_at_setup, else
// by connect_peers — so a rank's memory grows with the peers it talks to
// (ring bytes each way per pair), not with the ranks of the host. Abort and
// stall notices go to every peer's segment directly.
//
// Messages: frames on 64-byte lines that carry their own sequence number
// (shm_ring.h: a message of up to 40 bytes is one cache line), then
//   - small messages (< ShmOptions::single_copy_min_bytes): the payload,
//     copied through the ring (two copies, pipelined by the two ranks; a
//     message larger than the room streams as several frames);
//   - large ones: one line: the header names the sender's address and
//     the receiver copies straight from the sender's memory with
//     process_vm_readv(2) (one copy, "CMA", as Open MPI's vader does), then
//     bumps the ring's ack counter, which completes the send.
// Waits spin, then sleep on the rank's doorbell with FUTEX_WAIT (futex(2));
// a producer rings the consumer's doorbell after publishing. A peer's death
// is seen through a pidfd (pidfd_open(2): readable once the process exits,
// even before it is reaped) and reported naming the rank.
// Single copy needs ptrace access to the sender, which many hosts refuse:
// each rank probes it per peer at setup (shm_single_copy.h), and a peer it
// may not read sends it everything through the ring; the rank logs one line
// saying so.
#pragma once

#include <cstdint>
#include <memory>

#include "weft/collectives/transport.h"

namespace weft::coll::shm {

// The shm transport's extra surface (dynamic_cast a Transport* to it).
class ShmTransportInfo {
 public:
  virtual ~ShmTransportInfo() = default;
  // This rank copies `peer`'s large messages straight from its memory
  // (probed at setup); false: they come through the ring.
  virtual bool reads_single_copy(int peer) const = 0;
  // Bytes this rank received single-copy so far.
  virtual uint64_t single_copy_bytes() const = 0;
};

Result<std::unique_ptr<Transport>> make_shm_transport(const TransportConfig& config, Store& store,
                                                      Deadline deadline);

}  // namespace weft::coll::shm
