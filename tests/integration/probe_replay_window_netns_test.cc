// Captured probes replayed at an agent's maximum rate for the whole replay
// window, against real `weft agent`s on a netns spine-leaf fabric.
//
// A first campaign's controller (`weft probe`) is killed mid-campaign, so the
// agents keep its campaign key (only the controller's `retire` removes it,
// agent/controller_run.cc): the replay guard and the ±30 s send-time check,
// not a missing key, must then refuse every copy. A tap on h1-1's link copies
// each request h1-1 sends (AF_PACKET, packet(7)); the attacker in h2-2 sends
// the copies again through a raw socket (raw(7), IP_HDRINCL, sendmmsg(2)) at
// `weft agent --max-rate` (100,000 probes/s) until every copy is more than
// 30 s old: from h1-1's own address, from spoofed ones, and to another host.
// Meanwhile a second campaign runs through the real controller into the real
// database. Every copy that reached a reflector is counted on its Prometheus
// endpoint under its reason (docs/metrics.md), `stale` only after 30 s, and
// only the two campaigns' 5-tuples are stored, each the fabric's own route.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "agent_fleet.h"
#include "request_tap.h"
#include "weft/agent/control.h"
#include "weft/agent/controller.h"
#include "weft/probe/fd.h"

namespace weft::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kMetricsPort = 9464;
constexpr double kAttackPps = 100000;  // `weft agent --max-rate`'s default
constexpr auto kWindow = std::chrono::seconds(30);
constexpr auto kGuard = milliseconds(150);  // no copy is sent this close to its 30 s mark

// The reflectors' counters on the agents' Prometheus endpoints, summed over
// the hosts: weft_agent_reflector_rejected_total by reason, and
// weft_agent_reflector_answered_total.
struct ReflectorCounters {
  std::map<std::string, int64_t> rejected;
  int64_t answered = 0;
};

ReflectorCounters reflector_counters(NetnsFabric& f) {
  ReflectorCounters out;
  const std::string rejected = "weft_agent_reflector_rejected_total{reason=\"", answered =
                                                                                 "weft_agent_reflector_answered_total ";
  for (const auto& h : f.hosts()) {
    auto body = f.run_in(h.name, fmt::format("curl -sf http://127.0.0.1:{}/metrics", kMetricsPort));
    EXPECT_TRUE(body) << h.name << ": " << body.status().to_string();
    if (!body) continue;
    std::istringstream in(*body);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(answered, 0) == 0) out.answered += static_cast<int64_t>(std::stod(line.substr(answered.size())));
      if (line.rfind(rejected, 0) != 0) continue;
      const size_t q = line.find('"', rejected.size());
      out.rejected[line.substr(rejected.size(), q - rejected.size())] +=
          static_cast<int64_t>(std::stod(line.substr(q + 3)));
    }
  }
  return out;
}

// UDP datagrams the hosts' kernels dropped for a full receive buffer
// (RcvbufErrors, /proc/net/snmp): copies that never reached a reflector.
int64_t udp_rcvbuf_errors(NetnsFabric& f) {
  int64_t sum = 0;
  for (const auto& h : f.hosts()) {
    auto snmp = f.run_in(h.name, "grep '^Udp: [0-9]' /proc/net/snmp");
    if (!snmp) continue;
    std::istringstream in(*snmp);
    std::string field;
    for (int i = 0; i <= 5 && in >> field; ++i) {
      if (i == 5) sum += std::stoll(field);
    }
  }
  return sum;
}

ReflectorCounters minus(ReflectorCounters a, const ReflectorCounters& b) {
  for (const auto& [k, v] : b.rejected) a.rejected[k] -= v;
  std::erase_if(a.rejected, [](const auto& kv) { return kv.second == 0; });
  a.answered -= b.answered;
  return a;
}

struct Copy {
  std::vector<uint8_t> ip;  // IPv4 header onwards, checksums zeroed
  Clock::time_point captured;
  int kind;  // kOwn, kSpoofed or kReaddressed
};
enum Kind { kOwn, kSpoofed, kReaddressed };

// Runs f on every way out of a scope (ASSERT_* returns early).
struct OnExit {
  std::function<void()> f;
  explicit OnExit(std::function<void()> fn) : f(std::move(fn)) {}
  ~OnExit() { f(); }
  OnExit(const OnExit&) = delete;
  OnExit& operator=(const OnExit&) = delete;
};

struct AttackCounts {
  uint64_t own_fresh = 0, own_stale = 0, spoofed = 0, readdressed = 0, failed = 0;
  uint64_t total() const { return own_fresh + own_stale + spoofed + readdressed; }
};

// The copies of one captured request: as captured, from each spoofed source
// (never the destination's own address: a host drops such a martian, ip(7)),
// and to another host. UDP checksum 0: none (RFC 768); the kernel fills the
// IP checksum.
void add_copies(std::deque<Copy>& out, std::vector<uint8_t> pkt, Clock::time_point at,
                const std::vector<uint32_t>& spoof_from, uint32_t elsewhere, uint32_t elsewhere2) {
  const size_t ihl = (pkt[0] & 0x0fu) * 4;
  pkt[ihl + 6] = pkt[ihl + 7] = 0;
  pkt[10] = pkt[11] = 0;
  uint32_t dst;
  std::memcpy(&dst, pkt.data() + 16, 4);
  dst = ntohl(dst);
  out.push_back({pkt, at, kOwn});
  for (uint32_t src : spoof_from) {
    if (src == dst) continue;
    out.push_back({pkt, at, kSpoofed});
    put_ipv4(out.back().ip, 12, src);
  }
  out.push_back({pkt, at, kReaddressed});
  put_ipv4(out.back().ip, 16, dst == elsewhere ? elsewhere2 : elsewhere);
}

TEST(ProbeReplayWindowNetnsTest, CopiesReplayedAtMaxRateForTheWholeWindowAreRefusedByReasonWhileACampaignCompletes) {
  WEFT_SKIP_UNLESS_NETNS();
  auto fabric = NetnsFabric::create(FabricOptions::clos(2, 2, 2));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  const std::string dir = fmt::format("/tmp/weft-replay-window-{}", ::getpid());
  auto fleet_or = AgentFleet::start(f, dir, {"--metrics", fmt::format("127.0.0.1:{}", kMetricsPort)});
  ASSERT_TRUE(fleet_or) << fleet_or.status().to_string();
  AgentFleet& fleet = **fleet_or;  // it removes dir unless the test failed
  const FabricHost& sender = f.host("h1-1");
  const FabricHost& attacker = f.host("h2-2");

  // The tap on h1-1: every request it sends becomes its copies at once.
  const uint32_t h21 = ipv4_or_zero(f.host("h2-1").ip), h12 = ipv4_or_zero(f.host("h1-2").ip);
  const std::vector<uint32_t> spoof_from = {ipv4_or_zero(attacker.ip), h21, h12};
  std::mutex mu;
  std::deque<Copy> copies;  // grows at the back only: the attacker's pointers into it stay valid
  size_t captured = 0;
  Clock::time_point first_capture, last_capture;
  bool capture_over = false;
  // Set on every way out: the threads end before the fabric is torn down.
  std::atomic<bool> tap_stop{false}, tap_ready{false}, abort{false};
  std::jthread tap([&] {
    const Status st = tap_outgoing_udp(sender.ns, 4791, tap_stop, tap_ready, [&](std::vector<uint8_t> pkt) {
      const Clock::time_point now = Clock::now();
      std::lock_guard lock(mu);
      add_copies(copies, std::move(pkt), now, spoof_from, h21, h12);
      if (captured++ == 0) first_capture = now;
      last_capture = now;
    });
    EXPECT_TRUE(st.is_ok()) << st.to_string();
  });

  // The attacker: from the first capture until every copy is more than 30 s
  // old, kAttackPps copies a second over all copies so far, each from 2 ms
  // after its capture (after the original arrived: a copy that overtook its
  // original would be the original, docs/probe.md "Wire protocol", on
  // replays).
  const auto before = reflector_counters(f);
  const int64_t drops_before = udp_rcvbuf_errors(f);
  AttackCounts sent;
  Clock::time_point attack_start, attack_end;
  std::atomic<bool> attacking{true};
  std::jthread attack([&] {
    ASSERT_TRUE(enter_netns(attacker.ns));
    probe::UniqueFd raw(::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW));
    ASSERT_TRUE(raw) << "raw socket: " << std::strerror(errno);
    constexpr size_t kBatch = 64;
    std::array<mmsghdr, kBatch> msgs{};
    std::array<iovec, kBatch> iov{};
    std::array<sockaddr_in, kBatch> to{};
    std::array<int, kBatch> kind{};
    attack_start = Clock::now();
    Clock::time_point last = attack_start;
    double tokens = 0;  // a token bucket: kAttackPps, bursts of at most 4 batches
    size_t next = 0;
    for (;;) {
      const Clock::time_point now = Clock::now();
      tokens = std::min(tokens + std::chrono::duration<double>(now - last).count() * kAttackPps, 4.0 * kBatch);
      last = now;
      size_t n = 0;
      {
        std::lock_guard lock(mu);
        if (abort || (capture_over && now > last_capture + kWindow + milliseconds(1000))) break;
        for (size_t tries = 0; tokens >= kBatch && n < kBatch && tries < copies.size();
             ++tries, next = (next + 1) % copies.size()) {
          const Copy& c = copies[next];
          const auto age = now - c.captured;
          if (age < milliseconds(2) || (age > kWindow - kGuard && age < kWindow + kGuard)) continue;
          iov[n] = {const_cast<uint8_t*>(c.ip.data()), c.ip.size()};
          to[n] = {};
          to[n].sin_family = AF_INET;
          std::memcpy(&to[n].sin_addr.s_addr, c.ip.data() + 16, 4);
          msgs[n].msg_hdr = {};
          msgs[n].msg_hdr.msg_name = &to[n];
          msgs[n].msg_hdr.msg_namelen = sizeof to[n];
          msgs[n].msg_hdr.msg_iov = &iov[n];
          msgs[n].msg_hdr.msg_iovlen = 1;
          kind[n] = c.kind == kOwn && age >= kWindow ? -1 : c.kind;
          ++n;
        }
      }
      if (n == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        continue;
      }
      const int done = std::max(::sendmmsg(raw.get(), msgs.data(), static_cast<unsigned>(n), 0), 0);
      tokens -= static_cast<double>(n);
      for (size_t i = 0; i < static_cast<size_t>(done); ++i) {
        switch (kind[i]) {
          case -1: ++sent.own_stale; break;
          case kOwn: ++sent.own_fresh; break;
          case kSpoofed: ++sent.spoofed; break;
          default: ++sent.readdressed;
        }
      }
      sent.failed += n - static_cast<size_t>(done);
    }
    attack_end = Clock::now();
    attacking = false;
  });
  const OnExit stop_threads([&] { abort = tap_stop = true; });

  // The first campaign, whose controller is killed once the tap has seen some
  // of its requests (the agents keep its key). 3 targets x 16 ports at 40
  // probes/s: 1.2 s of sweep; killed after ~0.4 s.
  for (auto until = Clock::now() + std::chrono::seconds(5); !tap_ready && Clock::now() < until;) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_TRUE(tap_ready) << "the tap did not start";
  const pid_t first = fleet.probe_async("--sport-first 50000 --ports 16 --rate 40");
  ASSERT_GT(first, 0);
  for (auto until = Clock::now() + std::chrono::seconds(10); Clock::now() < until;) {
    {
      std::lock_guard lock(mu);
      if (captured >= 16) break;
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  f.wait_child(first, 5000);
  // The sweeps go on without their controller; the tap keeps what they send
  // until 1 s passes without a request.
  for (size_t seen = 0, rounds = 0; rounds < 10; ++rounds) {
    std::this_thread::sleep_for(milliseconds(1000));
    std::lock_guard lock(mu);
    if (captured == seen) break;
    seen = captured;
  }
  tap_stop = true;
  tap.join();
  {
    std::lock_guard lock(mu);
    capture_over = true;
  }
  ASSERT_GE(captured, 16u);
  // The other hosts' sweeps of the first campaign (as long as h1-1's, with
  // their retries) have ended a second later; the attack's window does not
  // depend on it.
  std::this_thread::sleep_for(milliseconds(1000));
  const ReflectorCounters before_second = reflector_counters(f);

  // While it runs: the second campaign through the real controller, and the
  // rejections just before the first copy turns 30 s old.
  auto second = fleet.probe("--sport-first 51000 --ports 16", 30000);
  const bool second_during_attack = attacking.load();
  std::this_thread::sleep_until(first_capture + kWindow - milliseconds(1000));
  const auto at_29s = minus(reflector_counters(f), before).rejected;
  // No copy is sent in the kGuard around its 30 s mark, so none can be stale
  // before then; a scrape slowed past it (a loaded machine) proves nothing.
  const bool at_29s_in_time = Clock::now() < first_capture + kWindow + kGuard;
  attack.join();
  std::this_thread::sleep_for(milliseconds(300));  // the last copies reach the reflectors
  const ReflectorCounters end = reflector_counters(f);
  const auto after = minus(end, before).rejected;
  const int64_t drops = udp_rcvbuf_errors(f) - drops_before;

  const double seconds = std::chrono::duration<double>(attack_end - attack_start).count();
  std::printf("captured %zu requests; attack %.1f s, %lu copies (%.0f/s; %lu own fresh, %lu own stale, %lu spoofed, "
              "%lu re-addressed, %lu not sent)\n",
              captured, seconds, sent.total(), sent.total() / seconds, sent.own_fresh, sent.own_stale,
              sent.spoofed, sent.readdressed, sent.failed);
  for (const auto& [why, n] : after) std::printf("reflectors refused %s: %ld\n", why.c_str(), n);
  std::printf("reflectors answered %ld during the second campaign; hosts dropped %ld datagrams (receive buffer)\n",
              minus(end, before_second).answered, drops);

  // The second campaign: completed while the attack ran.
  ASSERT_TRUE(second.ok()) << second.out << second.err;
  EXPECT_TRUE(second_during_attack) << "the second campaign outlasted the attack";
  EXPECT_GE(seconds, std::chrono::duration<double>(last_capture + kWindow - attack_start).count());
  EXPECT_EQ(sent.failed, 0u);

  // Stored: only the two campaigns' 5-tuples, each the fabric's own route; the
  // second campaign complete (4 hosts x 3 targets x 16 ports, all answered).
  {
    auto db = db::Database::open(fleet.db_path());
    ASSERT_TRUE(db) << db.status().to_string();
    EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM observations WHERE sport NOT BETWEEN 50000 AND 50015 AND sport "
                             "NOT BETWEEN 51000 AND 51015"),
              0)
        << "a forged observation was stored";
    EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM observations WHERE dport != 4791"), 0);
    EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM campaigns WHERE id = 2 AND state = 'done'"), 1);
    // The reflectors answered the second campaign's requests and no copy: at
    // least every answer its senders received, at most every request sent.
    const int64_t answered = minus(end, before_second).answered;
    EXPECT_GE(answered, *db->query_int("SELECT SUM(answered) FROM observations WHERE campaign_id = 2"));
    EXPECT_LE(answered, *db->query_int("SELECT SUM(sent) FROM observations WHERE campaign_id = 2"));
    // The controller stored the copies refused during its campaign by reason.
    for (const char* why : {"replayed", "bad_source", "bad_destination"}) {
      EXPECT_GT(*db->query_int(fmt::format(
                    "SELECT COALESCE(SUM(count), 0) FROM rejections WHERE campaign_id = 2 AND reason = '{}'", why)),
                0)
          << why;
    }
  }
  for (int64_t campaign : {1, 2}) {
    auto rows = load_paths(fleet.db_path(), campaign);
    ASSERT_TRUE(rows) << rows.status().to_string();
    std::printf("campaign %ld: %zu observations stored\n", campaign, rows->size());
    if (rows->empty()) continue;
    if (campaign == 2) {
      EXPECT_EQ(rows->size(), 4u * 3 * 16);
    }
    std::vector<FiveTuple> tuples;
    for (const auto& r : *rows) tuples.push_back({r.src_ip, r.dst_ip, 17, r.sport, r.dport});
    auto truth = f.ground_truth(tuples);
    ASSERT_TRUE(truth) << truth.status().to_string();
    for (size_t i = 0; i < rows->size(); ++i) {
      const PathRow& r = (*rows)[i];
      EXPECT_EQ(r.spine, (*truth)[i]) << "campaign " << campaign << " " << r.src_ip << ":" << r.sport << " -> "
                                      << r.dst_ip;
      if (campaign == 2) {
        EXPECT_EQ(r.answered, 1);
      }
    }
  }

  // Every copy refused, under its reason: copies from h1-1's own address as
  // replayed (or behind the window) until 30 s, as stale after; spoofed ones
  // as bad_source and re-addressed ones as bad_destination (both checked
  // before the send time, docs/probe.md); stale only after 30 s.
  auto count = [](const std::map<std::string, int64_t>& m, const char* k) {
    auto it = m.find(k);
    return it == m.end() ? int64_t{0} : it->second;
  };
  EXPECT_EQ(count(after, "replayed") + count(after, "behind_window"), static_cast<int64_t>(sent.own_fresh));
  EXPECT_EQ(count(after, "stale"), static_cast<int64_t>(sent.own_stale));
  EXPECT_EQ(count(after, "bad_source"), static_cast<int64_t>(sent.spoofed));
  EXPECT_EQ(count(after, "bad_destination"), static_cast<int64_t>(sent.readdressed));
  int64_t total = 0;
  for (const auto& [why, n] : after) total += n;
  EXPECT_EQ(total, static_cast<int64_t>(sent.total()))
      << "every copy that reached a reflector, and nothing else; the hosts dropped " << drops
      << " datagrams for a full receive buffer";
  EXPECT_GT(sent.own_stale, 0u);
  if (at_29s_in_time) {
    EXPECT_EQ(count(at_29s, "stale"), 0) << "a copy younger than 30 s was refused as stale";
  } else {
    std::printf("the scrape at 29 s ended after 30 s: stale-before-30-s not checked\n");
  }
  EXPECT_GT(count(at_29s, "replayed"), 0);
}

}  // namespace
}  // namespace weft::test
