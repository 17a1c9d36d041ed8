// Comms and requests of the plugin: what listen/connect/accept build and
// isend/irecv/test drive.
//
// The data path is receiver-driven, as NCCL's IB transport is: irecv sends
// the sender a credit (SEND on QP 0) naming each of its n buffers (address,
// rkey, size, tag); isend waits (returns a NULL request, as the API allows)
// until a credit with its tag has arrived, then writes its data straight
// into that buffer with RDMA WRITE WITH IMMEDIATE, split over the
// connection's QPs (qp_share.h; one write per QP, zero-length ones
// included, so every QP carries every message and the receiver knows how
// many to expect). The
// immediate names the credit slot and buffer; the receive completion's
// byte count is what test() reports.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "weft/nccl_net/net.h"
#include "weft/nccl_net/ports.h"
#include "weft/verbs/handle.h"
#include "weft/verbs/rc_qp.h"

namespace weft::nccl_net {

inline constexpr int kMaxRecvs = 8;      // buffers per grouped receive (NCCL's IB plugin offers 8)
inline constexpr int kSlots = NCCL_NET_MAX_REQUESTS;  // requests in flight per comm
inline constexpr int kSenderCreditBufs = 2 * kSlots;  // credit receives the sender keeps posted
inline constexpr std::uint32_t kRecvDepth = kSlots * kMaxRecvs + 16;  // write-with-imm receives per QP

struct CreditEntry {
  std::uint64_t addr;
  std::uint64_t size;
  std::uint32_t rkey;
  std::int32_t tag;
};
struct Credit {
  std::uint32_t seq;
  std::uint32_t n;
  CreditEntry e[kMaxRecvs];
};
static_assert(sizeof(Credit) == 8 + 24 * kMaxRecvs, "a credit is sent as its bytes");

struct MemHandle {
  Held held;
  verbs::MrHandle mr;
};

struct Comm;

struct Request {
  Comm* comm = nullptr;
  enum Type { kFree, kSend, kRecv } type = kFree;
  int pending = 0;           // work completions still to come
  bool credit_sent = false;  // receive: the credit's SEND has completed (its buffer is free)
  int n = 0;
  std::uint64_t sizes[kMaxRecvs] = {};
};

// A sending or receiving comm, connected.
struct Comm {
  Held held;
  NetDevice* dev = nullptr;
  bool is_send = false;
  int fd = -1;
  verbs::CqHandle cq;
  std::vector<verbs::RcQp> qps;
  std::vector<PortChoice> ports;  // each QP's entry in the plan
  std::vector<std::uint8_t> credit_mem;  // sender: kSenderCreditBufs credits; receiver: kSlots
  verbs::MrHandle credit_mr;
  std::array<Request, kSlots> reqs{};
  std::string failed;  // first completion error, reported by every later call

  // Sender: credits received and not yet fully used, oldest first.
  struct Pending {
    Credit c;
    std::uint32_t used = 0;  // bit i: buffer i has its send
  };
  std::deque<Pending> credits;
  // Receiver: the next credit's sequence number (its slot is seq % kSlots).
  std::uint32_t next_seq = 0;

  ~Comm();
  // Drains the CQ, advancing requests; fails the comm on an error completion.
  Status progress();
};

// Posts the receives a freshly connected comm needs (credits on the sender,
// write-with-imm receives on the receiver); registers the credit memory.
Status arm(Comm& c);

// A listening comm and the connections it is accepting: each is advanced on
// every accept() call, so a silent or slow stranger never holds the peer back.
struct ListenComm {
  Held held;
  NetDevice* dev = nullptr;
  int dev_index = 0;
  int fd = -1;
  std::uint32_t serial = 0;
  struct Accepting;
  std::vector<Accepting*> pending;  // owned; oldest first
  ~ListenComm();
};

// A connection being set up by connect().
struct Connecting;

// The operations (net.h's Net supplies devices, settings and logging).
ncclResult_t do_listen(int dev, void* handle, void** listen_comm);
// `owner`: the NCCL context the connect runs under (v11's init context,
// nullptr before v11); drop_connects(owner) frees those NCCL stopped
// polling (in_progress.h).
ncclResult_t do_connect(int dev, int traffic_class, const void* owner, void* handle, void** send_comm);
void drop_connects(const void* owner);
ncclResult_t do_accept(void* listen_comm, void** recv_comm);
ncclResult_t do_close_listen(void* listen_comm);
ncclResult_t do_close(void* comm);
ncclResult_t do_reg_mr(void* comm, void* data, std::size_t size, int type, void** mhandle);
// A dma-buf (fd, offset) at NCCL's address `data`, on a device that takes
// them; fd -1 with NCCL_PTR_HOST is plain host memory (do_reg_mr), as in
// NCCL's IB transport.
ncclResult_t do_reg_mr_dmabuf(void* comm, void* data, std::size_t size, int type, std::uint64_t offset, int fd,
                              void** mhandle);
ncclResult_t do_dereg_mr(void* comm, void* mhandle);
ncclResult_t do_isend(void* send_comm, void* data, std::size_t size, int tag, void* mhandle, void** request);
ncclResult_t do_irecv(void* recv_comm, int n, void** data, const std::size_t* sizes, const int* tags, void** mhandles,
                      void** request);
ncclResult_t do_test(void* request, int* done, int* sizes);

}  // namespace weft::nccl_net
