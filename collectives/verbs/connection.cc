#include "weft/verbs/connection.h"

#include <arpa/inet.h>
#include <endian.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "weft/verbs/context.h"
#include "weft/verbs/error.h"

namespace weft::verbs {
namespace {

constexpr std::uint32_t kErrorBit = 0x80000000u;
constexpr std::uint32_t kSeqMask = 0x7FFFFFFFu;
// A credit on the wire: address, length (64-bit) and rkey, big-endian.
constexpr std::uint32_t kCreditBytes = 24;
constexpr std::size_t kCtrlSlot = 32;
// One work request never carries more than this, whatever the port allows:
// a 1 GiB write already takes long enough to keep the link busy.
constexpr std::size_t kMaxChunk = std::size_t{1} << 30;

std::uint64_t wr_id(std::uint8_t kind, std::uint32_t slot) { return std::uint64_t{kind} << 32 | slot; }

}  // namespace

Status validate(const ConnectionConfig& c) {
  WEFT_RETURN_IF_ERROR(validate(c.qp));
  if (c.queue_depth < 2 || c.queue_depth > 4096) {
    return invalid_argument(fmt::format("queue_depth {} must be in 2..4096", c.queue_depth));
  }
  return ok_status();
}

Status Connection::init() {
  WEFT_RETURN_IF_ERROR(validate(config_));
  const std::uint32_t rq = config_.queue_depth;
  sq_depth_ = config_.queue_depth;
  ctrl_mem_.assign((std::size_t{rq} + sq_depth_) * kCtrlSlot, 0);
  credit_in_ = ctrl_mem_.data();
  credit_out_ = ctrl_mem_.data() + std::size_t{rq} * kCtrlSlot;
  WEFT_ASSIGN_OR_RETURN(ctrl_mr_,
                        register_region(*ctx_->registrar_, ctrl_mem_.data(), ctrl_mem_.size(), IBV_ACCESS_LOCAL_WRITE));
  RcQpConfig qc = config_.qp;
  qc.max_send_wr = sq_depth_;
  qc.max_recv_wr = rq;
  WEFT_ASSIGN_OR_RETURN(qp_, RcQp::create(ctx_->device(), ctx_->cq_->get(), ctx_->cq_->get(), qc));
  for (std::uint32_t i = 0; i < sq_depth_; ++i) free_credit_slots_.push_back(i);
  // Receives must be posted before the peer can send: before connect().
  for (std::uint32_t i = 0; i < rq; ++i) WEFT_RETURN_IF_ERROR(post_recv_wr(i));
  return ok_status();
}

Connection::~Connection() {
  if (ctx_ == nullptr) return;
  // QP first (no more DMA into the control buffers, no more completions),
  // then the registration, while the memory is still ours. Each step runs
  // even if one failed.
  const std::uint32_t qpn = qp_.get() != nullptr ? qp_.qpn() : 0;
  Status s = qp_.close();
  if (!s.is_ok()) spdlog::error("weft verbs: closing the connection to {}: {}", config_.peer_name, s.message());
  if (qpn != 0) ctx_->forget(*this, qpn);
  ctrl_mr_.reset();
}

EndpointInfo Connection::local_info() const {
  EndpointInfo e;
  e.qpn = qp_.qpn();
  e.psn = qp_.psn();
  e.gid = ctx_->device().gid().gid;
  e.mtu_bytes = ctx_->device().port().active_mtu_bytes;
  e.recv_depth = config_.queue_depth;
  e.max_msg_bytes = ctx_->device().port().max_msg_bytes;
  return e;
}

Status Connection::connect(const EndpointInfo& remote) {
  if (connected_) return failed_precondition(fmt::format("connection to {} is already connected", peer_name()));
  WEFT_RETURN_IF_ERROR(qp_.connect(remote).with_context(fmt::format("connecting to {}", peer_name())));
  // weft's own transport (verbs_transport.h routes) fails a connection
  // whose planned port the device refused, as it always has; only the NCCL
  // plugin goes on without it (nccl_net/connect.cc).
  WEFT_RETURN_IF_ERROR(qp_.sport_status().with_context(fmt::format("connecting to {}", peer_name())));
  remote_ = remote;
  credit_limit_ = std::max<std::uint32_t>(1, std::min(config_.queue_depth, remote.recv_depth) / 2);
  max_chunk_ = std::min<std::size_t>({kMaxChunk, ctx_->device().port().max_msg_bytes, remote.max_msg_bytes});
  connected_ = true;
  return ok_status();
}

void Connection::fail(Status s, bool is_flush) {
  if (error_.is_ok() || (error_is_flush_ && !is_flush)) {
    error_ = std::move(s);
    error_is_flush_ = is_flush;
  }
}

namespace {
Status check_region(const RegionRef& mr, const void* data, std::size_t len, int access, const char* what,
                    const std::string& peer) {
  if (len == 0) return ok_status();
  if (!mr) return invalid_argument(fmt::format("{} of {} bytes with {}: memory is not registered", what, len, peer));
  const auto b = reinterpret_cast<std::uintptr_t>(data);
  if (b < mr->begin || b + len > mr->end || (mr->access & access) != access) {
    return invalid_argument(fmt::format("{} of {} bytes with {}: [{:#x}, {:#x}) is outside its registration "
                                        "[{:#x}, {:#x}) or lacks access {:#x}",
                                        what, len, peer, b, b + len, mr->begin, mr->end, access));
  }
  return ok_status();
}
}  // namespace

Result<Ticket> Connection::isend(const void* data, std::size_t len, RegionRef mr) {
  if (!connected_) return failed_precondition(fmt::format("send to {} before connect", peer_name()));
  if (!error_.is_ok()) return error_;
  WEFT_RETURN_IF_ERROR(check_region(mr, data, len, IBV_ACCESS_LOCAL_WRITE, "send", peer_name()));
  SendReq r;
  r.data = static_cast<const std::uint8_t*>(data);
  r.len = len;
  r.mr = std::move(mr);
  sends_.push_back(std::move(r));
  const Ticket t = ++sends_posted_;
  if (Status s = pump(); !s.is_ok()) fail(std::move(s));
  if (!error_.is_ok()) return error_;
  return t;
}

Result<Ticket> Connection::irecv(void* data, std::size_t len, RegionRef mr) {
  if (!connected_) return failed_precondition(fmt::format("receive from {} before connect", peer_name()));
  if (!error_.is_ok()) return error_;
  WEFT_RETURN_IF_ERROR(check_region(mr, data, len, IBV_ACCESS_REMOTE_WRITE, "receive", peer_name()));
  RecvReq r;
  r.data = static_cast<std::uint8_t*>(data);
  r.len = len;
  r.mr = std::move(mr);
  recvs_.push_back(std::move(r));
  const Ticket t = ++recvs_posted_;
  if (Status s = pump(); !s.is_ok()) fail(std::move(s));
  if (!error_.is_ok()) return error_;
  return t;
}

Status Connection::post_recv_wr(std::uint32_t slot) {
  // Every receive has a slot: a credit lands in it; a write with immediate
  // only consumes the WR (its data went to the address of the credit).
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uint64_t>(credit_in_ + std::size_t{slot} * kCtrlSlot);
  sge.length = kCtrlSlot;
  sge.lkey = ctrl_mr_->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = wr_id(static_cast<std::uint8_t>(WrKind::kRecv), slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_.get(), &wr, &bad); rc != 0) return verbs_call_error("ibv_post_recv", rc);
  return ok_status();
}

Status Connection::pump() {
  if (!connected_ || !error_.is_ok()) return ok_status();
  // Credits first: the peer may be waiting for them to send anything.
  while (recvs_credited_ < recvs_.size() && credits_sent_ - recvs_done_ < credit_limit_ && sq_room() > 0 &&
         !free_credit_slots_.empty()) {
    WEFT_RETURN_IF_ERROR(post_credit());
  }
  while (next_send_ < sends_.size() && sq_room() > 0) {
    SendReq& r = sends_[next_send_];
    if (!r.has_credit) {
      if (credits_.empty()) break;
      r.credit = credits_.front();
      credits_.pop_front();
      r.has_credit = true;
    }
    WEFT_RETURN_IF_ERROR(post_write());
  }
  return ok_status();
}

Status Connection::post_credit() {
  const std::uint32_t slot = free_credit_slots_.back();
  const RecvReq& r = recvs_[recvs_credited_];
  std::uint8_t* p = credit_out_ + std::size_t{slot} * kCtrlSlot;
  std::uint32_t rkey = r.len > 0 ? r.mr->rkey : 0;
  if (corrupt_next_credit_) {
    rkey ^= 0x5A5A;
    corrupt_next_credit_ = false;
  }
  const std::uint64_t addr = htobe64(reinterpret_cast<std::uint64_t>(r.data));
  const std::uint64_t len = htobe64(r.len);
  const std::uint32_t key = htobe32(rkey);
  std::memcpy(p, &addr, 8);
  std::memcpy(p + 8, &len, 8);
  std::memcpy(p + 16, &key, 4);
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uint64_t>(p);
  sge.length = kCreditBytes;
  sge.lkey = ctrl_mr_->lkey;
  ibv_send_wr wr{};
  wr.wr_id = wr_id(static_cast<std::uint8_t>(WrKind::kCredit), slot);
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_.get(), &wr, &bad); rc != 0) return verbs_call_error("ibv_post_send(credit)", rc);
  free_credit_slots_.pop_back();
  posted_.push_back(Posted{WrKind::kCredit, slot});
  ++recvs_credited_;
  ++credits_sent_;
  ++stats_.credits_sent;
  return ok_status();
}

Status Connection::post_write() {
  SendReq& r = sends_[next_send_];
  const Ticket ticket = sends_done_ + 1 + next_send_;
  ibv_send_wr wr{};
  ibv_sge sge{};
  bool last = true;
  Status mismatch;
  if (r.credit.len != r.len) {
    // Tell the receiver (a zero-byte write, error bit set), then fail here.
    wr.imm_data = htonl(kErrorBit | static_cast<std::uint32_t>(std::min<std::size_t>(r.len, kSeqMask)));
    mismatch = failed_precondition(fmt::format("message {} to {} has {} bytes, but {} posted a receive of {} bytes",
                                               ticket, peer_name(), r.len, peer_name(), r.credit.len));
  } else {
    const std::size_t n = std::min(max_chunk_, r.len - r.posted);
    last = r.posted + n == r.len;
    if (n > 0) {
      sge.addr = reinterpret_cast<std::uint64_t>(r.data + r.posted);
      sge.length = static_cast<std::uint32_t>(n);
      sge.lkey = r.mr->lkey;
      wr.sg_list = &sge;
      wr.num_sge = 1;
    }
    wr.wr.rdma.remote_addr = r.credit.addr + r.posted;
    wr.wr.rdma.rkey = r.credit.rkey;
    wr.imm_data = htonl(static_cast<std::uint32_t>(ticket) & kSeqMask);
    r.posted += n;
  }
  wr.wr_id = wr_id(static_cast<std::uint8_t>(WrKind::kWrite), 0);
  wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_.get(), &wr, &bad); rc != 0) {
    return verbs_call_error("ibv_post_send(RDMA WRITE with immediate)", rc);
  }
  posted_.push_back(Posted{WrKind::kWrite, 0});
  ++r.wrs_posted;
  if (last) {
    r.all_posted = true;
    ++next_send_;
    ++stats_.writes;
  }
  return mismatch;
}

void Connection::on_completion(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) {
    fail(unavailable(fmt::format("connection to {} failed: {}", peer_name(), describe_completion(wc))),
         wc.status == IBV_WC_WR_FLUSH_ERR);
    return;
  }
  if (!error_.is_ok()) return;  // stragglers after the first error
  const auto kind = static_cast<WrKind>(wc.wr_id >> 32);
  Status s = kind == WrKind::kRecv ? on_recv(wc) : on_send(wc);
  if (s.is_ok()) s = pump();
  if (!s.is_ok()) fail(std::move(s));
}

Status Connection::on_recv(const ibv_wc& wc) {
  const auto slot = static_cast<std::uint32_t>(wc.wr_id);
  if (wc.opcode == IBV_WC_RECV) {  // a credit
    if (wc.byte_len != kCreditBytes) {
      return data_loss(fmt::format("credit from {} has {} bytes, expected {}", peer_name(), wc.byte_len, kCreditBytes));
    }
    const std::uint8_t* p = credit_in_ + std::size_t{slot} * kCtrlSlot;
    std::uint64_t addr, len;
    std::uint32_t rkey;
    std::memcpy(&addr, p, 8);
    std::memcpy(&len, p + 8, 8);
    std::memcpy(&rkey, p + 16, 4);
    credits_.push_back(Credit{be64toh(addr), be64toh(len), be32toh(rkey)});
    ++stats_.credits_received;
    return post_recv_wr(slot);
  }
  if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
    return data_loss(fmt::format("unexpected receive completion {} from {}", wc_opcode_name(wc.opcode), peer_name()));
  }
  WEFT_RETURN_IF_ERROR(post_recv_wr(slot));
  const std::uint32_t imm = ntohl(wc.imm_data);
  if (recvs_credited_ == 0) return data_loss(fmt::format("{} wrote a message this side never asked for", peer_name()));
  const RecvReq& r = recvs_.front();
  const Ticket ticket = recvs_done_ + 1;
  if (imm & kErrorBit) {
    const std::uint32_t sent = imm & kSeqMask;
    return failed_precondition(fmt::format("message {} from {} has {}{} bytes where this side posted a receive of {} bytes",
                                           ticket, peer_name(), sent == kSeqMask ? ">= " : "", sent, r.len));
  }
  if (imm != (ticket & kSeqMask)) {
    return data_loss(fmt::format("{} wrote message {} where message {} was due", peer_name(), imm, ticket & kSeqMask));
  }
  recvs_.pop_front();
  --recvs_credited_;
  ++recvs_done_;
  ++stats_.messages_received;
  return ok_status();
}

Status Connection::on_send(const ibv_wc& wc) {
  if (posted_.empty()) {
    return internal_error(fmt::format("send completion ({}) on the connection to {} with nothing posted",
                                      wc_opcode_name(wc.opcode), peer_name()));
  }
  // One QP's send completions arrive in posting order (all are signalled).
  const Posted p = posted_.front();
  posted_.pop_front();
  if (p.kind == WrKind::kCredit) {
    free_credit_slots_.push_back(p.slot);
    return ok_status();
  }
  SendReq& r = sends_.front();
  if (++r.wrs_done == r.wrs_posted && r.all_posted) {
    stats_.bytes_written += r.len;
    sends_.pop_front();
    --next_send_;
    ++sends_done_;
  }
  return ok_status();
}

}  // namespace weft::verbs
