// The connects in progress in this process, each parked between the calls
// NCCL makes to finish it.
//
// NCCL polls connect with the same handle until it returns a comm
// (ncclNet_t connect: "non-blocking, NULL until ready"; the proxy's
// sendProxyConnect, src/transport/net.cc). connect() keeps an id of its
// state in the handle's last 8 bytes, as NCCL's IB transport keeps its
// stage there. When NCCL stops polling (its communicator aborted, the
// handle freed) nothing tells the plugin, so a parked connect is freed
//   - when its NCCL context is finalized (v11: finalize(ctx) ends that
//     communicator's use of the plugin),
//   - when it has not been polled for `idle` (checked on each connect),
//   - at the latest when the plugin is unloaded (this table's destructor;
//     not while NCCL holds a comm: net.h Lasting).
// An id is never reused in the process: a stale handle polled after its
// connect was freed names no connect, and is refused, never aliased.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace weft::nccl_net {

template <typename T>
class InProgress {
 public:
  using Clock = std::chrono::steady_clock;

  // Parks `item` (started under NCCL context `owner`, nullptr before v11)
  // as polled at `now`; its id: `id` when not 0 (a resumed one), else a
  // new one.
  std::uint64_t park(std::uint64_t id, std::unique_ptr<T> item, const void* owner, Clock::time_point now) {
    std::lock_guard lock(mu_);
    if (id == 0) id = ++last_id_;
    parked_[id] = Parked{std::move(item), owner, now};
    return id;
  }

  // Takes the item parked under `id` out of the table (the caller advances
  // it, then parks it again or keeps what it made); nullptr when no item
  // is parked under that id.
  std::unique_ptr<T> resume(std::uint64_t id) {
    std::lock_guard lock(mu_);
    auto it = parked_.find(id);
    if (it == parked_.end()) return nullptr;
    std::unique_ptr<T> item = std::move(it->second.item);
    parked_.erase(it);
    return item;
  }

  // Frees every item last polled before `now - idle`; how many.
  std::size_t reap_idle(Clock::time_point now, Clock::duration idle) {
    return erase_if([&](const Parked& p) { return now - p.polled > idle; });
  }

  // Frees every item parked under `owner`; how many.
  std::size_t drop_owner(const void* owner) {
    return erase_if([&](const Parked& p) { return p.owner == owner; });
  }

  // Whether `id` was ever handed out (a connect parked then freed, or
  // finished, has one; bytes that no park wrote mostly do not).
  bool issued(std::uint64_t id) {
    std::lock_guard lock(mu_);
    return id != 0 && id <= last_id_;
  }

  std::size_t size() {
    std::lock_guard lock(mu_);
    return parked_.size();
  }

 private:
  struct Parked {
    std::unique_ptr<T> item;
    const void* owner = nullptr;
    Clock::time_point polled;
  };

  template <typename Pred>
  std::size_t erase_if(Pred pred) {
    // Destroyed outside the lock: an item's destructor may take its time
    // (QPs, sockets) and must not hold up other threads' connects.
    std::vector<std::unique_ptr<T>> doomed;
    {
      std::lock_guard lock(mu_);
      for (auto it = parked_.begin(); it != parked_.end();) {
        if (pred(it->second)) {
          doomed.push_back(std::move(it->second.item));
          it = parked_.erase(it);
        } else {
          ++it;
        }
      }
    }
    return doomed.size();
  }

  std::mutex mu_;
  std::uint64_t last_id_ = 0;
  std::map<std::uint64_t, Parked> parked_;
};

}  // namespace weft::nccl_net
