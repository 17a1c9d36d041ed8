// PyTorch's rendezvous store (the TCPStore or FileStore that
// init_process_group and torchrun hand a backend, behind PrefixStores) as
// weft's Store (weft/collectives/store.h), so that the library's ranks meet
// through whatever torch.distributed was launched with.
//
//   C10dStore store(c10d_store);                 // prefix store of the group
//   auto comm = coll::Communicator::create(cfg, store);
//
// Keys get the group's prefix from PyTorch, so the groups of one job do not
// collide. local_address() is this host's address towards the TCPStore's
// host (MASTER_ADDR under torchrun), where the library's TCP transport
// listens when the ranks span several hosts (TcpOptions::listen_address).
#pragma once

#include <chrono>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "weft/collectives/store.h"

namespace weft::pt {

class C10dStore final : public coll::Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store);
  Status set(const std::string& key, const std::string& value) override;
  Result<std::string> get(const std::string& key, std::chrono::steady_clock::time_point deadline) override;
  std::string local_address() const override { return local_address_; }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  std::string local_address_;
};

// Called by a rank that cannot create its group, before it raises: waits
// until every rank of the group has called it, or the timeout. Rank 0 serves
// torch's TCPStore from the process that called init_process_group, and the
// store goes when that call raises; ranks still connecting would then fail
// with a socket timeout instead of the reason (a bad WEFT_TRANSPORT is bad
// on every rank). A rank that did not fail never calls it: the failed rank
// waits out its timeout, as that rank waits for the failed one's keys.
// `deadline` is at most a little past the group's creation deadline (its
// start + its timeout): a rank that failed by waiting that long for its
// peers does not wait another timeout.
void hold_until_every_rank_failed(const c10::intrusive_ptr<c10d::Store>& store, int size,
                                  std::chrono::steady_clock::time_point deadline);

// The IPv4 address this host would use to reach the TCPStore under `store`
// (PrefixStores unwrapped); "" for other stores (files, hash) or when the
// host cannot be resolved.
std::string route_address(const c10::intrusive_ptr<c10d::Store>& store);

}  // namespace weft::pt
