#include "ring_rank.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "../verbs/verbs_env.h"
#include "weft/nccl_net/driver.h"
#include "weft/collectives/store.h"

namespace weft::nccl_net::testing {
namespace {

using Clock = std::chrono::steady_clock;
using verbs::testing::pattern;

#define RING_CHECK(cond, ...)                                                           \
  do {                                                                                  \
    if (!(cond)) return fmt::format("rank {}: ", r.rank) + fmt::format(__VA_ARGS__); \
  } while (0)
#define RING_CALL(call) RING_CHECK((call) == ncclSuccess, "{} failed", #call)

constexpr std::uint8_t kUntouched = 0xEE;
constexpr std::size_t kSlack = 64;  // receive buffers are larger than the message by this much

std::uint32_t seed(int rank, std::size_t message, int part) {
  return static_cast<std::uint32_t>(rank * 100000 + static_cast<int>(message) * 100 + part);
}

// A registered buffer: the plugin's handle and its bytes.
struct Buffer {
  std::vector<std::uint8_t> bytes;
  void* mh = nullptr;
};

}  // namespace

const std::vector<std::size_t>& grouped_sizes() {
  static const std::vector<std::size_t> s = {0, 1, 7, 4099, 65536, 3, 1 << 20, 100};
  return s;
}

std::string run_ring_rank(const RingRank& r) {
  setenv("WEFT_NCCL_DEVICES", r.device.c_str(), 1);
  setenv("WEFT_NCCL_QPS", std::to_string(r.qps).c_str(), 1);
  if (r.plan_path.empty()) {
    unsetenv("WEFT_PLAN");
  } else {
    setenv("WEFT_PLAN", r.plan_path.c_str(), 1);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(90);
  auto store = coll::TcpStore::open("127.0.0.1", r.store_port, false, deadline);
  RING_CHECK(store, "store: {}", store.status().message());
  auto d = Driver::load(r.version);
  RING_CHECK(d, "{}", d.status().message());
  RING_CALL(d->init(nullptr, r.traffic_class));
  int ndev = 0;
  RING_CALL(d->devices(&ndev));
  RING_CHECK(ndev == 1, "{} devices with WEFT_NCCL_DEVICES={}", ndev, r.device);
  Props p;
  RING_CALL(d->properties(0, &p));
  RING_CHECK(p.name == r.device && p.ptr_support == 1 && p.max_recvs == 8 && p.port == 1 && p.speed > 0 &&
                 p.max_comms > 0,
             "properties: name {} ptrSupport {} maxRecvs {} port {} speed {} maxComms {}", p.name, p.ptr_support,
             p.max_recvs, p.port, p.speed, p.max_comms);
  if (r.version >= 9) RING_CHECK(p.force_flush == 0 && p.max_p2p_bytes > 0, "v9 properties");

  // listen, publish the handle, connect to the next rank, accept the previous.
  std::uint8_t mine[NCCL_NET_HANDLE_MAXSIZE] = {}, next[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* lc = nullptr;
  RING_CALL(d->listen(0, mine, &lc));
  const int to = (r.rank + 1) % r.nranks, from = (r.rank + r.nranks - 1) % r.nranks;
  RING_CHECK((*store)->set(fmt::format("handle/{}", r.rank), std::string(mine, mine + sizeof(mine))).is_ok(), "set");
  auto peer = (*store)->get(fmt::format("handle/{}", to), deadline);
  RING_CHECK(peer && peer->size() == sizeof(next), "handle of rank {}", to);
  std::memcpy(next, peer->data(), sizeof(next));
  void *sc = nullptr, *rc = nullptr;
  int polls = 0;
  while (sc == nullptr || rc == nullptr) {
    if (sc == nullptr) RING_CALL(d->connect(0, next, &sc));
    if (rc == nullptr) RING_CALL(d->accept(lc, &rc));
    ++polls;
    RING_CHECK(Clock::now() < deadline, "connect/accept still NULL after {} polls", polls);
  }

  // One message per payload, then one grouped receive of 8.
  for (std::size_t m = 0; m <= r.payloads.size(); ++m) {
    const bool grouped = m == r.payloads.size();
    const std::vector<std::size_t> parts = grouped ? grouped_sizes() : std::vector<std::size_t>{r.payloads[m]};
    const int n = static_cast<int>(parts.size());
    std::vector<Buffer> tx(parts.size()), rx(parts.size());
    std::vector<void*> rx_data, rx_mh;
    std::vector<std::size_t> rx_sizes;
    std::vector<int> tags;
    for (int k = 0; k < n; ++k) {
      tx[k].bytes = pattern(parts[k] + kSlack, seed(r.rank, m, k));
      rx[k].bytes.assign(parts[k] + kSlack * (k + 1), kUntouched);
      RING_CALL(d->reg_mr(sc, tx[k].bytes.data(), tx[k].bytes.size(), NCCL_PTR_HOST, &tx[k].mh));
      RING_CALL(d->reg_mr(rc, rx[k].bytes.data(), rx[k].bytes.size(), NCCL_PTR_HOST, &rx[k].mh));
      rx_data.push_back(rx[k].bytes.data());
      rx_mh.push_back(rx[k].mh);
      rx_sizes.push_back(rx[k].bytes.size());
      tags.push_back(100 + k);
    }
    void* rreq = nullptr;
    while (rreq == nullptr) {
      RING_CALL(d->irecv(rc, n, rx_data.data(), rx_sizes.data(), tags.data(), rx_mh.data(), &rreq));
      RING_CHECK(Clock::now() < deadline, "irecv stays NULL");
    }
    // Sends in reverse tag order: the plugin must match buffers by tag.
    std::vector<void*> sreq(parts.size(), nullptr);
    std::vector<bool> sdone(parts.size(), false);
    bool rdone = false;
    std::vector<int> got(parts.size(), -1);
    while (!rdone || std::find(sdone.begin(), sdone.end(), false) != sdone.end()) {
      for (int k = n - 1; k >= 0; --k) {
        if (sreq[k] == nullptr) {
          RING_CALL(d->isend(sc, tx[k].bytes.data(), parts[k], 100 + k, tx[k].mh, &sreq[k]));
          if (sreq[k] == nullptr) break;  // keep the order: later tags wait for this one
        } else if (!sdone[k]) {
          int done = 0, sent = -1;
          RING_CALL(d->test(sreq[k], &done, &sent));
          if (done) {
            RING_CHECK(sent == static_cast<int>(parts[k]), "send {} reports {} bytes, sent {}", k, sent, parts[k]);
            sdone[k] = true;
          }
        }
      }
      if (!rdone) {
        int done = 0;
        RING_CALL(d->test(rreq, &done, got.data()));
        rdone = done != 0;
        if (rdone) RING_CALL(d->irecv_consumed(rc, n, rreq));  // as NCCL's proxy does
      }
      RING_CHECK(Clock::now() < deadline, "message {} not done (received: {})", m, rdone);
    }
    for (int k = 0; k < n; ++k) {
      RING_CHECK(got[k] == static_cast<int>(parts[k]), "message {} part {}: test says {} bytes, rank {} sent {}", m, k,
                 got[k], from, parts[k]);
      const auto want = pattern(parts[k] + kSlack, seed(from, m, k));
      for (std::size_t i = 0; i < rx[k].bytes.size(); ++i) {
        const std::uint8_t expect = i < parts[k] ? want[i] : kUntouched;
        RING_CHECK(rx[k].bytes[i] == expect, "message {} part {} ({} bytes): byte {} is {:#04x}, expected {:#04x}", m,
                   k, parts[k], i, rx[k].bytes[i], expect);
      }
    }
    // Host memory: nothing to flush, and no request to wait for.
    std::vector<int> flush_sizes(parts.begin(), parts.end());
    void* freq = reinterpret_cast<void*>(1);
    RING_CALL(d->iflush(rc, n, rx_data.data(), flush_sizes.data(), rx_mh.data(), &freq));
    RING_CHECK(freq == nullptr, "iflush of host memory returned a request");
    for (int k = 0; k < n; ++k) {
      RING_CALL(d->dereg_mr(sc, tx[k].mh));
      RING_CALL(d->dereg_mr(rc, rx[k].mh));
    }
  }

  // Pipelined, as NCCL's proxy runs a connection: up to 8 receives and 8
  // sends in flight, 40 messages of awkward sizes (past the 32 request slots,
  // so every slot is reused), one registration each side, completed in order.
  {
    constexpr int kMsgs = 40, kInFlight = 8;
    constexpr std::size_t kGap = 16;
    std::vector<std::size_t> off(kMsgs + 1, 0), len(kMsgs);
    for (int k = 0; k < kMsgs; ++k) {
      len[k] = static_cast<std::size_t>(k) * 7919 % 20000;  // 0, 7919, 15838, 3757, ...
      off[k + 1] = off[k] + len[k] + kGap;
    }
    std::vector<std::uint8_t> tx = pattern(off[kMsgs], seed(r.rank, 999, 0)), rx(off[kMsgs], kUntouched);
    void *mt = nullptr, *mr = nullptr;
    RING_CALL(d->reg_mr(sc, tx.data(), tx.size(), NCCL_PTR_HOST, &mt));
    RING_CALL(d->reg_mr(rc, rx.data(), rx.size(), NCCL_PTR_HOST, &mr));
    std::vector<void*> rreq(kMsgs, nullptr), sreq(kMsgs, nullptr);
    int posted_r = 0, posted_s = 0, done_r = 0, done_s = 0;
    while (done_r < kMsgs || done_s < kMsgs) {
      if (posted_r < kMsgs && posted_r - done_r < kInFlight) {
        void* data = rx.data() + off[posted_r];
        std::size_t size = len[posted_r] + kGap;
        int tag = 7;
        RING_CALL(d->irecv(rc, 1, &data, &size, &tag, &mr, &rreq[posted_r]));
        if (rreq[posted_r] != nullptr) ++posted_r;
      }
      if (posted_s < kMsgs && posted_s - done_s < kInFlight) {
        RING_CALL(d->isend(sc, tx.data() + off[posted_s], len[posted_s], 7, mt, &sreq[posted_s]));
        if (sreq[posted_s] != nullptr) ++posted_s;
      }
      int done = 0, n = -1;
      if (done_r < posted_r) {
        RING_CALL(d->test(rreq[done_r], &done, &n));
        if (done) {
          RING_CALL(d->irecv_consumed(rc, 1, rreq[done_r]));  // as NCCL's proxy does
          RING_CHECK(n == static_cast<int>(len[done_r]), "pipelined message {}: test says {} bytes, sent {}", done_r,
                     n, len[done_r]);
          ++done_r;
        }
      }
      if (done_s < posted_s) {
        RING_CALL(d->test(sreq[done_s], &done, nullptr));
        if (done) ++done_s;
      }
      RING_CHECK(Clock::now() < deadline, "pipelined: {} of {} received, {} sent", done_r, kMsgs, done_s);
    }
    const auto want = pattern(off[kMsgs], seed(from, 999, 0));  // rank `from` sent its copy of this layout
    for (int k = 0; k < kMsgs; ++k) {
      for (std::size_t i = off[k]; i < off[k + 1]; ++i) {
        const std::uint8_t expect = i < off[k] + len[k] ? want[i] : kUntouched;
        RING_CHECK(rx[i] == expect, "pipelined message {} ({} bytes): byte {} is {:#04x}, expected {:#04x}", k, len[k],
                   i - off[k], rx[i], expect);
      }
    }
    RING_CALL(d->dereg_mr(sc, mt));
    RING_CALL(d->dereg_mr(rc, mr));
  }

  weft_nccl_net_counters_t c = d->counters();
  RING_CHECK(c.planned == static_cast<std::uint64_t>(r.expect_planned_qps) && c.unplanned == 0 &&
                 c.unapplicable == 0 && c.errors == 0,
             "counters: planned {} (expected {}), unplanned {}, unapplicable {}, errors {}", c.planned,
             r.expect_planned_qps, c.unplanned, c.unapplicable, c.errors);
  // Nobody closes while a neighbour may still be polling its last message.
  RING_CHECK((*store)->set(fmt::format("done/{}", r.rank), "1").is_ok(), "set done");
  for (int peer_rank : {to, from}) {
    RING_CHECK((*store)->get(fmt::format("done/{}", peer_rank), deadline), "rank {} never finished", peer_rank);
  }
  if (r.exit_with_live_comms) {
    static std::vector<std::uint8_t> never(4096, kUntouched);  // the thread outlives this frame
    void* mh = nullptr;
    RING_CALL(d->reg_mr(rc, never.data(), never.size(), NCCL_PTR_HOST, &mh));
    void* data = never.data();
    std::size_t size = never.size();
    int tag = 1;
    void* req = nullptr;
    while (req == nullptr) {
      RING_CALL(d->irecv(rc, 1, &data, &size, &tag, &mh, &req));
      RING_CHECK(Clock::now() < deadline, "irecv stays NULL");
    }
    Driver* driver = &*d;  // exit(3) unwinds no stack: it stays valid
    static std::atomic<long> test_calls{0};
    std::thread([driver, req] {
      for (int done = 0, n = 0; driver->test(req, &done, &n) == ncclSuccess && !done;) test_calls.fetch_add(1);
    }).detach();
    while (test_calls.load() < 1000) std::this_thread::yield();
    std::exit(0);
  }
  RING_CALL(d->close_send(sc));
  RING_CALL(d->close_recv(rc));
  RING_CALL(d->close_listen(lc));
  RING_CALL(d->finalize());
  return "";
}

}  // namespace weft::nccl_net::testing
