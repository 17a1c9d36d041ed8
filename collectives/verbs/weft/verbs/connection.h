// Connection: one RC QP to one peer, moving messages by RDMA WRITE with
// immediate into the peer's receive ring, with credit-based flow control.
//
// Protocol (both directions are symmetric):
//  - Each side owns a receive ring of `slots` x `slot_bytes`, registered for
//    remote write, and advertises it in its EndpointInfo.
//  - A message is cut into chunks of at most slot_bytes. Chunk k goes by
//    IBV_WR_RDMA_WRITE_WITH_IMM into the peer's slot (k mod slots); the
//    immediate carries the chunk length and a last-chunk bit, and consumes
//    one posted receive at the peer, which tells it a slot is full. RC
//    delivers in order, so slots fill in sequence.
//  - The sender starts with `slots` credits, spends one per chunk, and gets
//    them back when the receiver has copied chunks out: the receiver returns
//    them in batches (half a ring) with a zero-byte IBV_WR_SEND_WITH_IMM whose
//    immediate is the count. A sender never overwrites an unread slot.
//  - Messages match in order: the k-th isend on one side is the k-th irecv on
//    the other, with the same length (a mismatch is an error naming both).
// Buffers registered with Context::register_buffer are written from directly;
// others are copied into a registered staging slot first (mr_cache.h says why).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "weft/common/status.h"
#include "weft/verbs/mr_cache.h"
#include "weft/verbs/rc_qp.h"

namespace weft::verbs {

class Context;

struct ConnectionConfig {
  RcQpConfig qp;  // qp.planned_sport carries the route plan's source port
  std::uint32_t slots = 16;
  std::uint32_t slot_bytes = 64 * 1024;
  std::string peer_name = "peer";  // how errors name the other side: "rank 3"
  // A socket to the peer (typically its bootstrap connection), borrowed: when
  // it reports end-of-file the peer is gone and waits fail at once instead of
  // at the timeout. -1 = none.
  int liveness_fd = -1;
};

Status validate(const ConnectionConfig& config);

class Connection {
 public:
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Send this to the peer out of band; connect() with what it sends back.
  EndpointInfo local_info() const;
  Status connect(const EndpointInfo& remote);

  // Queue a message; data must stay valid until wait_send() covers it.
  Status isend(const void* data, std::size_t len);
  // Queue a receive of exactly len bytes into data.
  Status irecv(void* data, std::size_t len);

  bool sends_pending() const { return !sends_.empty(); }
  bool recvs_pending() const { return !recvs_.empty(); }
  const std::string& peer_name() const { return config_.peer_name; }
  const Status& error() const { return error_; }
  std::uint32_t qpn() const { return qp_.qpn(); }
  std::uint32_t planned_sport() const { return config_.qp.planned_sport; }
  int liveness_fd() const { return config_.liveness_fd; }

  // Fault injection for tests: the QP enters the error state as on a NIC
  // fatal error, so outstanding work completes with IBV_WC_WR_FLUSH_ERR.
  Status force_qp_error() { return qp_.set_error_state(); }

 private:
  friend class Context;
  Connection(Context* ctx, const ConnectionConfig& config) : ctx_(ctx), config_(config) {}
  Status init();
  void on_completion(const struct ibv_wc& wc);
  void fail(Status s);
  Status pump();  // posts chunks and credit returns as resources allow
  Status deliver();  // copies arrived chunks into posted receives
  Status post_recv_wr();

  struct SendReq {
    const std::uint8_t* data = nullptr;
    std::size_t len = 0;
    std::size_t posted = 0;  // bytes handed to the QP
    std::uint32_t chunks_posted = 0;
    std::uint32_t chunks_done = 0;  // writes completed (acknowledged by the peer)
    bool all_posted = false;
    MrCache::EntryRef mr;    // set when written from directly (zero-copy)
  };
  struct RecvReq {
    std::uint8_t* data = nullptr;
    std::size_t len = 0;
    std::size_t filled = 0;
  };
  struct Arrived {
    std::uint32_t slot;
    std::uint32_t len;
    bool last;
  };
  enum class WrKind : std::uint64_t { kData = 1, kCredit = 2, kRecv = 3 };
  struct PostedSend {
    WrKind kind;
    std::uint32_t len;
    std::int32_t staging_slot;  // -1 when zero-copy or a credit message
  };

  Context* ctx_;
  ConnectionConfig config_;
  Status error_;
  // Ring and staging memory, then their registrations, then the QP:
  // destruction runs in reverse, so the QP is gone before memory is released.
  std::unique_ptr<std::uint8_t[]> ring_mem_;
  std::unique_ptr<std::uint8_t[]> staging_mem_;
  std::uint8_t* ring_ = nullptr;
  std::uint8_t* staging_ = nullptr;
  MrCache::EntryRef ring_mr_;
  MrCache::EntryRef staging_mr_;
  RcQp qp_;
  EndpointInfo remote_{};
  bool connected_ = false;

  std::deque<SendReq> sends_;
  std::deque<RecvReq> recvs_;
  std::deque<Arrived> arrived_;
  std::deque<PostedSend> posted_;     // signalled sends in completion order
  std::deque<std::int32_t> free_staging_;
  std::uint32_t credits_ = 0;         // peer slots we may write
  std::uint32_t credits_to_return_ = 0;
  std::uint64_t send_seq_ = 0;        // chunks written to the peer
  std::uint64_t recv_seq_ = 0;        // chunks arrived from the peer
  std::uint32_t sq_depth_ = 0;

 public:
  // Counters for tests and diagnostics.
  struct Stats {
    std::uint64_t chunks_sent = 0, chunks_received = 0, credit_messages_sent = 0, zero_copy_sends = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  Stats stats_;
};

}  // namespace weft::verbs
