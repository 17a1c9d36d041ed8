// The data path (weft/nccl_net/comm.h describes the protocol): memory
// registration, credits, writes, completions.
#include <arpa/inet.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "weft/nccl_net/comm.h"
#include "weft/nccl_net/qp_share.h"
#include "weft/verbs/error.h"

namespace weft::nccl_net {
namespace {

// Work request ids: the kind in the top byte, an index below.
enum Kind : std::uint64_t { kSendWrite = 1, kCreditRecv = 2, kDataRecv = 3, kCreditSend = 4 };
std::uint64_t wr_id(Kind k, std::uint32_t index) { return static_cast<std::uint64_t>(k) << 56 | index; }

// The immediate of a data write: the credit's slot and the buffer's index in it.
std::uint32_t imm_of(std::uint32_t slot, std::uint32_t entry) { return slot << 3 | entry; }
static_assert(kMaxRecvs == 8 && kSlots <= (1 << 29), "imm_of packs the entry into 3 bits");

Credit* credit_at(Comm& c, std::size_t i) { return reinterpret_cast<Credit*>(c.credit_mem.data()) + i; }

Status post_recv(ibv_qp* qp, std::uint64_t id, ibv_sge* sge) {
  ibv_recv_wr wr{};
  wr.wr_id = id;
  wr.sg_list = sge;
  wr.num_sge = sge ? 1 : 0;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp, &wr, &bad); rc != 0) return verbs::verbs_call_error("ibv_post_recv", rc);
  return ok_status();
}

Status post_credit_recv(Comm& c, std::uint32_t i) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(credit_at(c, i)), sizeof(Credit), c.credit_mr->lkey};
  return post_recv(c.qps[0].get(), wr_id(kCreditRecv, i), &sge);
}

// An empty message touches no memory: NCCL may pass it without a buffer.
Status in_region(const MemHandle* mh, const void* data, std::uint64_t size) {
  if (size == 0) return ok_status();
  if (mh == nullptr || !mh->mr) return invalid_argument("no memory handle (regMr first)");
  auto lo = reinterpret_cast<std::uintptr_t>(mh->mr->addr), p = reinterpret_cast<std::uintptr_t>(data);
  if (p < lo || p + size > lo + mh->mr->length) {
    return invalid_argument(fmt::format("buffer {:#x}+{} lies outside its registration {:#x}+{}", p, size, lo,
                                        mh->mr->length));
  }
  return ok_status();
}

Request* free_request(Comm& c) {
  for (auto& r : c.reqs) {
    if (r.type == Request::kFree) return &r;
  }
  return nullptr;
}

}  // namespace

Comm::~Comm() {
  if (fd >= 0) ::close(fd);
}

Status arm(Comm& c) {
  std::size_t n = c.is_send ? kSenderCreditBufs : kSlots;
  c.credit_mem.assign(n * sizeof(Credit), 0);
  c.credit_mr = verbs::MrHandle(ibv_reg_mr(c.dev->dev->pd(), c.credit_mem.data(), c.credit_mem.size(),
                                           IBV_ACCESS_LOCAL_WRITE));
  if (!c.credit_mr) return verbs::verbs_errno_error("ibv_reg_mr(credits)");
  for (std::size_t i = 0; i < c.reqs.size(); ++i) c.reqs[i].comm = &c;
  if (c.is_send) {
    for (std::uint32_t i = 0; i < kSenderCreditBufs; ++i) WEFT_RETURN_IF_ERROR(post_credit_recv(c, i));
    return ok_status();
  }
  for (std::uint32_t q = 0; q < c.qps.size(); ++q) {
    for (std::uint32_t i = 0; i < kRecvDepth; ++i) {
      WEFT_RETURN_IF_ERROR(post_recv(c.qps[q].get(), wr_id(kDataRecv, q), nullptr));
    }
  }
  return ok_status();
}

Status Comm::progress() {
  if (!failed.empty()) return unavailable(failed);
  ibv_wc wc[32];
  for (;;) {
    int n = ibv_poll_cq(cq.get(), 32, wc);
    if (n < 0) return failed = "ibv_poll_cq failed", unavailable(failed);
    for (int k = 0; k < n; ++k) {
      const ibv_wc& w = wc[k];
      if (w.status != IBV_WC_SUCCESS) {
        if (failed.empty()) failed = "completion error: " + verbs::describe_completion(w);
        continue;
      }
      auto index = static_cast<std::uint32_t>(w.wr_id & 0xFFFFFFFF);
      switch (static_cast<Kind>(w.wr_id >> 56)) {
        case kSendWrite: reqs[index].pending--; break;
        case kCreditSend: reqs[index].credit_sent = true; break;
        case kCreditRecv: {
          Credit cr;
          std::memcpy(&cr, credit_at(*this, index), sizeof(cr));
          std::uint32_t expect = credits.empty() ? next_seq : credits.back().c.seq + 1;
          if (cr.n < 1 || cr.n > kMaxRecvs || cr.seq != expect) {
            if (failed.empty()) failed = fmt::format("credit {} with {} buffers (expected credit {})", cr.seq, cr.n, expect);
            break;
          }
          credits.push_back({cr, 0});
          if (Status s = post_credit_recv(*this, index); !s.is_ok() && failed.empty()) failed = s.message();
          break;
        }
        case kDataRecv: {
          std::uint32_t imm = ntohl(w.imm_data), slot = imm >> 3, entry = imm & 7;
          if (slot >= kSlots || reqs[slot].type != Request::kRecv || entry >= static_cast<std::uint32_t>(reqs[slot].n)) {
            if (failed.empty()) failed = fmt::format("write for slot {} buffer {} that no receive posted", slot, entry);
            break;
          }
          reqs[slot].sizes[entry] += w.byte_len;
          reqs[slot].pending--;
          if (Status s = post_recv(qps[index].get(), wr_id(kDataRecv, index), nullptr); !s.is_ok() && failed.empty()) {
            failed = s.message();
          }
          break;
        }
        default:
          if (failed.empty()) failed = fmt::format("completion with unknown wr_id {:#x}", w.wr_id);
      }
    }
    if (n < 32) break;
  }
  if (!failed.empty()) return unavailable(failed);
  return ok_status();
}

ncclResult_t do_reg_mr(void* comm, void* data, std::size_t size, int type, void** mhandle) {
  Net& net = Net::get();
  if (comm == nullptr || mhandle == nullptr) return net.fail("regMr", invalid_argument("NULL comm or handle"));
  *mhandle = nullptr;
  if (type != NCCL_PTR_HOST) {
    return net.fail("regMr", invalid_argument(fmt::format("pointer type {:#x}: this plugin registers host memory only "
                                                          "(NCCL_PTR_HOST)", type)));
  }
  auto* c = static_cast<Comm*>(comm);
  auto mh = std::make_unique<MemHandle>();
  mh->mr = verbs::MrHandle(ibv_reg_mr(c->dev->dev->pd(), data, size,
                                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
  if (!mh->mr) return net.fail("regMr", verbs::verbs_errno_error(fmt::format("ibv_reg_mr({} bytes)", size)));
  *mhandle = mh.release();
  return ncclSuccess;
}

ncclResult_t do_reg_mr_dmabuf(void* comm, void* data, std::size_t size, int type, std::uint64_t offset, int fd,
                              void** mhandle) {
  Net& net = Net::get();
  if (comm == nullptr || mhandle == nullptr) return net.fail("regMrDmaBuf", invalid_argument("NULL comm or handle"));
  *mhandle = nullptr;
  if (fd < 0 && type == NCCL_PTR_HOST) return do_reg_mr(comm, data, size, type, mhandle);
  if (type == NCCL_PTR_CUDA) {
    // GPU memory would need iflush's RDMA read (plugin.cc fill_common).
    return net.fail("regMrDmaBuf", invalid_argument("GPU memory (NCCL_PTR_CUDA) is not offered: ptrSupport is "
                                                    "NCCL_PTR_HOST, and iflush does no read to order GPU receives"));
  }
  auto* c = static_cast<Comm*>(comm);
  if (!c->dev->dmabuf) {
    return net.fail("regMrDmaBuf", failed_precondition(fmt::format("{} takes no dma-buf registration ({}); ptrSupport "
                                                                   "has no NCCL_PTR_DMABUF",
                                                                   c->dev->dev->name(), c->dev->dmabuf_refusal)));
  }
  if (fd < 0) return net.fail("regMrDmaBuf", invalid_argument(fmt::format("dma-buf fd {}", fd)));
  auto mh = std::make_unique<MemHandle>();
  mh->mr = verbs::MrHandle(ibv_reg_dmabuf_mr(c->dev->dev->pd(), offset, size, reinterpret_cast<std::uintptr_t>(data),
                                             fd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                                     IBV_ACCESS_REMOTE_READ));
  if (!mh->mr) {
    return net.fail("regMrDmaBuf", verbs::verbs_errno_error(fmt::format("ibv_reg_dmabuf_mr(fd {}, offset {}, {} bytes)",
                                                                        fd, offset, size)));
  }
  *mhandle = mh.release();
  return ncclSuccess;
}

ncclResult_t do_dereg_mr(void*, void* mhandle) {
  auto* mh = static_cast<MemHandle*>(mhandle);
  if (mh == nullptr) return ncclSuccess;
  Status s = mh->mr.close();
  delete mh;
  return s.is_ok() ? ncclSuccess : Net::get().fail("deregMr", s);
}

ncclResult_t do_isend(void* send_comm, void* data, std::size_t size, int tag, void* mhandle, void** request) {
  Net& net = Net::get();
  if (send_comm == nullptr || request == nullptr) return net.fail("isend", invalid_argument("NULL comm or request"));
  *request = nullptr;
  auto& c = *static_cast<Comm*>(send_comm);
  if (!c.is_send) return net.fail("isend", invalid_argument("isend on a receiving comm"));
  if (Status s = c.progress(); !s.is_ok()) return net.fail("isend", s);
  if (c.credits.empty()) return ncclSuccess;  // the receiver has not posted yet
  Comm::Pending& p = c.credits.front();
  std::uint32_t i = 0;
  while (i < p.c.n && ((p.used >> i & 1) != 0 || p.c.e[i].tag != tag)) ++i;
  if (i == p.c.n) return ncclSuccess;  // no buffer for this tag yet (NCCL's IB transport waits too)
  const CreditEntry& e = p.c.e[i];
  if (size > e.size) {
    return net.fail("isend", failed_precondition(fmt::format("send of {} bytes (tag {}) into a receive of {} bytes",
                                                             size, tag, e.size)));
  }
  if (Status s = in_region(static_cast<MemHandle*>(mhandle), data, size); !s.is_ok()) return net.fail("isend", s);
  Request* r = free_request(c);
  if (r == nullptr) return ncclSuccess;
  auto* mh = static_cast<MemHandle*>(mhandle);
  const std::uint64_t nq = c.qps.size();
  const auto req_index = static_cast<std::uint32_t>(r - c.reqs.data());
  for (std::uint64_t q = 0; q < nq; ++q) {
    const auto [off, len] = qp_share(size, nq, q);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(data) + off, static_cast<std::uint32_t>(len),
                len > 0 ? mh->mr->lkey : 0};
    ibv_send_wr wr{};
    wr.wr_id = wr_id(kSendWrite, req_index);
    wr.sg_list = len > 0 ? &sge : nullptr;
    wr.num_sge = len > 0 ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(imm_of(p.c.seq % kSlots, i));
    wr.wr.rdma.remote_addr = e.addr + off;
    wr.wr.rdma.rkey = e.rkey;
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(c.qps[q].get(), &wr, &bad); rc != 0) {
      c.failed = verbs::verbs_call_error(fmt::format("ibv_post_send(QP {})", q), rc).message();
      return net.fail("isend", unavailable(c.failed));
    }
  }
  r->type = Request::kSend;
  r->pending = static_cast<int>(nq);
  r->n = 1;
  r->sizes[0] = size;
  p.used |= 1u << i;
  if (p.used == (1u << p.c.n) - 1) {
    c.next_seq = p.c.seq + 1;
    c.credits.pop_front();
  }
  *request = r;
  return ncclSuccess;
}

ncclResult_t do_irecv(void* recv_comm, int n, void** data, const std::size_t* sizes, const int* tags, void** mhandles,
                      void** request) {
  Net& net = Net::get();
  if (recv_comm == nullptr || request == nullptr) return net.fail("irecv", invalid_argument("NULL comm or request"));
  *request = nullptr;
  auto& c = *static_cast<Comm*>(recv_comm);
  if (c.is_send) return net.fail("irecv", invalid_argument("irecv on a sending comm"));
  if (n < 1 || n > kMaxRecvs) return net.fail("irecv", invalid_argument(fmt::format("{} buffers (1..{})", n, kMaxRecvs)));
  if (Status s = c.progress(); !s.is_ok()) return net.fail("irecv", s);
  const std::uint32_t slot = c.next_seq % kSlots;
  Request& r = c.reqs[slot];
  if (r.type != Request::kFree) return ncclSuccess;  // the oldest receive is still in flight
  Credit* cr = credit_at(c, slot);
  *cr = Credit{};
  cr->seq = c.next_seq;
  cr->n = static_cast<std::uint32_t>(n);
  for (int i = 0; i < n; ++i) {
    auto* mh = static_cast<MemHandle*>(mhandles[i]);
    if (Status s = in_region(mh, data[i], sizes[i]); !s.is_ok()) return net.fail("irecv", s);
    cr->e[i] = {reinterpret_cast<std::uintptr_t>(data[i]), sizes[i], sizes[i] > 0 ? mh->mr->rkey : 0, tags[i]};
  }
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(cr), sizeof(Credit), c.credit_mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id(kCreditSend, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(c.qps[0].get(), &wr, &bad); rc != 0) {
    c.failed = verbs::verbs_call_error("ibv_post_send(credit)", rc).message();
    return net.fail("irecv", unavailable(c.failed));
  }
  r.type = Request::kRecv;
  r.pending = n * static_cast<int>(c.qps.size());
  r.credit_sent = false;
  r.n = n;
  std::fill(std::begin(r.sizes), std::end(r.sizes), 0);
  c.next_seq++;
  *request = &r;
  return ncclSuccess;
}

ncclResult_t do_test(void* request, int* done, int* sizes) {
  Net& net = Net::get();
  if (request == nullptr || done == nullptr) return net.fail("test", invalid_argument("NULL request"));
  *done = 0;
  auto* r = static_cast<Request*>(request);
  if (r->comm == nullptr || r->type == Request::kFree) return net.fail("test", invalid_argument("not a live request"));
  if (Status s = r->comm->progress(); !s.is_ok()) return net.fail("test", s);
  if (r->pending > 0 || (r->type == Request::kRecv && !r->credit_sent)) return ncclSuccess;
  if (sizes != nullptr) {
    for (int i = 0; i < r->n; ++i) sizes[i] = static_cast<int>(r->sizes[i]);
  }
  r->type = Request::kFree;
  *done = 1;
  return ncclSuccess;
}

ncclResult_t do_close(void* comm) {
  delete static_cast<Comm*>(comm);
  return ncclSuccess;
}

}  // namespace weft::nccl_net
