// A pair that runs a whole exchange with its peer (post a receive, post a
// send, wait for both) in one call (internal). The communicator finds it
// once per pair at setup (Links::exchangers); Context::sendrecv uses it when
// the call has one transport. Why: a small shared-memory AllReduce spends
// its time per call, not per byte, and the four calls of an exchange each
// take the transport's lock: eight locked instructions, the first of them
// after the send waiting for the message's lines to leave the store buffer.
#pragma once

#include "weft/collectives/transport.h"
#include "weft/collectives/types.h"

namespace weft::coll::internal {

class ExchangePair {
 public:
  // Receives [roff, roff + rlen) of rmem from the peer and sends [soff,
  // soff + slen) of smem to it, as recv, send, wait_recv, wait_send would;
  // returns the send's ticket once both are done.
  virtual Result<Ticket> exchange(const Memory& smem, size_t soff, size_t slen, Memory& rmem, size_t roff,
                                  size_t rlen, Deadline deadline) = 0;

  // Where the received vector goes: reduced into `into` (into[i] = into[i]
  // op received[i], rlen / dtype_size(t) elements) instead of copied.
  struct Reduction {
    char* into;
    DataType t;
    ReduceOp op;
  };
  // The same exchange, but the received bytes are reduced into red.into;
  // rmem's range is only used where the transport must land them first
  // (shm: a single-copy message). Why: a message that comes through the
  // shared-memory ring is reduced straight from the ring's lines, one pass
  // over memory less than copying it to scratch and reducing from there
  // (bench/results/2026-11-24-shm.md). The send's range must
  // not overlap red.into unless reduces_over_send(slen): it may still be
  // read after the reduce began.
  virtual Result<Ticket> exchange_reduce(const Memory& smem, size_t soff, size_t slen, Memory& rmem, size_t roff,
                                         size_t rlen, const Reduction& red, Deadline deadline) = 0;
  // True if exchange_reduce of a send of `slen` bytes may reduce into the
  // send's own range: the pair reads the send before anything is reduced
  // there (shm: a message that goes through the ring is copied into it
  // before the receive reduces). Then a butterfly step needs no scratch.
  virtual bool reduces_over_send(size_t slen) const = 0;

 protected:
  ~ExchangePair() = default;
};

}  // namespace weft::coll::internal
