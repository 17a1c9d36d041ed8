#include "context.h"

#include <cstdint>

#include <fmt/format.h>

#include "idle_wait.h"
#include "stall.h"

namespace weft::coll::internal {

Context::Context(const std::vector<int>& ranks, int me, const Links* links, const Buffers* buffers,
                 std::vector<Ticket>* last_send, Deadline deadline, DataType dtype, ReduceOp op,
                 const std::function<void(int, const TraceEvent&)>* trace, int phys_rank,
                 std::chrono::milliseconds stall_window)
    : ranks_(ranks.data()),
      size_(static_cast<int>(ranks.size())),
      me_(me),
      links_(links),
      buffers_(buffers),
      last_send_(last_send),
      deadline_(deadline),
      dtype_(dtype),
      op_(op),
      esize_(dtype_size(dtype)),
      trace_(trace),
      phys_rank_(phys_rank),
      stall_window_(stall_window) {}

Memory& Context::mem(int peer, Buf b) const {
  const int t = links_->transport_of[static_cast<size_t>(physical(peer))];
  return *buffers_->mem[b].by_transport[static_cast<size_t>(t)];
}

Result<Ticket> Context::send(int peer, Buf b, size_t offset, size_t len) { return post_send(peer, b, offset, len, false); }

Result<Ticket> Context::send_held(int peer, Buf b, size_t offset, size_t len) {
  return post_send(peer, b, offset, len, true);
}

Result<Ticket> Context::post_send(int peer, Buf b, size_t offset, size_t len, bool held) {
  const int phys = physical(peer);
  if (trace_ && *trace_) (*trace_)(phys_rank_, TraceEvent{TraceEvent::kSend, {}, 0, phys, len});
  Pair& to = pair(peer);
  auto t = held ? to.send_held(mem(peer, b), at(b, offset), len) : to.send(mem(peer, b), at(b, offset), len);
  if (t) (*last_send_)[static_cast<size_t>(phys)] = *t;
  return t;
}

Result<Ticket> Context::recv(int peer, Buf b, size_t offset, size_t len) {
  return pair(peer).recv(mem(peer, b), at(b, offset), len);
}

Status Context::timed_out(int peer) const {
  if (peer < 0) return stalled(peer, deadline_exceeded("timed out"));
  return stalled(peer, deadline_exceeded(fmt::format("timed out waiting for rank {}", physical(peer))));
}

Status Context::stalled(int peer, const Status& why) const {
  return resolve_stall(*links_, phys_rank_, peer < 0 ? -1 : physical(peer), why, stall_window_);
}

bool Context::stall_noticed() const {
  for (const Transport* t : links_->transports) {
    if (t->stall_noticed()) return true;
  }
  return false;
}

// A transport's own wait ends with kDeadlineExceeded at its deadline or on
// a stall notice; either way the call is lost and the stall is resolved.
Status Context::wait_send(int peer, Ticket t) {
  if (links_->transports.size() <= 1) {
    Status s = pair(peer).wait_send(t, deadline_);
    if (s.code() == StatusCode::kDeadlineExceeded) [[unlikely]] return stalled(peer, s);
    return s;
  }
  return poll_until([&](int& blame) {
    blame = peer;
    return pair(peer).test_send(t);
  });
}

Status Context::wait_recv(int peer, Ticket t) {
  if (links_->transports.size() <= 1) {
    Status s = pair(peer).wait_recv(t, deadline_);
    if (s.code() == StatusCode::kDeadlineExceeded) [[unlikely]] return stalled(peer, s);
    return s;
  }
  return poll_until([&](int& blame) {
    blame = peer;
    return pair(peer).test_recv(t);
  });
}

Status Context::wait_all_sends() {
  for (int g = 0; g < size(); ++g) {
    const Ticket last = (*last_send_)[static_cast<size_t>(physical(g))];
    if (last == 0 || g == rank()) continue;
    WEFT_RETURN_IF_ERROR(wait_send(g, last));
  }
  return ok_status();
}

void Context::reduce(void* dst, const void* src, size_t count) const {
  reduce_into(dst, src, count, dtype_, op_);
}

void Context::step(std::string_view phase, int distance) const {
  if (trace_ && *trace_) (*trace_)(phys_rank_, TraceEvent{TraceEvent::kStep, phase, distance, -1, 0});
}

Context Context::subgroup(const std::vector<int>& members) const {
  auto ranks = std::make_shared<std::vector<int>>();
  int me = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    ranks->push_back(physical(members[i]));
    if (members[i] == rank()) me = static_cast<int>(i);
  }
  Context c = *this;
  c.ranks_ = ranks->data();
  c.size_ = static_cast<int>(ranks->size());
  c.me_ = me;
  c.owned_ranks_ = std::move(ranks);
  return c;
}

Status Context::sendrecv(int peer, Buf sb, size_t soff, size_t slen, Buf rb, size_t roff, size_t rlen) {
  const int phys = physical(peer);
  ExchangePair* x = links_->transports.size() <= 1 ? links_->exchangers[static_cast<size_t>(phys)] : nullptr;
  if (x == nullptr) {
    WEFT_ASSIGN_OR_RETURN(Ticket r, recv(peer, rb, roff, rlen));
    WEFT_ASSIGN_OR_RETURN(Ticket s, send(peer, sb, soff, slen));
    WEFT_RETURN_IF_ERROR(wait_recv(peer, r));
    return wait_send(peer, s);
  }
  if (trace_ && *trace_) (*trace_)(phys_rank_, TraceEvent{TraceEvent::kSend, {}, 0, phys, slen});
  return exchanged(peer, phys,
                   x->exchange(mem(peer, sb), at(sb, soff), slen, mem(peer, rb), at(rb, roff), rlen, deadline_));
}

Status Context::exchanged(int peer, int phys, const Result<Ticket>& sent) {
  if (!sent) {
    // Its waits end like wait_recv's and wait_send's: a deadline or a
    // stall notice is resolved (stall.h).
    if (sent.status().code() == StatusCode::kDeadlineExceeded) [[unlikely]] return stalled(peer, sent.status());
    return sent.status();
  }
  (*last_send_)[static_cast<size_t>(phys)] = *sent;
  return ok_status();
}

Status Context::sendrecv_reduce(int peer, Buf sb, size_t soff, size_t slen, Buf rb, size_t roff, size_t rlen,
                                char* into) {
  const int phys = physical(peer);
  ExchangePair* x = links_->transports.size() <= 1 ? links_->exchangers[static_cast<size_t>(phys)] : nullptr;
  const auto from = reinterpret_cast<uintptr_t>(ptr(sb) + soff), to = reinterpret_cast<uintptr_t>(into);
  if (x == nullptr || (from < to + rlen && to < from + slen && !x->reduces_over_send(slen))) {
    if (x == nullptr) {
      WEFT_ASSIGN_OR_RETURN(Ticket r, recv(peer, rb, roff, rlen));
      WEFT_ASSIGN_OR_RETURN(Ticket s, send_held(peer, sb, soff, slen));
      WEFT_RETURN_IF_ERROR(wait_recv(peer, r));
      WEFT_RETURN_IF_ERROR(wait_send(peer, s));
    } else if (Status s = sendrecv(peer, sb, soff, slen, rb, roff, rlen); !s) {
      return s;
    }
    reduce(into, ptr(rb) + roff, rlen / esize_);
    return ok_status();
  }
  if (trace_ && *trace_) (*trace_)(phys_rank_, TraceEvent{TraceEvent::kSend, {}, 0, phys, slen});
  const ExchangePair::Reduction red{into, dtype_, op_};
  return exchanged(peer, phys,
                   x->exchange_reduce(mem(peer, sb), at(sb, soff), slen, mem(peer, rb), at(rb, roff), rlen, red,
                                      deadline_));
}

bool Context::reduces_over_send(int peer, size_t slen) const {
  const ExchangePair* x =
      links_->transports.size() <= 1 ? links_->exchangers[static_cast<size_t>(physical(peer))] : nullptr;
  return x != nullptr && x->reduces_over_send(slen);
}

Status exchange(Context& ctx, int to, Buf sb, size_t soff, size_t slen, int from, Buf rb,
                size_t roff, size_t rlen) {
  if (to == from) return ctx.sendrecv(to, sb, soff, slen, rb, roff, rlen);
  WEFT_ASSIGN_OR_RETURN(Ticket r, ctx.recv(from, rb, roff, rlen));
  WEFT_ASSIGN_OR_RETURN(Ticket s, ctx.send(to, sb, soff, slen));
  WEFT_RETURN_IF_ERROR(ctx.wait_recv(from, r));
  return ctx.wait_send(to, s);
}

}  // namespace weft::coll::internal
