// The TCP store server's protocol without sockets (store_core.h).
#include "bootstrap/store_core.h"

#include <algorithm>

#include <fmt/format.h>

namespace weft::coll::store_internal {

using namespace store_wire;

uint64_t StoreCore::open() {
  ++accepted_;
  conns_.emplace(next_, Conn{});
  return next_++;
}

bool StoreCore::ready(uint64_t c) const {
  auto it = conns_.find(c);
  return it != conns_.end() && it->second.phase == Phase::kReady;
}

void StoreCore::handshake_expired(uint64_t c) {
  if (auto it = conns_.find(c); it != conns_.end() && it->second.phase != Phase::kReady) ++timed_out_;
}

void StoreCore::close(uint64_t c) {
  auto it = conns_.find(c);
  if (it == conns_.end()) return;
  if (it->second.waiting) {
    auto [lo, hi] = waiting_.equal_range(it->second.wait_key);
    for (auto w = lo; w != hi; ++w) {
      if (w->second == c) {
        waiting_.erase(w);
        break;
      }
    }
  }
  conns_.erase(it);
}

TcpStoreCounters StoreCore::counters() const {
  return TcpStoreCounters{accepted_.load(), garbage_.load(),   refused_.load(), timed_out_.load(),
                          over_capacity_.load(), oversize_.load(), full_.load()};
}

// Client hello: magic (checked by feed: anything else is a stray
// connection, a port scanner, a load balancer's probe, another protocol,
// dropped without a word), version, flags, nonce.
bool StoreCore::hello(uint64_t id, Conn& c, std::vector<Out>& out) {
  const char* p = c.in.data();
  if (get32(p + 4) != kVersion) {
    out.push_back({id, error_reply(fmt::format("store protocol version {}; this store speaks {}", get32(p + 4), kVersion))});
    return drop(garbage_);
  }
  const bool has_secret = (get32(p + 8) & kFlagSecret) != 0;
  if (!secret_.empty() && !has_secret) {
    out.push_back({id, error_reply("this store requires a shared secret (WEFT_STORE_SECRET or "
                                   "WEFT_STORE_SECRET_FILE) and this process has none")});
    return drop(refused_);
  }
  if (secret_.empty() && has_secret) {
    out.push_back({id, error_reply("this process has a store secret but the store was started without one "
                                   "(give rank 0 the same WEFT_STORE_SECRET or WEFT_STORE_SECRET_FILE)")});
    return drop(refused_);
  }
  std::memcpy(c.client_nonce.data(), p + 12, kNonceBytes);
  c.server_nonce = random_nonce();
  std::string challenge;
  put32(challenge, secret_.empty() ? 0 : kFlagSecret);
  challenge += bytes(c.server_nonce);
  out.push_back({id, reply(kOk, challenge)});
  c.in.erase(0, kHelloBytes);
  c.phase = Phase::kProof;
  return true;
}

bool StoreCore::proof(uint64_t id, Conn& c, std::vector<Out>& out) {
  if (!secret_.empty() && !proofs_equal(client_proof(secret_, c.server_nonce, c.client_nonce), c.in.data())) {
    out.push_back({id, error_reply("wrong store secret (WEFT_STORE_SECRET or WEFT_STORE_SECRET_FILE differs "
                                   "from rank 0's)")});
    return drop(refused_);
  }
  // The client proved itself first; now the server proves it is no
  // impostor that took the port.
  const Proof mine = server_proof(secret_, c.client_nonce, c.server_nonce);
  out.push_back({id, reply(kOk, std::string_view(reinterpret_cast<const char*>(mine.data()), mine.size()))});
  c.in.erase(0, kProofBytes);
  c.phase = Phase::kReady;
  return true;
}

void StoreCore::set(uint64_t id, std::string key, std::string value, std::vector<Out>& out) {
  const size_t charge = key.size() + value.size() + kKeyOverhead;
  auto it = kv_.find(key);
  const size_t freed = it == kv_.end() ? 0 : key.size() + it->second.size() + kKeyOverhead;
  if (held_ - freed + charge > limits_.max_total_bytes) {
    ++full_;
    out.push_back({id, error_reply(fmt::format("the store is full: {} bytes held, a set of {} more would pass the "
                                               "limit of {} (TcpStoreLimits::max_total_bytes)",
                                               held_, charge - std::min(charge, freed), limits_.max_total_bytes))});
    return;
  }
  held_ = held_ - freed + charge;
  auto [lo, hi] = waiting_.equal_range(key);
  for (auto w = lo; w != hi; ++w) {
    Conn& other = conns_.at(w->second);
    other.waiting = false;
    other.wait_key.clear();
    out.push_back({w->second, reply(kOk, value)});
  }
  waiting_.erase(lo, hi);
  if (it == kv_.end()) {
    kv_.emplace(std::move(key), std::move(value));
  } else {
    it->second = std::move(value);
  }
  out.push_back({id, reply(kOk, "")});
}

size_t StoreCore::request(uint64_t id, Conn& c, std::vector<Out>& out, bool* keep) {
  if (c.in.size() < kRequestHeader) return 0;
  const uint32_t op = get32(c.in.data()), klen = get32(c.in.data() + 4), vlen = get32(c.in.data() + 8);
  if ((op != kSet && op != kGet) || (op == kGet && vlen != 0)) {
    *keep = drop(garbage_);
    return 0;
  }
  const uint64_t total = kRequestHeader + uint64_t{klen} + vlen;
  if (std::string why = size_error(limits_, klen, vlen); !why.empty()) {
    // Answered and skipped: the client learns why, and the connection stays
    // in step without the server holding the oversize bytes.
    ++oversize_;
    out.push_back({id, error_reply(why)});
    const size_t used = static_cast<size_t>(std::min<uint64_t>(total, c.in.size()));
    c.skip = total - used;
    return used;
  }
  if (c.in.size() < total) return 0;
  std::string key = c.in.substr(kRequestHeader, klen);
  if (op == kSet) {
    set(id, std::move(key), c.in.substr(kRequestHeader + klen, vlen), out);
  } else if (auto it = kv_.find(key); it != kv_.end()) {
    out.push_back({id, reply(kOk, it->second)});
  } else {
    c.waiting = true;
    c.wait_key = key;
    waiting_.emplace(std::move(key), id);
  }
  return static_cast<size_t>(total);
}

bool StoreCore::feed(uint64_t id, std::string_view bytes, std::vector<Out>& out) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return false;
  Conn& c = it->second;
  const size_t skipped = static_cast<size_t>(std::min<uint64_t>(c.skip, bytes.size()));
  c.skip -= skipped;
  c.in.append(bytes.substr(skipped));
  for (;;) {
    switch (c.phase) {
      case Phase::kHello:
        // A stranger is known by its first four bytes; no need to wait for 44.
        if (c.in.size() >= 4 && get32(c.in.data()) != kMagic) return drop(garbage_);
        if (c.in.size() < kHelloBytes) return true;
        if (!hello(id, c, out)) return false;
        break;
      case Phase::kProof:
        if (c.in.size() < kProofBytes) return true;
        if (!proof(id, c, out)) return false;
        break;
      case Phase::kReady: {
        if (c.in.empty()) return true;
        // One request at a time: a client whose get waits sends nothing.
        if (c.waiting) return drop(garbage_);
        bool keep = true;
        const size_t used = request(id, c, out, &keep);
        if (!keep) return false;
        if (used == 0) return true;
        c.in.erase(0, used);
        if (c.skip) return true;
        break;
      }
    }
  }
}

}  // namespace weft::coll::store_internal
