// One-shot AllReduce for small vectors: every rank sends its whole vector to
// every peer, then reduces all P vectors itself — one round of messages,
// where butterfly needs log2(P) dependent rounds (plus two for a fold). The
// "one-shot" custom AllReduce of TensorRT-LLM (AllReduceStrategyType
// ONESHOT) and vLLM (custom_all_reduce.cuh, cross_device_reduce_1stage):
// for latency-bound sizes the number of synchronisations decides, not the
// (P-1) x bytes each rank moves. Why it matters here: where a host's ranks
// outnumber its CPUs, every dependent round can cost a context switch per
// CPU; with butterfly the time of a 4-rank call then depends on which ranks
// happen to share a CPU (bench/results/2026-11-24-allreduce-selection.md).
//
// Every rank reduces in rank order, ((x0 op x1) op x2) ... op x(P-1), with the
// accumulator always on the left (min/max keep the left operand on a NaN or
// on +0/-0, so even their operand order is fixed): the bits are the same on
// every rank for every type and op.
#include <cstring>

#include "algorithms/algorithms.h"

namespace weft::coll::internal {
namespace {

class OneShot final : public Plan {
 public:
  explicit OneShot(const Shape& s)
      : bytes_(s.count * s.esize), count_(s.count), size_(s.size), me_(s.rank),
        recv_(static_cast<size_t>(s.size)) {}
  // Peer p's vector lands in slot p (p < me) or p - 1 (p > me).
  size_t scratch_bytes() const override { return bytes_ * static_cast<size_t>(size_ - 1); }
  std::vector<int> peers() const override {  // every other rank
    std::vector<int> out;
    for (int p = 0; p < size_; ++p) out.push_back(p);
    return peer_set(std::move(out), me_);
  }

  Status run(Context& ctx) const override {
    ctx.step("oneshot", 1);
    // Receives first (transport.h: a one-sided transport's credit leaves
    // before the data); peers in the order me-1, me-2, ... and sends to
    // me+1, me+2, ..., so that no rank is everyone's first target.
    for (int k = 1; k < size_; ++k) {
      const int from = (me_ - k + size_) % size_;
      WEFT_ASSIGN_OR_RETURN(recv_[static_cast<size_t>(from)], ctx.recv(from, kScratch, slot(from), bytes_));
    }
    for (int k = 1; k < size_; ++k) WEFT_RETURN_IF_ERROR(ctx.send((me_ + k) % size_, kData, 0, bytes_).status());
    for (int k = 1; k < size_; ++k) {
      const int from = (me_ - k + size_) % size_;
      WEFT_RETURN_IF_ERROR(ctx.wait_recv(from, recv_[static_cast<size_t>(from)]));
    }
    // kData is the source of the sends until they are done.
    WEFT_RETURN_IF_ERROR(ctx.wait_all_sends());
    char* data = ctx.ptr(kData);
    char* scratch = ctx.ptr(kScratch);
    char* acc = me_ == 0 ? data : scratch;  // x0: this rank's own vector, or peer 0's slot
    for (int p = 1; p < size_; ++p) ctx.reduce(acc, p == me_ ? data : scratch + slot(p), count_);
    if (acc != data) std::memcpy(data, acc, bytes_);
    return ok_status();
  }

 private:
  size_t slot(int peer) const { return static_cast<size_t>(peer < me_ ? peer : peer - 1) * bytes_; }

  size_t bytes_, count_;
  int size_, me_;
  mutable std::vector<Ticket> recv_;  // by peer; a plan runs on one thread at a time
};

}  // namespace

std::unique_ptr<Plan> plan_allreduce_oneshot(const Shape& s) { return std::make_unique<OneShot>(s); }

}  // namespace weft::coll::internal
