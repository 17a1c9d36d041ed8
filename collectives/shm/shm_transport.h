// Shared-memory transport for ranks on one host.
//
// Every rank owns one POSIX shared-memory segment holding a single-producer
// single-consumer byte ring per sender, a doorbell (a futex word), and its
// abort and liveness words; every rank maps the segments of its peers. The
// names are unlinked as soon as every peer has mapped them, so a crash
// leaves nothing behind in /dev/shm.
//
// Messages: a 16-byte frame header in the ring, then
//   - small messages (< ShmOptions::single_copy_min_bytes): the payload,
//     copied through the ring (two copies, pipelined by the two ranks);
//   - large ones: nothing more: the header names the sender's address and
//     the receiver copies straight from the sender's memory with
//     process_vm_readv(2) (one copy, "CMA", as Open MPI's vader does), then
//     bumps the ring's ack counter, which completes the send.
// Waits spin, then sleep on the rank's doorbell with FUTEX_WAIT (futex(2));
// a producer rings the consumer's doorbell after publishing. A peer's death
// is seen through a pidfd (pidfd_open(2): readable once the process exits,
// even before it is reaped) and reported naming the rank.
#pragma once

#include <memory>

#include "weft/collectives/transport.h"

namespace weft::coll::shm {

Result<std::unique_ptr<Transport>> make_shm_transport(const TransportConfig& config, Store& store,
                                                      Deadline deadline);

}  // namespace weft::coll::shm
