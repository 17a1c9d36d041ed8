#include "loopback/loopback_transport.h"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include <fmt/format.h>

namespace weft::coll {
namespace {

struct Op {
  char* ptr;
  size_t len;
};

// One direction src -> dst.
struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Op> sends, recvs;
  Ticket sends_done = 0, recvs_done = 0;
  Ticket sends_posted = 0, recvs_posted = 0;
  std::string error;  // set once: length mismatch, peer gone, abort
  bool aborted = false;
  Status failure() const { return aborted ? weft::aborted(error) : unavailable(error); }

  void match_locked(int src, int dst) {
    while (!sends.empty() && !recvs.empty() && error.empty()) {
      Op s = sends.front(), r = recvs.front();
      if (s.len != r.len) {
        error = fmt::format("message {} from rank {} to rank {}: {} bytes sent, {} bytes expected",
                            recvs_done + 1, src, dst, s.len, r.len);
        break;
      }
      if (s.len) std::memcpy(r.ptr, s.ptr, s.len);
      sends.pop_front();
      recvs.pop_front();
      ++sends_done;
      ++recvs_done;
    }
    cv.notify_all();
  }
};

struct Hub {
  explicit Hub(int n) : size(n), channels(static_cast<size_t>(n * n)), stall(static_cast<size_t>(n)) {
    for (auto& s : stall) s.store(Transport::kNoStallNotice);
  }
  Channel& ch(int src, int dst) { return channels[static_cast<size_t>(src * size + dst)]; }
  void fail_all(const std::string& why) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (failed.empty()) failed = why;
    }
    for (auto& c : channels) {
      std::lock_guard<std::mutex> l(c.mu);
      if (c.error.empty()) {
        c.error = why;
        c.aborted = true;
      }
      c.cv.notify_all();
    }
  }
  // Rank `me` has heard a stall notice: some other rank posted one.
  bool stall_heard_by(int me) const {
    return stalled_ranks.load() > (stall[static_cast<size_t>(me)].load() != Transport::kNoStallNotice ? 1 : 0);
  }
  // Publishes rank me's notice, then wakes every wait (under each channel's
  // lock, so that a waiter either sees the count or gets the wake-up).
  void post_stall(int me, int waits_on) {
    if (stall[static_cast<size_t>(me)].exchange(waits_on) == Transport::kNoStallNotice) ++stalled_ranks;
    for (auto& c : channels) {
      std::lock_guard<std::mutex> l(c.mu);
      c.cv.notify_all();
    }
  }
  int size;
  std::deque<Channel> channels;
  std::vector<std::atomic<int>> stall;  // by rank: whom it said it waits on
  std::atomic<int> stalled_ranks{0};
  std::mutex mu;
  std::string failed;  // abort() of any rank
};

std::mutex g_hubs_mu;
std::map<std::string, std::weak_ptr<Hub>> g_hubs;

class LoopbackPair final : public Pair {
 public:
  LoopbackPair(std::shared_ptr<Hub> hub, int me, int peer) : hub_(std::move(hub)), me_(me), peer_(peer) {}
  int peer() const override { return peer_; }

  Result<Ticket> send(const Memory& mem, size_t offset, size_t len) override {
    if (offset + len > mem.size()) return out_of_range(range_msg("send", offset, len, mem.size()));
    Channel& c = hub_->ch(me_, peer_);
    std::lock_guard<std::mutex> l(c.mu);
    if (!c.error.empty()) return c.failure();
    c.sends.push_back({static_cast<char*>(mem.data()) + offset, len});
    c.match_locked(me_, peer_);
    return ++c.sends_posted;
  }
  Result<Ticket> recv(Memory& mem, size_t offset, size_t len) override {
    if (offset + len > mem.size()) return out_of_range(range_msg("recv", offset, len, mem.size()));
    Channel& c = hub_->ch(peer_, me_);
    std::lock_guard<std::mutex> l(c.mu);
    if (!c.error.empty()) return c.failure();
    c.recvs.push_back({static_cast<char*>(mem.data()) + offset, len});
    c.match_locked(peer_, me_);
    return ++c.recvs_posted;
  }
  Status wait_send(Ticket t, Deadline d) override { return wait(hub_->ch(me_, peer_), t, d, true); }
  Status wait_recv(Ticket t, Deadline d) override { return wait(hub_->ch(peer_, me_), t, d, false); }
  Result<bool> test_send(Ticket t) override { return test(hub_->ch(me_, peer_), t, true); }
  Result<bool> test_recv(Ticket t) override { return test(hub_->ch(peer_, me_), t, false); }

 private:
  std::string range_msg(const char* what, size_t off, size_t len, size_t size) const {
    return fmt::format("{} to rank {}: [{}, {}) lies outside the {}-byte buffer", what, peer_, off,
                       off + len, size);
  }
  Result<bool> test(Channel& c, Ticket t, bool is_send) {
    std::lock_guard<std::mutex> l(c.mu);
    if ((is_send ? c.sends_done : c.recvs_done) >= t) return true;
    if (!c.error.empty()) return c.failure();
    return false;
  }
  Status wait(Channel& c, Ticket t, Deadline d, bool is_send) {
    std::unique_lock<std::mutex> l(c.mu);
    Ticket& done = is_send ? c.sends_done : c.recvs_done;
    if (!c.cv.wait_until(l, d, [&] { return done >= t || !c.error.empty() || hub_->stall_heard_by(me_); })) {
      return deadline_exceeded(fmt::format("timed out waiting for rank {} ({} of message {})", peer_,
                                           is_send ? "send" : "receive", t));
    }
    if (done >= t) return ok_status();
    if (c.error.empty()) return deadline_exceeded("a peer reported a stalled call");
    return c.failure();
  }
  std::shared_ptr<Hub> hub_;
  int me_, peer_;
};

class LoopbackTransport final : public Transport {
 public:
  // Every served pair exists from the start (a pair of queues in the hub);
  // the ones not connected at setup are hidden until connect_peers, as a
  // transport with real connections would have them, so that the
  // communicator's connections on demand run in the thread-based tests too.
  LoopbackTransport(std::shared_ptr<Hub> hub, const TransportConfig& cfg)
      : hub_(std::move(hub)), rank_(cfg.rank), connected_(static_cast<size_t>(cfg.size), false) {
    pairs_.resize(static_cast<size_t>(cfg.size));
    for (int p : cfg.peer_ranks()) pairs_[static_cast<size_t>(p)] = std::make_unique<LoopbackPair>(hub_, rank_, p);
    for (int p : cfg.setup_peer_ranks()) connected_[static_cast<size_t>(p)] = true;
  }
  ~LoopbackTransport() override {
    // A peer still waiting on this rank learns it left instead of hanging.
    for (size_t p = 0; p < pairs_.size(); ++p) {
      if (!pairs_[p]) continue;
      for (Channel* c : {&hub_->ch(rank_, static_cast<int>(p)), &hub_->ch(static_cast<int>(p), rank_)}) {
        std::lock_guard<std::mutex> l(c->mu);
        if (c->error.empty() && !(c->sends.empty() && c->recvs.empty())) {
          c->error = fmt::format("rank {} closed its communicator with messages pending", rank_);
        }
        c->cv.notify_all();
      }
    }
  }
  std::string_view name() const override { return "loopback"; }
  int rank() const override { return rank_; }
  int size() const override { return hub_->size; }
  Pair* pair(int peer) override {
    if (peer < 0 || peer >= hub_->size || !connected_[static_cast<size_t>(peer)]) return nullptr;
    return pairs_[static_cast<size_t>(peer)].get();
  }
  Status connect_peers(const std::vector<int>& peers, Deadline deadline) override {
    (void)deadline;
    for (int p : peers) {
      if (p < 0 || p >= hub_->size || !pairs_[static_cast<size_t>(p)]) {
        return invalid_argument(fmt::format("loopback transport: rank {} is not a peer of this transport", p));
      }
      connected_[static_cast<size_t>(p)] = true;
    }
    return ok_status();
  }
  Result<std::unique_ptr<Memory>> register_memory(void* data, size_t size) override {
    return std::unique_ptr<Memory>(std::make_unique<HostMemory>(data, size));
  }
  Result<bool> poll() override {  // matching happens when posted
    std::lock_guard<std::mutex> l(hub_->mu);
    if (!hub_->failed.empty()) return aborted(hub_->failed);
    return false;
  }
  void abort(const Status& reason) override {
    hub_->fail_all(fmt::format("rank {} aborted: {}", rank_, reason.message()));
  }
  bool has_stall_notices() const override { return true; }
  void post_stall_notice(int waits_on) override { hub_->post_stall(rank_, waits_on); }
  int stall_notice(int peer) override { return hub_->stall[static_cast<size_t>(peer)].load(); }
  bool stall_noticed() const override { return hub_->stall_heard_by(rank_); }

 private:
  std::shared_ptr<Hub> hub_;
  int rank_;
  std::vector<std::unique_ptr<LoopbackPair>> pairs_;
  std::vector<bool> connected_;  // by rank: pair() shows it
};

}  // namespace

Result<std::unique_ptr<Transport>> make_loopback_transport(const TransportConfig& config,
                                                           Store& store, Deadline deadline) {
  const std::string key = config.store_prefix + "/loopback/hub";
  std::shared_ptr<Hub> hub;
  if (config.rank == 0) {
    static std::atomic<uint64_t> counter{0};
    const std::string id = fmt::format("{}:{}", getpid(), counter++);
    hub = std::make_shared<Hub>(config.size);
    {
      std::lock_guard<std::mutex> l(g_hubs_mu);
      g_hubs[id] = hub;
    }
    // Every rank holds the hub before rank 0 returns, so it cannot vanish
    // between publication and lookup.
    WEFT_RETURN_IF_ERROR(store.set_by(key, id, deadline));
    for (int r = 1; r < config.size; ++r) {
      WEFT_RETURN_IF_ERROR(store.get(fmt::format("{}/joined/{}", key, r), deadline).status());
    }
  } else {
    WEFT_ASSIGN_OR_RETURN(std::string id, store.get(key, deadline));
    {
      std::lock_guard<std::mutex> l(g_hubs_mu);
      auto it = g_hubs.find(id);
      if (it != g_hubs.end()) hub = it->second.lock();
    }
    if (!hub) {
      return failed_precondition(fmt::format(
          "loopback hub {} is not in this process: the loopback transport needs every rank to be a "
          "thread of one process",
          id));
    }
    if (hub->size != config.size) {
      return invalid_argument(fmt::format("loopback hub has {} ranks, this rank was told {}", hub->size, config.size));
    }
    WEFT_RETURN_IF_ERROR(store.set_by(fmt::format("{}/joined/{}", key, config.rank), "1", deadline));
  }
  return std::unique_ptr<Transport>(std::make_unique<LoopbackTransport>(std::move(hub), config));
}

}  // namespace weft::coll
