// weft watch on the 4x4x4 netns fabric: a random directed spine-leaf link is
// cut silently (an nftables drop on the egress of one end, no routing change:
// the grey failure only probes find), and the watcher must name exactly that
// link within 1 s of the cut, then report it up after the drop is removed;
// the monitor's traffic on every spine-leaf link stays under 1% of its rate;
// agents cut off from the watcher are reconnected and carry on.
//
// WEFT_WATCH_RUNS=10 ctest -R WatchNetns   runs 10 cuts instead of 3.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent_fleet.h"
#include "weft/db/watch_store.h"
#include "weft/routing/plan.h"

namespace weft::test {
namespace {

constexpr const char* kLinkRate = "1gbit";
constexpr double kLinkBitsPerSecond = 1e9;

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Waits for a line of `path` matching `re` that starts at or after `from`.
std::optional<std::smatch> wait_line(const std::string& path, const std::regex& re, size_t from, int timeout_ms,
                                     std::string* text) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  do {
    *text = slurp(path);
    if (text->size() > from) {
      std::smatch m;
      auto begin = text->cbegin() + static_cast<std::ptrdiff_t>(from);
      if (std::regex_search(begin, text->cend(), m, re)) return m;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < until);
  return std::nullopt;
}

// The probe campaign's leaf number of fabric leaf `leaf` (its first host's).
Result<int> inferred_leaf(const std::string& db_path, int leaf) {
  db::OpenOptions ro;
  ro.read_only = true;
  WEFT_ASSIGN_OR_RETURN(db::Database db, db::Database::open(db_path, ro));
  WEFT_ASSIGN_OR_RETURN(db::Statement st, db.prepare(
      "SELECT sw.number FROM host_leaf hl JOIN hosts h ON h.id = hl.host_id JOIN switches sw ON sw.id = hl.leaf_id "
      "WHERE h.name = ? ORDER BY hl.campaign_id DESC LIMIT 1"));
  WEFT_RETURN_IF_ERROR(st.bind(1, fmt::format("h{}-1", leaf)));
  WEFT_ASSIGN_OR_RETURN(bool row, st.step());
  if (!row) return not_found(fmt::format("no leaf for h{}-1", leaf));
  return static_cast<int>(st.column_int(0));
}

// Bytes per spine-leaf link and direction: "spine leaf up|down bytes packets".
std::map<std::tuple<int, int, std::string>, uint64_t> link_bytes(NetnsFabric& f) {
  std::map<std::tuple<int, int, std::string>, uint64_t> out;
  auto text = f.script("counters");
  if (!text) return out;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    int s = 0, l = 0;
    std::string dir;
    uint64_t bytes = 0, packets = 0;
    if (ls >> s >> l >> dir >> bytes >> packets && (dir == "up" || dir == "down")) out[{s, l, dir}] = bytes;
  }
  return out;
}

TEST(WatchNetns, ACutDirectedLinkIsNamedWithinASecondAndRestored) {
  WEFT_SKIP_UNLESS_NETNS();
  const int runs = std::getenv("WEFT_WATCH_RUNS") ? std::atoi(std::getenv("WEFT_WATCH_RUNS")) : 3;
  FabricOptions opt = FabricOptions::clos(4, 4, 4);
  opt.link_rate = kLinkRate;
  auto fabric = NetnsFabric::create(opt);
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  const std::string dir = fmt::format("/tmp/weft-watch-test-{}", ::getpid());
  auto fleet = AgentFleet::start(f, dir);
  ASSERT_TRUE(fleet) << fleet.status().to_string();
  auto probe = (*fleet)->probe("--ports 16 --rate 20000");
  ASSERT_TRUE(probe.ok()) << probe.err;
  std::map<int, int> leaf_of;  // fabric leaf -> the campaign's leaf number
  for (int l = 1; l <= 4; ++l) {
    auto n = inferred_leaf((*fleet)->db_path(), l);
    ASSERT_TRUE(n) << n.status().to_string();
    leaf_of[l] = *n;
  }

  // The job: HD AllReduce over all 64 hosts, planned on the probed fabric.
  const std::string w = (*fleet)->weft(), db_path = (*fleet)->db_path();
  const std::string plan_path = dir + "/plan.json", epochs = dir + "/epochs.json";
  for (const std::string& cmd :
       {fmt::format("{} topo infer --db {} -o {}/fabric.json", w, db_path, dir),
        fmt::format("{} rank --topology {}/fabric.json --all -o {}/ranks.txt", w, dir, dir),
        fmt::format("{} route --topology {}/fabric.json --ranks {}/ranks.txt --paths {} --protocol udp -o {}", w, dir,
                    dir, db_path, plan_path)}) {
    auto r = run_shell(cmd);
    ASSERT_TRUE(r) << cmd << ": " << r.status().to_string();
  }
  auto job_plan = routing::load_plan(plan_path);
  ASSERT_TRUE(job_plan) << job_plan.status().to_string();

  const std::string out = dir + "/watch.out", err = dir + "/watch.err";
  const pid_t watch = f.spawn("h1-1", {w, "watch", "--hosts", (*fleet)->hosts_path(), "--secret-file",
                                       (*fleet)->secret_path(), "--db", db_path, "--plan", plan_path, "--publish",
                                       epochs, "--job", "job-7"},
                              out, err);
  ASSERT_GT(watch, 0);
  std::string text;
  ASSERT_TRUE(wait_line(out, std::regex("watching (\\d+) 5-tuples"), 0, 10000, &text)) << text << slurp(err);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // every monitor running and answered

  // Overhead: the busiest spine-leaf direction over 3 s of monitoring alone.
  const auto before = link_bytes(f);
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const auto after = link_bytes(f);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(before.size(), 32u);
  ASSERT_EQ(after.size(), 32u);
  double busiest = 0;
  for (const auto& [k, b] : after) busiest = std::max(busiest, static_cast<double>(b - before.at(k)) * 8 / secs);
  std::cout << fmt::format("monitor overhead: busiest spine-leaf direction {:.0f} bit/s = {:.4f}% of {}\n", busiest,
                           100 * busiest / kLinkBitsPerSecond, kLinkRate);
  EXPECT_LE(busiest, 0.01 * kLinkBitsPerSecond);
  // No false alarm with no fault: over those 3 s, or WEFT_WATCH_QUIET_S
  // (e.g. 600 beside a parallel build, for the 10-minute form).
  const int quiet_s = std::getenv("WEFT_WATCH_QUIET_S") ? std::atoi(std::getenv("WEFT_WATCH_QUIET_S")) : 3;
  if (quiet_s > 3) std::this_thread::sleep_for(std::chrono::seconds(quiet_s - 3));
  text = slurp(out);
  for (const char* verdict : {"down ", "ambiguous", "unexplained"}) {
    EXPECT_EQ(text.find(verdict), std::string::npos) << "'" << verdict << "' with no fault in " << quiet_s << " s:\n"
                                                     << text;
  }
  std::cout << fmt::format("no verdict in {} s with no fault\n", quiet_s);

  const unsigned seed = static_cast<unsigned>(std::chrono::system_clock::now().time_since_epoch().count());
  std::mt19937 rng(seed);
  std::cout << "seed " << seed << "\n";
  size_t from = slurp(out).size();
  for (int run = 0; run < runs; ++run) {
    const int spine = static_cast<int>(rng() % 4) + 1, leaf = static_cast<int>(rng() % 4) + 1;
    const bool spine_to_leaf = rng() % 2;
    // The drop sits on the egress of the link's sending end: the spine's dnL
    // for spine -> leaf, the leaf's upS for leaf -> spine.
    const std::string ns = fmt::format("{}{}", f.prefix(), spine_to_leaf ? fmt::format("s{}", spine) : fmt::format("l{}", leaf));
    const std::string dev = spine_to_leaf ? fmt::format("dn{}", leaf) : fmt::format("up{}", spine);
    const std::string want = spine_to_leaf ? fmt::format("s{}->l{}", spine, leaf_of[leaf])
                                           : fmt::format("l{}->s{}", leaf_of[leaf], spine);
    SCOPED_TRACE(fmt::format("run {}: cut {} in {} (expect {})", run, dev, ns, want));
    const int64_t cut_us = now_us();
    auto cut = run_shell(fmt::format("ip netns exec {} nft -f -", ns),
                         fmt::format("table ip weftcut {{\n chain cut {{\n  type filter hook forward priority -10;\n"
                                     "  oifname \"{}\" drop\n }}\n}}\n", dev));
    ASSERT_TRUE(cut) << cut.status().to_string();
    // At the moment of a cut, tuples that cross the link and have not yet
    // lost a streak still count as healthy, and the first losses may be
    // `unexplained` for a report or two (docs/watch.md); the verdict that
    // counts is the `down`, within 1 s of the cut.
    auto down = wait_line(out, std::regex("(down) ([^ \\n]*)([^\\n]*)\\n"), from, 5000, &text);
    ASSERT_TRUE(down) << "no down verdict in 5 s:\n" << text.substr(from) << slurp(err);
    EXPECT_EQ((*down)[2].str(), want) << (*down)[0].str();
    std::smatch at;
    const std::string rest = (*down)[3].str();
    ASSERT_TRUE(std::regex_search(rest, at, std::regex("localised_us=(\\d+)"))) << (*down)[0].str();
    const int64_t latency_us = std::stoll(at[1].str()) - cut_us;
    std::cout << fmt::format("run {}: {} localised {:.0f} ms after the cut\n", run, want, latency_us / 1e3);
    EXPECT_LE(latency_us, 1000000) << (*down)[0].str();
    from = text.size() - static_cast<size_t>((*down).suffix().length());
    // Epoch 2 run + 1: the job's plan without the cable.
    auto pub = wait_line(out, std::regex("published epoch (\\d+) without ([^ \\n]+)"), from, 5000, &text);
    ASSERT_TRUE(pub) << text.substr(from) << slurp(err);
    EXPECT_EQ(std::stoi((*pub)[1].str()), 2 * run + 1);
    EXPECT_EQ((*pub)[2].str(), want);
    {
      const auto doc = nlohmann::json::parse(slurp(epochs));
      EXPECT_EQ(doc["job"], "job-7");
      EXPECT_EQ(doc["epoch"], 2 * run + 1);
      EXPECT_EQ(doc["reason"], "link " + want + " down");
      auto p = routing::parse_plan(doc["plan"].dump());
      ASSERT_TRUE(p) << p.status().to_string();
      EXPECT_EQ(p->ranks, job_plan->ranks);
      const std::string sw = fmt::format("s{}", spine), lf = fmt::format("l{}", leaf_of[leaf]);
      for (const auto& fl : p->flows) {
        for (size_t i = 0; i + 1 < fl.path.size(); ++i) {
          EXPECT_FALSE((fl.path[i] == sw && fl.path[i + 1] == lf) || (fl.path[i] == lf && fl.path[i + 1] == sw))
              << fl.src_host << " -> " << fl.dst_host << " crosses the failed link";
        }
      }
    }
    from = text.size() - static_cast<size_t>((*pub).suffix().length());
    ASSERT_TRUE(run_shell(fmt::format("ip netns exec {} nft delete table ip weftcut", ns)));
    auto up = wait_line(out, std::regex("up ([^ \\n]+)"), from, 5000, &text);
    ASSERT_TRUE(up) << "not restored in 5 s:\n" << text.substr(from);
    EXPECT_EQ((*up)[1].str(), want);
    from = text.size() - static_cast<size_t>((*up).suffix().length());
    auto full = wait_line(out, std::regex("published epoch (\\d+) \\(the full plan\\)"), from, 5000, &text);
    ASSERT_TRUE(full) << text.substr(from) << slurp(err);
    EXPECT_EQ(std::stoi((*full)[1].str()), 2 * run + 2);
    {
      const auto doc = nlohmann::json::parse(slurp(epochs));
      EXPECT_EQ(doc["epoch"], 2 * run + 2);
      auto p = routing::parse_plan(doc["plan"].dump());
      ASSERT_TRUE(p) << p.status().to_string();
      EXPECT_EQ(*p, *job_plan);
    }
    from = text.size() - static_cast<size_t>((*full).suffix().length());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  // Waits up to 10 s until the watcher's stderr after `err_from` says that
  // every leaf-3 agent reports again, and expects each of them to have
  // stopped reporting and come back there.
  auto expect_leaf3_reconnected = [&](size_t err_from) {
    const std::regex lost_re("agent (h3-\\d+) stopped reporting"), back_re("agent (h3-\\d+) reports again");
    auto names = [](const std::string& log, const std::regex& re) {
      std::set<std::string> hosts;
      for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it) {
        hosts.insert((*it)[1].str());
      }
      return hosts;
    };
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (names(slurp(err).substr(err_from), back_re).size() < 4 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const std::string e = slurp(err).substr(err_from);
    const std::set<std::string> leaf3 = {"h3-1", "h3-2", "h3-3", "h3-4"};
    EXPECT_EQ(names(e, lost_re), leaf3) << e;
    EXPECT_EQ(names(e, back_re), leaf3) << e;
  };
  // The worst case of control connections that ride the fabric: a cable of
  // leaf 3 is cut and every leaf-3 agent's control connection crossed it (its
  // packets are dropped too, the way ECMP may have hashed all four onto the
  // cable). Until they are reconnected no agent can say which requests still
  // reach leaf 3, and nothing tells a lost request from a lost reply; the
  // cable must be named within 1 s of the cut all the same.
  {
    const int spine = static_cast<int>(rng() % 4) + 1;
    SCOPED_TRACE(fmt::format("cable s{}-l3 and every leaf-3 control connection", spine));
    const size_t err_from = slurp(err).size();
    // The watcher's four connections to leaf 3 (a reconnection of an earlier
    // cut may still be under way: asked again for up to 2 s).
    Result<std::string> conns = std::string();
    std::string control_drops;
    int n = 0;
    for (int tries = 0; tries < 20 && n != 4; ++tries) {
      if (tries > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      conns = f.run_in("h1-1", "ss -tnH state established dst 10.0.3.0/24");
      ASSERT_TRUE(conns) << conns.status().to_string();
      control_drops.clear();
      n = 0;
      std::istringstream lines(*conns);
      for (std::string line; std::getline(lines, line);) {
        std::istringstream ls(line);
        std::string recv_q, send_q, local, peer;
        if (!(ls >> recv_q >> send_q >> local >> peer)) continue;
        const std::string lport = local.substr(local.rfind(':') + 1), agent_ip = peer.substr(0, peer.rfind(':')),
                          aport = peer.substr(peer.rfind(':') + 1);
        control_drops += fmt::format("  ip saddr {0} tcp sport {1} tcp dport {2} drop\n"
                                     "  ip daddr {0} tcp dport {1} tcp sport {2} drop\n",
                                     agent_ip, aport, lport);
        ++n;
      }
    }
    ASSERT_EQ(n, 4) << "the watcher's control connections to leaf 3:\n" << *conns;
    const std::string l3 = fmt::format("{}l3", f.prefix()), sp = fmt::format("{}s{}", f.prefix(), spine);
    const int64_t cut_us = now_us();
    ASSERT_TRUE(run_shell(fmt::format("ip netns exec {} nft -f -", l3),
                          fmt::format("table ip weftcut {{\n chain cut {{\n  type filter hook forward priority -10;\n"
                                      "  oifname \"up{}\" drop\n{} }}\n}}\n", spine, control_drops)));
    ASSERT_TRUE(run_shell(fmt::format("ip netns exec {} nft -f -", sp),
                          "table ip weftcut {\n chain cut {\n  type filter hook forward priority -10;\n"
                          "  oifname \"dn3\" drop\n }\n}\n"));
    auto down = wait_line(out, std::regex("(down) ([^ \\n]*)([^\\n]*)\\n"), from, 5000, &text);
    ASSERT_TRUE(down) << "no down verdict in 5 s:\n" << text.substr(from) << slurp(err);
    // Either direction, or the cable (both, "+"-joined): the re-plan avoids the cable.
    const std::set<std::string> cable = {fmt::format("l{}->s{}", leaf_of[3], spine),
                                         fmt::format("s{}->l{}", spine, leaf_of[3])};
    const std::string named = (*down)[2].str();
    for (size_t b = 0, e; b <= named.size(); b = e + 1) {
      e = std::min(named.find('+', b), named.size());
      EXPECT_TRUE(cable.count(named.substr(b, e - b))) << (*down)[0].str();
    }
    std::smatch at;
    const std::string rest = (*down)[3].str();
    ASSERT_TRUE(std::regex_search(rest, at, std::regex("localised_us=(\\d+)"))) << (*down)[0].str();
    const int64_t latency_us = std::stoll(at[1].str()) - cut_us;
    std::cout << fmt::format("cable s{}-l3 with leaf 3's control connections: {} localised {:.0f} ms after the cut\n",
                             spine, named, latency_us / 1e3);
    EXPECT_LE(latency_us, 1000000) << (*down)[0].str();
    expect_leaf3_reconnected(err_from);  // around the cut, on new connections
    from = text.size() - static_cast<size_t>((*down).suffix().length());
    auto pub = wait_line(out, std::regex("published epoch (\\d+) without ([^ \\n]+)"), from, 5000, &text);
    ASSERT_TRUE(pub) << text.substr(from) << slurp(err);
    EXPECT_EQ(std::stoi((*pub)[1].str()), 2 * runs + 1);
    from = text.size() - static_cast<size_t>((*pub).suffix().length());
    ASSERT_TRUE(run_shell(fmt::format("ip netns exec {} nft delete table ip weftcut", sp)));
    ASSERT_TRUE(run_shell(fmt::format("ip netns exec {} nft delete table ip weftcut", l3)));
    auto full = wait_line(out, std::regex("published epoch (\\d+) \\(the full plan\\)"), from, 5000, &text);
    ASSERT_TRUE(full) << text.substr(from) << slurp(err);
    EXPECT_EQ(std::stoi((*full)[1].str()), 2 * runs + 2);
    from = text.size() - static_cast<size_t>((*full).suffix().length());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  // An agent cut off from the watcher for longer than --silence-ms (400 ms) is
  // reconnected and carries on its monitor: every uplink of leaf 3 drops for
  // 2.5 s, so none of its agents' reports leave, then comes back. Each of its
  // hosts must report again, and with no fault left no verdict may follow: a
  // new monitor whose probes restart at sequence 1 is dropped by every
  // reflector's replay guard, and all its tuples would fail.
  {
    const std::string ns = fmt::format("{}l3", f.prefix());
    const size_t err_from = slurp(err).size();
    ASSERT_TRUE(run_shell(fmt::format("ip netns exec {} nft -f -", ns),
                          "table ip weftcut {\n chain cut {\n  type filter hook forward priority -10;\n"
                          "  oifname \"up*\" drop\n }\n}\n"));
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    ASSERT_TRUE(run_shell(fmt::format("ip netns exec {} nft delete table ip weftcut", ns)));
    expect_leaf3_reconnected(err_from);
    from = slurp(out).size();
    std::this_thread::sleep_for(std::chrono::seconds(2));
    text = slurp(out);
    for (const char* verdict : {"down ", "ambiguous", "unexplained"}) {
      EXPECT_EQ(text.find(verdict, from), std::string::npos) << "'" << verdict << "' after every agent came back:\n"
                                                             << text.substr(from) << slurp(err);
    }
  }
  ::kill(watch, SIGTERM);
  const int status = f.wait_child(watch, 10000);
  EXPECT_TRUE(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp(out) << slurp(err);
  auto db = db::Database::open((*fleet)->db_path());
  ASSERT_TRUE(db);
  auto events = db::load_link_events(*db);
  ASSERT_TRUE(events);
  EXPECT_EQ(events->size(), static_cast<size_t>(runs) + 1);  // the random cuts and the cable
  for (const auto& e : *events) {
    EXPECT_TRUE(e.restored_us.has_value()) << e.link;
    EXPECT_TRUE(e.published_us.has_value()) << e.link;
    EXPECT_LE(e.first_loss_us, e.localised_us);
  }
}

}  // namespace
}  // namespace weft::test
