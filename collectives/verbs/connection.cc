#include "weft/verbs/connection.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "weft/verbs/context.h"
#include "weft/verbs/error.h"

namespace weft::verbs {
namespace {
constexpr std::uint32_t kLastChunk = 0x80000000u;
// Extra send WRs beyond one per slot: credit messages in flight (at most two
// batches of half a ring can be outstanding) plus slack.
constexpr std::uint32_t kExtraWrs = 4;
}  // namespace

Status validate(const ConnectionConfig& c) {
  WEFT_RETURN_IF_ERROR(validate(c.qp));
  if (c.slots < 2 || c.slots > 4096) return invalid_argument(fmt::format("slots {} must be in 2..4096", c.slots));
  if (c.slot_bytes < 64 || c.slot_bytes >= kLastChunk) {
    return invalid_argument(fmt::format("slot_bytes {} must be in 64..2^31-1", c.slot_bytes));
  }
  return Status::ok();
}

Status Connection::init() {
  WEFT_RETURN_IF_ERROR(validate(config_));
  const std::size_t bytes = std::size_t{config_.slots} * config_.slot_bytes;
  // One extra page of slack lets both rings start page-aligned (registration
  // rounds to pages; separate pages keep the two entries apart in the cache).
  const std::size_t page = 4096;
  ring_mem_.reset(new std::uint8_t[bytes + page]);
  staging_mem_.reset(new std::uint8_t[bytes + page]);
  auto align = [page](std::uint8_t* p) {
    return reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1));
  };
  ring_ = align(ring_mem_.get());
  staging_ = align(staging_mem_.get());
  WEFT_ASSIGN_OR_RETURN(ring_mr_, ctx_->cache().get(ring_, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  WEFT_ASSIGN_OR_RETURN(staging_mr_, ctx_->cache().get(staging_, bytes, IBV_ACCESS_LOCAL_WRITE));
  RcQpConfig qc = config_.qp;
  sq_depth_ = config_.slots + kExtraWrs;
  qc.max_send_wr = sq_depth_;
  qc.max_recv_wr = config_.slots + kExtraWrs;
  WEFT_ASSIGN_OR_RETURN(qp_, RcQp::create(ctx_->device(), ctx_->cq_->get(), ctx_->cq_->get(), qc));
  for (std::uint32_t i = 0; i < config_.slots; ++i) free_staging_.push_back(static_cast<std::int32_t>(i));
  // Receives must be posted before the peer can write: before connect().
  for (std::uint32_t i = 0; i < qc.max_recv_wr; ++i) WEFT_RETURN_IF_ERROR(post_recv_wr());
  return Status::ok();
}

Connection::~Connection() {
  if (ctx_ == nullptr) return;
  ctx_->by_qpn_.erase(qp_.get() ? qp_.qpn() : 0);
  // QP first (no more DMA into the rings), then the registrations, while the
  // memory is still ours. Each step runs even if an earlier one failed.
  CleanupErrors errors;
  errors.add(qp_.close());
  const std::size_t bytes = std::size_t{config_.slots} * config_.slot_bytes;
  ring_mr_.reset();
  staging_mr_.reset();
  if (ring_ != nullptr) ctx_->cache().invalidate(ring_, bytes);
  if (staging_ != nullptr) ctx_->cache().invalidate(staging_, bytes);
  if (Status s = errors.status(); !s.is_ok()) {
    spdlog::error("weft verbs: closing the connection to {}: {}", config_.peer_name, s.message());
  }
}

EndpointInfo Connection::local_info() const {
  EndpointInfo e;
  e.qpn = qp_.qpn();
  e.psn = qp_.psn();
  e.gid = ctx_->device().gid().gid;
  e.mtu_bytes = ctx_->device().port().active_mtu_bytes;
  e.ring_addr = reinterpret_cast<std::uint64_t>(ring_);
  e.ring_rkey = ring_mr_->rkey;
  e.ring_slots = config_.slots;
  e.slot_bytes = config_.slot_bytes;
  return e;
}

Status Connection::connect(const EndpointInfo& remote) {
  if (connected_) return failed_precondition(fmt::format("connection to {} is already connected", peer_name()));
  if (remote.ring_slots < 2 || remote.slot_bytes < 64) {
    return data_loss(fmt::format("{} advertised a ring of {} x {} bytes", peer_name(), remote.ring_slots,
                                 remote.slot_bytes));
  }
  WEFT_RETURN_IF_ERROR(qp_.connect(remote).with_context(fmt::format("connecting to {}", peer_name())));
  remote_ = remote;
  credits_ = remote.ring_slots;
  connected_ = true;
  return Status::ok();
}

Status Connection::post_recv_wr() {
  // Zero-length receive: RDMA WRITE with immediate and the credit SEND carry
  // no payload into it, they only need a WR to report the immediate.
  ibv_recv_wr wr{};
  wr.wr_id = static_cast<std::uint64_t>(WrKind::kRecv);
  wr.num_sge = 0;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_.get(), &wr, &bad); rc != 0) return verbs_call_error("ibv_post_recv", rc);
  return Status::ok();
}

Status Connection::isend(const void* data, std::size_t len) {
  if (!connected_) return failed_precondition(fmt::format("isend to {} before connect", peer_name()));
  if (!error_.is_ok()) return error_;
  SendReq r;
  r.data = static_cast<const std::uint8_t*>(data);
  r.len = len;
  if (len > 0) r.mr = ctx_->cache().find(data, len, IBV_ACCESS_LOCAL_WRITE);
  sends_.push_back(std::move(r));
  Status s = pump();
  if (!s.is_ok()) fail(s);
  return error_;
}

Status Connection::irecv(void* data, std::size_t len) {
  if (!connected_) return failed_precondition(fmt::format("irecv from {} before connect", peer_name()));
  if (!error_.is_ok()) return error_;
  RecvReq r;
  r.data = static_cast<std::uint8_t*>(data);
  r.len = len;
  recvs_.push_back(r);
  Status s = deliver();
  if (s.is_ok()) s = pump();
  if (!s.is_ok()) fail(s);
  return error_;
}

void Connection::fail(Status s) {
  if (error_.is_ok()) error_ = std::move(s);
}

Status Connection::pump() {
  auto room = [this] { return posted_.size() < sq_depth_; };
  // Credit returns first: the peer may be blocked on them.
  while (credits_to_return_ > 0 && room()) {
    ibv_send_wr wr{};
    wr.wr_id = static_cast<std::uint64_t>(WrKind::kCredit);
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(credits_to_return_);
    wr.num_sge = 0;
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(qp_.get(), &wr, &bad); rc != 0) return verbs_call_error("ibv_post_send(credit)", rc);
    posted_.push_back(PostedSend{WrKind::kCredit, 0, -1});
    credits_to_return_ = 0;
    ++stats_.credit_messages_sent;
  }
  const std::size_t chunk = std::min(config_.slot_bytes, remote_.slot_bytes);
  for (SendReq& r : sends_) {
    // A zero-length message still sends one (empty) last chunk.
    while (!r.all_posted && credits_ > 0 && room()) {
      const std::size_t n = std::min(chunk, r.len - r.posted);
      std::int32_t staging = -1;
      ibv_sge sge{};
      if (n > 0) {
        if (r.mr) {
          sge.addr = reinterpret_cast<std::uint64_t>(r.data + r.posted);
          sge.lkey = r.mr->lkey;
          ++stats_.zero_copy_sends;
        } else {
          if (free_staging_.empty()) return Status::ok();  // a write completion frees one
          staging = free_staging_.front();
          free_staging_.pop_front();
          std::uint8_t* dst = staging_ + std::size_t{static_cast<std::uint32_t>(staging)} * config_.slot_bytes;
          std::memcpy(dst, r.data + r.posted, n);
          sge.addr = reinterpret_cast<std::uint64_t>(dst);
          sge.lkey = staging_mr_->lkey;
        }
        sge.length = static_cast<std::uint32_t>(n);
      }
      const bool last = r.posted + n == r.len;
      ibv_send_wr wr{};
      wr.wr_id = static_cast<std::uint64_t>(WrKind::kData);
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.imm_data = htonl(static_cast<std::uint32_t>(n) | (last ? kLastChunk : 0));
      wr.sg_list = n > 0 ? &sge : nullptr;
      wr.num_sge = n > 0 ? 1 : 0;
      wr.wr.rdma.remote_addr = remote_.ring_addr + (send_seq_ % remote_.ring_slots) * remote_.slot_bytes;
      wr.wr.rdma.rkey = remote_.ring_rkey;
      ibv_send_wr* bad = nullptr;
      if (int rc = ibv_post_send(qp_.get(), &wr, &bad); rc != 0) {
        if (staging >= 0) free_staging_.push_front(staging);
        return verbs_call_error("ibv_post_send(RDMA WRITE with immediate)", rc);
      }
      posted_.push_back(PostedSend{WrKind::kData, static_cast<std::uint32_t>(n), staging});
      --credits_;
      ++send_seq_;
      ++stats_.chunks_sent;
      r.posted += n;
      ++r.chunks_posted;
      r.all_posted = last;
    }
    if (!r.all_posted) break;  // messages go on the wire in order
  }
  return Status::ok();
}

Status Connection::deliver() {
  while (!arrived_.empty() && !recvs_.empty()) {
    Arrived a = arrived_.front();
    RecvReq& r = recvs_.front();
    if (r.filled + a.len > r.len || (a.last && r.filled + a.len != r.len)) {
      return failed_precondition(fmt::format(
          "message size mismatch with {}: it sent {}{} bytes, the posted receive expects {}", peer_name(),
          a.last ? "" : "more than ", r.filled + a.len, r.len));
    }
    std::memcpy(r.data + r.filled, ring_ + std::size_t{a.slot} * config_.slot_bytes, a.len);
    r.filled += a.len;
    arrived_.pop_front();
    if (a.last) recvs_.pop_front();
    // Return credits in half-ring batches: one message per batch instead of per
    // chunk, and never so late that the sender runs dry (it still holds half).
    if (++credits_to_return_ >= std::max<std::uint32_t>(1, config_.slots / 2)) WEFT_RETURN_IF_ERROR(pump());
  }
  // The last chunks of a finished exchange must not sit unreturned forever.
  if (credits_to_return_ > 0 && arrived_.empty() && recvs_.empty()) WEFT_RETURN_IF_ERROR(pump());
  return Status::ok();
}

void Connection::on_completion(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) {
    fail(unavailable(fmt::format("connection to {} failed: {}", peer_name(), describe_completion(wc))));
    return;
  }
  Status s;
  if (wc.opcode & IBV_WC_RECV) {
    s = post_recv_wr();
    if (s.is_ok() && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      std::uint32_t imm = ntohl(wc.imm_data);
      arrived_.push_back(Arrived{static_cast<std::uint32_t>(recv_seq_ % config_.slots), imm & ~kLastChunk,
                                 (imm & kLastChunk) != 0});
      ++recv_seq_;
      ++stats_.chunks_received;
      s = deliver();
    } else if (s.is_ok() && wc.opcode == IBV_WC_RECV) {
      credits_ += ntohl(wc.imm_data);
      s = pump();
    }
  } else {
    if (posted_.empty()) {
      fail(internal_error(fmt::format("send completion from {} with nothing posted", peer_name())));
      return;
    }
    PostedSend p = posted_.front();
    posted_.pop_front();
    if (p.staging_slot >= 0) free_staging_.push_back(p.staging_slot);
    if (p.kind == WrKind::kData && !sends_.empty()) {
      // Completions arrive in posting order, so they belong to the front message.
      SendReq& r = sends_.front();
      if (++r.chunks_done == r.chunks_posted && r.all_posted) sends_.pop_front();
    }
    s = pump();
  }
  if (!s.is_ok()) fail(s);
}

}  // namespace weft::verbs
