#include "algorithms/ring_phases.h"

#include "weft/routing/schedule.h"

namespace weft::coll::internal {

Chunks ring_chunks(int p, size_t offset, size_t count, size_t esize, size_t seg_bytes) {
  Chunks out;
  for (int c = 0; c < p; ++c) {
    routing::Range r = routing::ring_chunk(p, c, count);
    out.push_back(split(offset + r.lo, r.size(), esize, seg_bytes));
  }
  return out;
}

Chunks block_chunks(int p, size_t offset, size_t block, size_t esize, size_t seg_bytes) {
  Chunks out;
  for (int c = 0; c < p; ++c) out.push_back(split(offset + static_cast<size_t>(c) * block, block, esize, seg_bytes));
  return out;
}

namespace {

const std::vector<Segment>& chunk(const Chunks& ch, int c) {
  const int p = static_cast<int>(ch.size());
  return ch[static_cast<size_t>(((c % p) + p) % p)];
}

}  // namespace

Status ring_reduce_scatter(Context& ctx, const Chunks& chunks, int shift, bool answered) {
  const int p = ctx.size(), r = ctx.rank();
  if (p < 2) return ok_status();
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  const size_t es = ctx.esize();
  char* d = ctx.ptr(kData);
  const char* t = ctx.ptr(kScratch);
  auto send = [&](const Segment& g) {
    return (answered ? ctx.send_held(next, kData, g.lo * es, g.n * es) : ctx.send(next, kData, g.lo * es, g.n * es))
        .status();
  };
  // Every chunk received lands at its own place in scratch, so all receives
  // can be posted now: a one-sided transport has its credits early.
  std::vector<Ticket> rt;
  for (int i = 0; i + 1 < p; ++i) {
    for (const Segment& g : chunk(chunks, r + shift - 2 - i)) {
      WEFT_ASSIGN_OR_RETURN(Ticket tk, ctx.recv(prev, kScratch, g.lo * es, g.n * es));
      rt.push_back(tk);
    }
  }
  for (const Segment& g : chunk(chunks, r + shift - 1)) WEFT_RETURN_IF_ERROR(send(g));
  size_t k = 0;
  for (int i = 0; i + 1 < p; ++i) {
    for (const Segment& g : chunk(chunks, r + shift - 2 - i)) {
      WEFT_RETURN_IF_ERROR(ctx.wait_recv(prev, rt[k++]));
      ctx.reduce(d + g.lo * es, t + g.lo * es, g.n);
      if (i + 2 < p) WEFT_RETURN_IF_ERROR(send(g));
    }
  }
  // What follows may overwrite the chunks sent from.
  return ctx.wait_all_sends();
}

Status ring_allgather(Context& ctx, const Chunks& chunks, int shift) {
  const int p = ctx.size(), r = ctx.rank();
  if (p < 2) return ok_status();
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  const size_t es = ctx.esize();
  std::vector<Ticket> rt;
  for (int i = 0; i + 1 < p; ++i) {
    for (const Segment& g : chunk(chunks, r + shift - 1 - i)) {
      WEFT_ASSIGN_OR_RETURN(Ticket tk, ctx.recv(prev, kData, g.lo * es, g.n * es));
      rt.push_back(tk);
    }
  }
  for (const Segment& g : chunk(chunks, r + shift)) {
    WEFT_RETURN_IF_ERROR(ctx.send(next, kData, g.lo * es, g.n * es).status());
  }
  size_t k = 0;
  for (int i = 0; i + 1 < p; ++i) {
    for (const Segment& g : chunk(chunks, r + shift - 1 - i)) {
      WEFT_RETURN_IF_ERROR(ctx.wait_recv(prev, rt[k++]));
      if (i + 2 < p) WEFT_RETURN_IF_ERROR(ctx.send(next, kData, g.lo * es, g.n * es).status());
    }
  }
  return ctx.wait_all_sends();
}

}  // namespace weft::coll::internal
