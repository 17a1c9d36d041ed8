// Connection: one RC QP to one peer, moving messages receiver-driven — the
// receiver says where each message goes, the sender writes it there
// one-sided — with credit-based flow control. This is the engine under the
// verbs transport's pairs (collectives/weft/collectives/transport.h).
//
// Protocol (both directions are symmetric and independent):
//  - irecv(buf) is a credit: a SEND carrying (address, rkey, length) of buf,
//    24 bytes big-endian, into one of the peer's posted receive buffers.
//  - isend(buf) waits for the next credit from the peer, then writes buf to
//    that address: RDMA WRITE WITH IMMEDIATE (a message larger than the
//    port's max_msg_sz goes as plain RDMA WRITEs and a final WRITE WITH
//    IMMEDIATE; RC places them in order). The immediate consumes one posted
//    receive at the peer and completes its receive — completion by
//    notification, no polling of memory. Data lands in place: zero copies.
//  - Messages match in posting order: the k-th isend on one side fills the
//    k-th irecv on the other. The sender checks the lengths against the
//    credit; on a mismatch it fails, and tells the receiver with a zero-byte
//    write whose immediate has the error bit and the sent length, so both
//    sides report both sizes.
//  - Flow control, so that no SEND ever meets an empty receive queue (RNR):
//    each side keeps recv_depth receives posted (reposted as they complete).
//    They absorb the peer's credits and the peer's data writes. Writes are
//    bounded by the credits this side gave; credits by the rule "credits
//    sent and not yet filled <= min(recv_depth of both sides) / 2". So at
//    most recv_depth receives are ever consumed and not yet reposted.
//
// The immediate (32 bits, big-endian on the wire): bit 31 clear -> the low
// 31 bits of the message's sequence number (checked by the receiver); bit 31
// set -> error: the sender's length (saturated at 2^31 - 1) did not match.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/verbs/memory_region.h"
#include "weft/verbs/rc_qp.h"

namespace weft::verbs {

class Context;

struct ConnectionConfig {
  RcQpConfig qp;  // qp.planned_sport carries the route plan's source port
  // Receive WRs kept posted, and send WRs the QP can hold. Messages in flight
  // per direction are at most half of it (see above).
  std::uint32_t queue_depth = 64;
  std::string peer_name = "peer";  // how errors name the other side: "rank 3"
  // A socket to the peer (typically its bootstrap connection), borrowed: when
  // it reports end-of-file the peer is gone and Context's waits fail at once
  // instead of at the timeout. -1 = none.
  int liveness_fd = -1;
};

Status validate(const ConnectionConfig& config);

using Ticket = std::uint64_t;  // 1, 2, 3 ... per direction; 0 = nothing posted

class Connection {
 public:
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Send this to the peer out of band; connect() with what it sends back.
  EndpointInfo local_info() const;
  Status connect(const EndpointInfo& remote);

  // Posts a message of len bytes at data. `mr` must cover it with
  // IBV_ACCESS_LOCAL_WRITE (may be null when len == 0) and is held until the
  // message completes; the bytes must stay untouched until then.
  Result<Ticket> isend(const void* data, std::size_t len, RegionRef mr);
  // Posts room for the next message; `mr` must cover it with
  // IBV_ACCESS_REMOTE_WRITE (may be null when len == 0).
  Result<Ticket> irecv(void* data, std::size_t len, RegionRef mr);

  // Tickets posted and completed, per direction; t is complete when done >= t.
  Ticket sends_posted() const { return sends_posted_; }
  Ticket sends_done() const { return sends_done_; }
  Ticket recvs_posted() const { return recvs_posted_; }
  Ticket recvs_done() const { return recvs_done_; }
  bool sends_pending() const { return sends_done_ < sends_posted_; }
  bool recvs_pending() const { return recvs_done_ < recvs_posted_; }

  const std::string& peer_name() const { return config_.peer_name; }
  const Status& error() const { return error_; }
  // Makes the connection fail with `s`. The first error sticks, except that
  // a flush (IBV_WC_WR_FLUSH_ERR: the QP was already in the error state) is
  // replaced by the first error that says why, when one comes later.
  void fail(Status s, bool is_flush = false);
  bool error_is_flush() const { return error_is_flush_; }
  std::uint32_t qpn() const { return qp_.qpn(); }
  std::uint32_t remote_qpn() const { return remote_.qpn; }
  std::string remote_ipv4() const { return ipv4_of(remote_.gid); }
  std::uint32_t planned_sport() const { return config_.qp.planned_sport; }
  std::uint32_t flow_label() const { return qp_.flow_label(); }
  int liveness_fd() const { return config_.liveness_fd; }
  const RcQp& qp() const { return qp_; }

  // Fault injection for tests: the QP enters the error state as on a NIC
  // fatal error, so outstanding work completes with IBV_WC_WR_FLUSH_ERR.
  Status force_qp_error() { return qp_.set_error_state(); }
  // Test hook: the next credit this side sends carries a wrong rkey, as if it
  // had been corrupted, so the peer's write fails with IBV_WC_REM_ACCESS_ERR.
  void corrupt_next_credit() { corrupt_next_credit_ = true; }

  struct Stats {
    std::uint64_t credits_sent = 0, credits_received = 0, writes = 0, messages_received = 0;
    std::uint64_t bytes_written = 0;  // payload of the completed sends
  };
  const Stats& stats() const { return stats_; }

 private:
  friend class Context;
  Connection(Context* ctx, const ConnectionConfig& config) : ctx_(ctx), config_(config) {}
  Status init();
  void on_completion(const struct ibv_wc& wc);
  Status on_recv(const struct ibv_wc& wc);
  Status on_send(const struct ibv_wc& wc);
  Status pump();  // posts credits and writes as the limits allow
  Status post_credit();
  Status post_write();  // the next chunk of the oldest send with a credit
  Status post_recv_wr(std::uint32_t slot);
  std::uint32_t sq_room() const { return sq_depth_ - static_cast<std::uint32_t>(posted_.size()); }

  struct Credit {
    std::uint64_t addr = 0;
    std::uint64_t len = 0;
    std::uint32_t rkey = 0;
  };
  struct SendReq {
    const std::uint8_t* data = nullptr;
    std::size_t len = 0;
    RegionRef mr;
    bool has_credit = false;
    Credit credit;
    std::size_t posted = 0;  // bytes handed to the QP
    std::uint32_t wrs_posted = 0, wrs_done = 0;
    bool all_posted = false;
  };
  struct RecvReq {
    std::uint8_t* data = nullptr;
    std::size_t len = 0;
    RegionRef mr;
  };
  enum class WrKind : std::uint8_t { kWrite = 1, kCredit = 2, kRecv = 3 };
  struct Posted {
    WrKind kind;
    std::uint32_t slot;  // credit: its send buffer slot
  };

  Context* ctx_;
  ConnectionConfig config_;
  Status error_;
  bool error_is_flush_ = false;
  // Control buffers (credits in, credits out), then their registration, then
  // the QP: destruction runs in reverse, so the QP is gone first.
  std::vector<std::uint8_t> ctrl_mem_;
  std::uint8_t* credit_in_ = nullptr;   // recv_depth slots
  std::uint8_t* credit_out_ = nullptr;  // sq_depth slots
  RegionRef ctrl_mr_;
  RcQp qp_;
  EndpointInfo remote_{};
  bool connected_ = false;
  bool corrupt_next_credit_ = false;

  std::deque<SendReq> sends_;  // not yet complete; the first with !all_posted is next
  std::size_t next_send_ = 0;  // index into sends_ of the first not fully posted
  std::deque<RecvReq> recvs_;  // not yet complete; the first recvs_credited_ have credits out
  std::size_t recvs_credited_ = 0;
  std::deque<Credit> credits_;  // from the peer, not yet used by a send
  std::deque<Posted> posted_;   // signalled send WRs in completion order
  std::vector<std::uint32_t> free_credit_slots_;
  Ticket sends_posted_ = 0, sends_done_ = 0, recvs_posted_ = 0, recvs_done_ = 0;
  std::uint64_t credits_sent_ = 0;
  std::uint32_t sq_depth_ = 0, credit_limit_ = 0;
  std::size_t max_chunk_ = 0;
  Stats stats_;
};

}  // namespace weft::verbs
