// The shared-memory transport's setup and teardown: this rank's segment,
// every peer's mapped, the pairs' rings set up as they are first needed
// (shm_internal.h has the classes, shm_transport.cc the data path).
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <random>

#include <fmt/format.h>

#include "shm/shm_internal.h"
#include "shm/shm_single_copy.h"

namespace weft::coll::shm {
namespace detail {

ShmTransport::~ShmTransport() {
  if (own_.hdr()) {
    own_.hdr()->closed.store(1);
    for (ShmPair* p : active_) ring_bell(p->seg->hdr(), BellFence::kFull);
  }
  for (ShmPair* p : active_) {
    if (p->pidfd >= 0) ::close(p->pidfd);
  }
  if (!name_.empty()) ::shm_unlink(name_.c_str());  // normally gone already
}


// Every peer's segment is mapped (address space, no memory: a page is
// allocated when first touched), so that a pair can be connected after the
// names are gone; the rings of the pairs connected now are faulted in.
Status ShmTransport::connect(Store& store, Deadline deadline) {
  const int me = cfg_.rank;
  const std::vector<int> peers = cfg_.peer_ranks();
  const size_t bytes = Segment::bytes_for(cfg_.size, ring_bytes_);
  name_ = fmt::format("/weft-{}-{}-{:x}", ::getpid(), me, std::random_device{}());
  WEFT_ASSIGN_OR_RETURN(int fd, open_segment(name_, true, bytes));
  Status s = own_.map(fd, bytes);
  ::close(fd);
  WEFT_RETURN_IF_ERROR(s);
  // The rings of this segment are written by the peers and read here: fault
  // them in now, not during the first collectives (Segment::populate).
  WEFT_RETURN_IF_ERROR(own_.populate(0, Segment::control_bytes(cfg_.size)));
  SegmentHeader* h = own_.hdr();
  h->magic = kMagic;
  h->rank = me;
  h->size = cfg_.size;
  h->pid = ::getpid();
  sleep_fence_ = register_sleep_fence();
  h->sleep_fence = sleep_fence_ ? 1 : 0;
  h->ring_bytes = ring_bytes_;
  h->probe_addr = reinterpret_cast<uint64_t>(&h->magic);
  h->cpu.store(-1);
  // Before the peers can find this segment, so before any of them probes.
  const bool single = cfg_.shm.single_copy_min_bytes > 0;
  if (single && cfg_.shm.ptracer_parent) grant_ptrace_to_parent();
  const std::string key = cfg_.store_prefix + "/shm/";
  WEFT_RETURN_IF_ERROR(store.set_by(key + std::to_string(me), name_, deadline));
  std::vector<std::pair<int, int>> refused;  // peers this rank may not read: (rank, errno)

  pairs_.resize(static_cast<size_t>(cfg_.size));
  for (int p : peers) {
    auto pair = std::make_unique<ShmPair>(this, p);
    WEFT_ASSIGN_OR_RETURN(std::string name, store.get(key + std::to_string(p), deadline));
    WEFT_ASSIGN_OR_RETURN(int pfd, open_segment(name, false, bytes));
    pair->seg = std::make_unique<Segment>();
    Status ms = pair->seg->map(pfd, bytes);
    ::close(pfd);
    WEFT_RETURN_IF_ERROR(ms);
    SegmentHeader* ph = pair->seg->hdr();
    if (ph->magic != kMagic || ph->rank != p || ph->size != cfg_.size || ph->ring_bytes != ring_bytes_) {
      return failed_precondition(fmt::format("shared segment {} of rank {} does not match this rank's shm options", name, p));
    }
    pair->pid = ph->pid;
    if (sleep_fence_ && ph->sleep_fence == 1) pair->bell = BellFence::kCompiler;
    // Decided once, here: each large message then takes its path without a
    // failed system call first.
    if (single) {
      const int err = probe_single_copy(pair->pid, ph->probe_addr, kMagic);
      pair->recv_single = err == 0;
      if (err != 0) refused.emplace_back(p, err);
    }
    own_.ctl(p)->single_copy.store(pair->recv_single ? kSingleCopyAllowed : kSingleCopyRefused,
                                   std::memory_order_release);
    mapped_.push_back(pair.get());
    pairs_[static_cast<size_t>(p)] = std::move(pair);
  }
  for (int p : cfg_.setup_peer_ranks()) WEFT_RETURN_IF_ERROR(activate(*pairs_[static_cast<size_t>(p)]));
  // Once every peer has mapped this segment its name can go: the mapping
  // lives on, and no crash can leak it.
  WEFT_RETURN_IF_ERROR(store.set_by(key + "mapped/" + std::to_string(me), "1", deadline));
  for (int p : peers) WEFT_RETURN_IF_ERROR(store.get(key + "mapped/" + std::to_string(p), deadline).status());
  // Every peer's verdict on this rank was stored before its "mapped" key
  // (for every pair: one connected later reads it here too).
  for (ShmPair* pr : mapped_) {
    pr->send_single = pr->seg->ctl(me)->single_copy.load(std::memory_order_acquire) == kSingleCopyAllowed;
  }
  if (!refused.empty()) log_single_copy_refused(me, refused, cfg_.shm.single_copy_min_bytes);
  ::shm_unlink(name_.c_str());
  name_.clear();
  return ok_status();
}

// Both rings of the pair (the peer's in this segment, this rank's in the
// peer's) start empty in zeroed memory, so each end sets up its side alone,
// whenever it first needs the pair: no handshake.
Status ShmTransport::activate(ShmPair& p) {
  const int me = cfg_.rank;
  WEFT_RETURN_IF_ERROR(own_.populate(own_.ring_offset(p.peer()), ring_bytes_));
  WEFT_RETURN_IF_ERROR(p.seg->populate(0, Segment::control_bytes(cfg_.size)));
  WEFT_RETURN_IF_ERROR(p.seg->populate(p.seg->ring_offset(me), ring_bytes_));
  p.out = RingWriter(p.seg->ring(me), ring_bytes_, p.seg->ctl(me));
  p.in = RingReader(own_.ring(p.peer()), ring_bytes_, own_.ctl(p.peer()));
  p.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, p.pid, 0));
  p.active = true;
  active_.push_back(&p);
  return ok_status();
}

Status ShmTransport::connect_peers(const std::vector<int>& peers, Deadline deadline) {
  (void)deadline;
  std::lock_guard<std::mutex> l(mu_);
  WEFT_RETURN_IF_ERROR(check());
  for (int p : peers) {
    if (p < 0 || p >= cfg_.size || !pairs_[static_cast<size_t>(p)]) {
      return invalid_argument(fmt::format("shm transport: rank {} is not a peer of this transport", p));
    }
    if (!pairs_[static_cast<size_t>(p)]->active) WEFT_RETURN_IF_ERROR(activate(*pairs_[static_cast<size_t>(p)]));
  }
  return ok_status();
}

}  // namespace detail

Result<std::unique_ptr<Transport>> make_shm_transport(const TransportConfig& config, Store& store,
                                                      Deadline deadline) {
  auto t = std::make_unique<detail::ShmTransport>(config);
  WEFT_RETURN_IF_ERROR(t->connect(store, deadline));
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace weft::coll::shm
