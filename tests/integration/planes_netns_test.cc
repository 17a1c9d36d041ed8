// Ranks that own a port on every plane (docs/collectives-setup.md "Several
// addresses, several planes") on an emulated dual-plane rail fabric
// (scripts/netns-fabric.sh up-rail 2 2 2 1: 2 planes x 2 rails x 2 hosts, one
// spine per plane). One rank per NIC port, 8 ranks; each listens on both
// plane addresses of its NIC. `weft route` plans ring and HD AllReduce on the
// fabric's topology (addresses filled in from the fabric): ring and HD flows
// go from a port on one plane to a rank whose own port is on the other, so
// every connection must leave from and arrive at the addresses of the flow's
// plane. Every result is exact, and every TCP connection of the job (read
// with ss(8) in each host's namespace) has the plan's 4-tuple: src_addr:sport
// -> dst_addr:dport.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "netns_fabric.h"
#include "weft/collectives/communicator.h"
#include "weft/collectives/store.h"
#include "weft/routing/plan.h"
#include "weft/topology/builders.h"
#include "weft/topology/topology_file.h"

namespace weft::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr int kPlanes = 2, kRails = 2, kHosts = 2;
constexpr int kRanks = kPlanes * kRails * kHosts;
constexpr int kDport = 47000;

// The fabric's topology as `weft topo gen rail` describes it, with each NIC
// port's address from the fabric (h<K>:eth<g>p<k> -> 10.0.M.K).
Status write_topology(const NetnsFabric& fabric, const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(topo::Fabric f, topo::build_rail({.hosts = kHosts, .nics_per_host = kRails,
                                                          .leaves_per_rail = 1, .spines = 1, .planes = kPlanes}));
  for (auto& n : f.nics) n.address = fabric.host(f.hosts[static_cast<size_t>(n.host)].name + ":" + n.name).ip;
  return topo::save_topology(f, path);
}

// Where rank r runs and the addresses it owns: its NIC's port on every
// plane, plane by plane ("eth1p0" -> eth1p0, eth1p1).
struct RankPlace {
  std::string host, ns, addresses;
};
std::vector<RankPlace> places(const NetnsFabric& fabric, const routing::RoutePlan& plan) {
  std::vector<RankPlace> out(kRanks);
  for (const auto& fl : plan.flows) {
    RankPlace& p = out[static_cast<size_t>(fl.src_rank)];
    if (!p.host.empty()) continue;
    p.host = fl.src_host;
    const std::string port = fl.src_nic.substr(0, fl.src_nic.rfind('p') + 1);
    for (int k = 0; k < kPlanes; ++k) {
      const FabricHost& h = fabric.host(fmt::format("{}:{}{}", fl.src_host, port, k));
      p.ns = h.ns;
      p.addresses += (k == 0 ? "" : ",") + h.ip;
    }
  }
  return out;
}

// "10.0.1.1:49152 10.0.2.2:47000" per established connection leaving a rank
// of this job (its local port is no listen port), from ss(8) in the host's
// namespace.
Result<std::set<std::string>> outgoing(NetnsFabric& fabric, const std::string& ns) {
  WEFT_ASSIGN_OR_RETURN(std::string text, fabric.run_in(ns, "ss -Htn state established"));
  std::set<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> ends;
    for (std::string w; words >> w;) {
      if (w.find(':') != std::string::npos) ends.push_back(w);
    }
    if (ends.size() < 2) continue;
    const std::string port = ends[0].substr(ends[0].rfind(':') + 1);
    int local_port = 0;
    std::from_chars(port.data(), port.data() + port.size(), local_port);
    if (local_port >= kDport && local_port < kDport + kRanks) continue;  // the accepting end
    out.insert(ends[0] + " " + ends[1]);
  }
  return out;
}

// The plane of a NIC port's address (its name's p<k>: "h1:eth0p1" -> 1).
int plane_of(const NetnsFabric& fabric, const std::string& ip) {
  for (const FabricHost& h : fabric.hosts()) {
    if (h.ip == ip) return h.name.back() - '0';
  }
  return -1;
}

class PlanesNetns : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanesNetns, RanksOwningAPortPerPlaneRunAPlanExactlyOnThePlannedFourTuples) {
  WEFT_SKIP_UNLESS_NETNS();
  auto made = NetnsFabric::create(FabricOptions::rail(kPlanes, kRails, kHosts, 1));
  ASSERT_TRUE(made) << made.status().to_string();
  NetnsFabric& fabric = **made;
  const fs::path dir = fs::temp_directory_path() / ("weft-planes-" + fabric.prefix());
  fs::create_directories(dir);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  const std::string topo = (dir / "topo.json").string(), ranks = (dir / "ranks.csv").string(),
                    plan_path = (dir / "plan.json").string();
  ASSERT_TRUE(write_topology(fabric, topo));
  auto r = run_shell(fmt::format("{0} rank --topology {1} --all --algo rail --format csv -o {2} && {0} route "
                                 "--topology {1} --ranks {2} --collective allreduce-{3} --protocol tcp --dport {4} -o {5}",
                                 WEFT_CLI, topo, ranks, GetParam(), kDport, plan_path));
  ASSERT_TRUE(r) << r.status().to_string();
  auto plan = routing::load_plan(plan_path);
  ASSERT_TRUE(plan) << plan.status().to_string();
  ASSERT_EQ(plan->ranks, kRanks);
  std::set<std::string> planned;
  for (const auto& fl : plan->flows) {
    ASSERT_FALSE(fl.src_addr.empty() || fl.dst_addr.empty()) << fl.src_rank << " -> " << fl.dst_rank;
    planned.insert(fmt::format("{}:{} {}:{}", fl.src_addr, fl.sport, fl.dst_addr, fl.dport));
  }
  const std::vector<RankPlace> at = places(fabric, *plan);

  // Each rank keeps its connections until the main thread has read them.
  coll::MemoryStore store;
  std::atomic<int> done{0};
  std::atomic<bool> read{false};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      const RankPlace& me = at[static_cast<size_t>(rank)];
      std::unique_ptr<coll::Communicator> comm;
      [&] {
        ASSERT_TRUE(enter_netns(me.ns));
        coll::CommConfig c;
        c.rank = rank;
        c.size = kRanks;
        c.transport = "tcp";
        c.host = me.host;
        c.tcp.listen_address = me.addresses;
        c.timeout = 8s;
        c.plan = *plan;
        c.connect_on_demand = true;  // only the planned pairs connect
        auto made_comm = coll::Communicator::create(c, store);
        ASSERT_TRUE(made_comm) << "rank " << rank << ": " << made_comm.status().to_string();
        comm = std::move(*made_comm);
        const size_t count = 100'003;  // not a multiple of 8 ranks
        std::vector<float> v(count);
        for (size_t j = 0; j < count; ++j) v[j] = static_cast<float>(rank * 7 + static_cast<int>(j % 113));
        coll::CollectiveOptions o;
        o.algorithm = GetParam() == "ring" ? coll::Algorithm::kRing : coll::Algorithm::kHalvingDoubling;
        const Status s = comm->allreduce(v.data(), v.data(), count, coll::DataType::kF32, coll::ReduceOp::kSum, o);
        ASSERT_TRUE(s) << "rank " << rank << ": " << s.to_string();
        for (size_t j = 0; j < count; ++j) {
          const float want = static_cast<float>(7 * kRanks * (kRanks - 1) / 2 + kRanks * static_cast<int>(j % 113));
          ASSERT_EQ(v[j], want) << "rank " << rank << " element " << j;
        }
      }();
      ++done;
      const auto until = coll::Clock::now() + 10s;
      while (!read && coll::Clock::now() < until) std::this_thread::sleep_for(5ms);
    });
  }
  const auto until = coll::Clock::now() + 10s;
  while (done < kRanks && coll::Clock::now() < until) std::this_thread::sleep_for(5ms);
  std::set<std::string> seen;
  std::set<std::string> host_ns;
  for (const RankPlace& p : at) host_ns.insert(p.ns);
  EXPECT_EQ(host_ns.size(), static_cast<size_t>(kHosts));
  for (const std::string& ns : host_ns) {
    auto got = outgoing(fabric, ns);
    EXPECT_TRUE(got) << got.status().to_string();
    if (got) seen.insert(got->begin(), got->end());
  }
  read = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(done, kRanks);
  // Every planned flow has its connection, with the plan's 4-tuple (one
  // connection per directed pair: a flow on another tuple would be missing).
  for (const std::string& p : planned) EXPECT_EQ(seen.count(p), 1u) << "no connection " << p;
  // The others carry no planned flow: the reverse of a ring's pair (a pair
  // connects both ways, data goes one) and the round gates' tokens
  // (docs/route-plan.md "Rounds"). They leave from an ephemeral port, never
  // a planned one, and stay on one plane.
  std::set<std::string> sports;
  for (const auto& fl : plan->flows) sports.insert(std::to_string(fl.sport));
  int unplanned = 0;
  for (const std::string& c : seen) {
    if (planned.count(c) != 0) continue;
    ++unplanned;
    const std::string src = c.substr(0, c.find(':')), dst = c.substr(c.find(' ') + 1, c.rfind(':') - c.find(' ') - 1);
    const std::string sport = c.substr(c.find(':') + 1, c.find(' ') - c.find(':') - 1);
    EXPECT_EQ(sports.count(sport), 0u) << c << " leaves from a planned port";
    EXPECT_EQ(plane_of(fabric, src), plane_of(fabric, dst)) << c << " crosses planes";
  }
  RecordProperty("connections", fmt::format("{} planned, {} unplanned", planned.size(), unplanned));
}

INSTANTIATE_TEST_SUITE_P(Collectives, PlanesNetns, ::testing::Values("ring", "hd"));

// Two ranks whose addresses share no plane: the connection cannot be made,
// and the error names the rank pair and both addresses.
TEST(PlanesNetnsUnreachable, APairOnTwoPlanesIsOneErrorNamingTheRanksAndAddresses) {
  WEFT_SKIP_UNLESS_NETNS();
  auto made = NetnsFabric::create(FabricOptions::rail(kPlanes, 1, kHosts, 1));
  ASSERT_TRUE(made) << made.status().to_string();
  NetnsFabric& fabric = **made;
  const FabricHost a = fabric.host("h1:eth0p0"), b = fabric.host("h2:eth0p1");
  coll::MemoryStore store;
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      const FabricHost& me = rank == 0 ? a : b;
      if (!enter_netns(me.ns)) return;
      coll::CommConfig c;
      c.rank = rank;
      c.size = 2;
      c.transport = "tcp";
      c.host = me.name;
      c.tcp.listen_address = me.ip;
      c.timeout = 1s;
      auto comm = coll::Communicator::create(c, store);
      if (!comm) errors[static_cast<size_t>(rank)] = comm.status().message();
    });
  }
  for (auto& t : threads) t.join();
  const std::string want = fmt::format("connecting to rank 1 from {} to {}:", a.ip, b.ip);
  EXPECT_NE(errors[0].find(want), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find(fmt::format("rank 1 listens on {}:", b.ip)), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace weft::test
