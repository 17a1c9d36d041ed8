// The collective library across hosts, as a user runs it (label netns).
//
// Three hosts: the hosts of a 1-spine, 1-leaf, 3-host NetnsFabric, each a
// network namespace with its own address on the leaf's bridge (10.0.1.1-3
// on eth0), plus a second bridge in the leaf that every host joins on eth1
// (10.1.1.1-3). Every rank process gets a UTS namespace whose hostname is
// its host's name: the library tells hosts apart by hostname
// (CommConfig::host), as machines and containers differ, and ranks in two
// network namespaces of one machine with one hostname would be one host to
// it (shared memory between them, which works: /dev/shm is shared). Two
// ranks per host, started with torchrun's variables only (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT); the examples are
// built against the installed package (find_package(weft)), as
// tests/collectives/install_test.sh builds them.
//
//   - the C++ and the C example: every element the exact sum; the data
//     crossed between hosts over TCP (each host's eth0 sent megabytes) and
//     not over TCP inside a host (its loopback, where TCP between two ranks
//     of one host would go, carried no more than the store's kilobytes);
//   - a route plan from `weft route`: ss in both namespaces shows each
//     planned cross-host connection with the plan's source port and the
//     destination's planned listen port at both ends;
//   - WEFT_SOCKET_IFNAME=eth1: the data goes over eth1, eth0 carries the
//     store alone;
//   - a listen-address override that names nothing on the host: every rank
//     exits at once with one line naming it, and prints nothing else.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "netns_fabric.h"
#include "weft/common/reaper.h"

namespace weft::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kHosts = 3, kPerHost = 2, kRanks = kHosts * kPerHost;
constexpr auto kJobTimeout = std::chrono::seconds(30);  // every job; a rank still running then is killed
constexpr uint64_t kMiB = 1 << 20;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string host_of_rank(int r) { return fmt::format("h1-{}", r / kPerHost + 1); }

// What the suite builds once: it takes most of the time.
struct Cluster {
  std::unique_ptr<NetnsFabric> fabric;
  std::string dir;  // work directory: the install prefix, the examples, the outputs
  Reaper dir_reaper;
  std::string failure;  // why the set-up failed ("" = it did not)
  int next_port = 29500;
};

struct Rank {
  pid_t pid = -1;
  std::string out, err;  // files
};

// Builds the cluster once per process (a gtest Environment): the fabric and
// the installed examples take most of the test's time. CMake runs this
// binary whole, as one ctest test, for the same reason.
class ClusterEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!netns_unavailable_reason().empty() || ::access("/usr/bin/unshare", X_OK) != 0) return;
    cluster_ = new Cluster();
    cluster_->failure = build();
  }
  void TearDown() override {
    if (!cluster_) return;
    if (cluster_->fabric) {
      EXPECT_TRUE(cluster_->fabric->teardown()) << "tearing the fabric down";
    }
    std::error_code ec;
    if (!cluster_->dir.empty()) fs::remove_all(cluster_->dir, ec);
    cluster_->dir_reaper.done();
    delete cluster_;
    cluster_ = nullptr;
  }
  static Cluster* cluster() { return cluster_; }

 private:
  // The fabric, eth1 on a second bridge, and the examples built against an
  // installed prefix. Returns why it failed, "" if it did not.
  static std::string build() {
    Cluster* c = cluster_;
    char tmpl[] = "/tmp/weft-multihost-XXXXXX";
    if (!::mkdtemp(tmpl)) return "mkdtemp failed";
    c->dir = tmpl;
    auto reaper = Reaper::start("rm -rf " + c->dir);  // also if this process is killed
    if (!reaper) return reaper.status().to_string();
    c->dir_reaper = std::move(*reaper);
    FabricOptions o = FabricOptions::clos(1, 1, kHosts);
    o.prefix_tag = "mh";
    auto fabric = NetnsFabric::create(o);
    if (!fabric) return fabric.status().to_string();
    c->fabric = std::move(*fabric);
    const std::string leaf = c->fabric->prefix() + "l1";
    std::string cmd = fmt::format("ip -n {0} link add br1 type bridge && ip -n {0} link set br1 up", leaf);
    for (int h = 1; h <= kHosts; ++h) {
      const std::string ns = c->fabric->host(fmt::format("h1-{}", h)).ns;
      cmd += fmt::format(
          " && ip -n {0} link add g{2} type veth peer name eth1 netns {1} && ip -n {0} link set g{2} master br1"
          " && ip -n {0} link set g{2} up && ip -n {1} addr add 10.1.1.{2}/24 dev eth1 && ip -n {1} link set eth1 up",
          leaf, ns, h);
    }
    if (auto r = run_shell(cmd, "", 60); !r) return r.status().with_context("the second bridge").to_string();
    const std::string ex = c->dir + "/ex";
    auto built = run_shell(
        fmt::format("cmake --install {0} --prefix {1}/prefix >/dev/null && cmake -S {2}/examples/collectives -B {3} "
                    "-G Ninja -DCMAKE_PREFIX_PATH={1}/prefix -DCMAKE_EXE_LINKER_FLAGS='{4}' >/dev/null && "
                    "cmake --build {3} >/dev/null",
                    WEFT_BINARY_DIR, c->dir, WEFT_SOURCE_DIR, ex, WEFT_EXAMPLE_FLAGS),
        "", 300);
    if (!built) return built.status().with_context("installing weft and building examples/collectives").to_string();
    return "";
  }

  static inline Cluster* cluster_ = nullptr;
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new ClusterEnvironment());

class MultiHost : public ::testing::Test {
 protected:
  void SetUp() override {
    WEFT_SKIP_UNLESS_NETNS();
    if (::access("/usr/bin/unshare", X_OK) != 0) GTEST_SKIP() << "/usr/bin/unshare not found (install util-linux)";
    c_ = ClusterEnvironment::cluster();
    ASSERT_NE(c_, nullptr);
    ASSERT_EQ(c_->failure, "") << "setting up the hosts and the installed examples";
  }

  // Starts the job: rank r on host h1-(r/2+1), in a UTS namespace named
  // after its host, with torchrun's variables (and `extra`, NAME=VALUE) as
  // its whole environment. Store on rank 0's host; a new port per job, so
  // that no job meets the last one's TIME_WAIT.
  std::vector<Rank> start(const std::string& tag, const std::vector<std::string>& program,
                          const std::vector<std::string>& extra = {}) {
    const int port = c_->next_port++;
    std::vector<Rank> ranks;
    for (int r = 0; r < kRanks; ++r) {
      std::vector<std::string> argv = {"/usr/bin/unshare", "--uts", "/bin/sh", "-c",
                                       "hostname \"$0\" && exec /usr/bin/env -i \"$@\"", host_of_rank(r),
                                       fmt::format("RANK={}", r), fmt::format("WORLD_SIZE={}", kRanks),
                                       fmt::format("LOCAL_RANK={}", r % kPerHost), "MASTER_ADDR=10.0.1.1",
                                       fmt::format("MASTER_PORT={}", port)};
      argv.insert(argv.end(), extra.begin(), extra.end());
      argv.insert(argv.end(), program.begin(), program.end());
      Rank k;
      k.out = fmt::format("{}/{}.{}.out", c_->dir, tag, r);
      k.err = fmt::format("{}/{}.{}.err", c_->dir, tag, r);
      k.pid = c_->fabric->spawn(host_of_rank(r), argv, k.out, k.err);
      ranks.push_back(k);
    }
    return ranks;
  }

  // Waits for every rank, kJobTimeout in all; kills (by PID) a rank still
  // running then. Exit codes by rank; -1: killed at the timeout.
  std::vector<int> finish(const std::vector<Rank>& ranks) {
    const auto deadline = Clock::now() + kJobTimeout;
    std::vector<int> codes;
    for (const Rank& k : ranks) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      int st = c_->fabric->wait_child(k.pid, static_cast<int>(std::max<long>(left, 0)));
      if (st == -1) {
        ::kill(k.pid, SIGKILL);
        c_->fabric->wait_child(k.pid, 5000);
        codes.push_back(-1);
        continue;
      }
      codes.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    return codes;
  }

  // Every rank exited 0; otherwise the failure names the rank and its stderr.
  static void expect_all_succeeded(const std::vector<Rank>& ranks, const std::vector<int>& codes) {
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(codes[static_cast<size_t>(r)], 0)
          << "rank " << r << (codes[static_cast<size_t>(r)] == -1 ? " timed out" : " failed") << ": "
          << slurp(ranks[static_cast<size_t>(r)].err);
    }
  }

  // A counter of `dev` in every host's namespace, by host.
  std::vector<uint64_t> tx_bytes(const std::string& dev) {
    std::vector<uint64_t> v;
    for (int h = 1; h <= kHosts; ++h) {
      auto r = c_->fabric->run_in(fmt::format("h1-{}", h), fmt::format("cat /sys/class/net/{}/statistics/tx_bytes", dev));
      v.push_back(r ? std::stoull(*r) : 0);
      EXPECT_TRUE(r) << r.status().to_string();
    }
    return v;
  }

  // The example's last line on rank r.
  static std::string example_line(int r) {
    return fmt::format("rank {} of {}: sum {} (expected {}), 0 of ", r, kRanks, kRanks * (kRanks + 1) / 2,
                       kRanks * (kRanks + 1) / 2);
  }

  Cluster* c_ = nullptr;
};

std::vector<uint64_t> delta(const std::vector<uint64_t>& after, const std::vector<uint64_t>& before) {
  std::vector<uint64_t> d;
  for (size_t i = 0; i < after.size(); ++i) d.push_back(after[i] - before[i]);
  return d;
}

class InstalledExample : public MultiHost, public ::testing::WithParamInterface<const char*> {};

TEST_P(InstalledExample, SumsExactlyOverSharedMemoryInsideAHostAndTcpAcrossHosts) {
  const auto eth0 = tx_bytes("eth0"), lo = tx_bytes("lo");
  const auto ranks = start(GetParam(), {c_->dir + "/ex/" + GetParam()});
  const auto codes = finish(ranks);
  expect_all_succeeded(ranks, codes);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(slurp(ranks[static_cast<size_t>(r)].out).rfind(example_line(r), 0), 0u)
        << "rank " << r << ": " << slurp(ranks[static_cast<size_t>(r)].out);
  }
  const auto sent = delta(tx_bytes("eth0"), eth0), local = delta(tx_bytes("lo"), lo);
  for (int h = 0; h < kHosts; ++h) {
    // Every host's share of the sum must leave it: megabytes (each rank's
    // vector is 4 MiB or 0.8 MB), where the store is kilobytes.
    EXPECT_GE(sent[static_cast<size_t>(h)], kMiB / 2) << "h1-" << h + 1 << " eth0: the data did not cross hosts";
    // TCP between the two ranks of one host would run over its loopback.
    EXPECT_LT(local[static_cast<size_t>(h)], 256u << 10) << "h1-" << h + 1 << " lo: ranks of one host spoke TCP";
  }
}

INSTANTIATE_TEST_SUITE_P(CxxAndC, InstalledExample, ::testing::Values("allreduce_example", "allreduce_example_c"));

TEST_F(MultiHost, SocketIfnameMovesTheDataToTheInterfaceItNames) {
  const auto eth0 = tx_bytes("eth0"), eth1 = tx_bytes("eth1");
  const auto ranks = start("ifname", {c_->dir + "/ex/allreduce_example"}, {"WEFT_SOCKET_IFNAME=eth1"});
  const auto codes = finish(ranks);
  expect_all_succeeded(ranks, codes);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(slurp(ranks[static_cast<size_t>(r)].out).rfind(example_line(r), 0), 0u) << "rank " << r;
  }
  const auto on0 = delta(tx_bytes("eth0"), eth0), on1 = delta(tx_bytes("eth1"), eth1);
  for (int h = 0; h < kHosts; ++h) {
    EXPECT_GE(on1[static_cast<size_t>(h)], kMiB / 2) << "h1-" << h + 1 << " eth1: the data did not go there";
    EXPECT_LT(on0[static_cast<size_t>(h)], 256u << 10) << "h1-" << h + 1 << " eth0: more than the store";
  }
}

TEST_F(MultiHost, AnOverrideThatNamesNothingOnTheHostIsOneLineFromEveryRankAtOnce) {
  struct Case {
    const char* program;
    const char* env;
    const char* message;  // after "environment: "
  };
  for (const Case& k : {Case{"allreduce_example", "WEFT_SOCKET_IFNAME=ib", "WEFT_SOCKET_IFNAME='ib' matches no IPv4 "
                                                                          "interface that is up (this host's: "},
                        Case{"allreduce_example_c", "WEFT_LISTEN_ADDR=10.0.1.9",
                             "WEFT_LISTEN_ADDR='10.0.1.9' is not an address of this host (its IPv4 addresses: "}}) {
    const auto t0 = Clock::now();
    const auto ranks = start("bad", {c_->dir + "/ex/" + k.program}, {k.env});
    const auto codes = finish(ranks);
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10)) << k.env << ": a rank waited";
    for (int r = 0; r < kRanks; ++r) {
      const std::string err = slurp(ranks[static_cast<size_t>(r)].err);
      EXPECT_EQ(codes[static_cast<size_t>(r)], 1) << k.env << " rank " << r;
      EXPECT_EQ(err.rfind(std::string("environment: ") + k.message, 0), 0u) << k.env << " rank " << r << ": " << err;
      EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << k.env << " rank " << r << ": " << err;
      EXPECT_EQ(slurp(ranks[static_cast<size_t>(r)].out), "") << k.env << " rank " << r;
    }
  }
}

// One ESTABLISHED TCP socket as ss shows it.
struct Socket {
  std::string local, peer;  // "ip:port"
  int pid = -1;
};

std::vector<Socket> sockets_in(NetnsFabric& f, const std::string& host) {
  std::vector<Socket> out;
  auto r = f.run_in(host, "ss -tnpH state established");
  EXPECT_TRUE(r) << r.status().to_string();
  if (!r) return out;
  std::istringstream lines(*r);
  const std::regex pid_re("pid=([0-9]+)");
  for (std::string line; std::getline(lines, line);) {
    std::istringstream t(line);
    std::string rq, sq;
    Socket s;
    t >> rq >> sq >> s.local >> s.peer;
    std::smatch m;
    if (std::regex_search(line, m, pid_re)) s.pid = std::stoi(m[1]);
    out.push_back(s);
  }
  return out;
}

TEST_F(MultiHost, PlannedPortsAreTheSocketsPortsAtBothEnds) {
  // The plan, as a user makes it: the fabric, the job's ranks (2 per host,
  // one per NIC), weft route for TCP.
  const std::string w = std::string(WEFT_BINARY_DIR) + "/weft", d = c_->dir;
  std::string hosts;
  for (int r = 0; r < kRanks; ++r) hosts += fmt::format("{}:eth{}\\n", host_of_rank(r), r % kPerHost);
  auto planned = run_shell(fmt::format(
      "{0} topo gen clos --spines 1 --leaves 1 --hosts {1} --nics {2} -o {3}/fabric.json >/dev/null && "
      "printf '{4}' > {3}/alloc && {0} rank --topology {3}/fabric.json --hosts {3}/alloc --algo naive --format csv "
      "-o {3}/ranks.csv >/dev/null && {0} route --topology {3}/fabric.json --ranks {3}/ranks.csv --protocol tcp "
      "--dport 29600 -o {3}/plan.json >/dev/null",
      w, kHosts, kPerHost, d, hosts));
  ASSERT_TRUE(planned) << planned.status().to_string();
  const auto plan = nlohmann::json::parse(slurp(d + "/plan.json"));

  const std::string release = d + "/release";
  const auto ranks = start("plan", {WEFT_MULTIHOST_RANK, d + "/plan.json", release});
  // Every rank reports its sum, then holds its connections.
  const auto deadline = Clock::now() + kJobTimeout;
  std::vector<std::string> said(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    while (said[static_cast<size_t>(r)].find('\n') == std::string::npos && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      said[static_cast<size_t>(r)] = slurp(ranks[static_cast<size_t>(r)].out);
    }
  }
  std::map<std::string, std::vector<Socket>> seen;
  for (int h = 1; h <= kHosts; ++h) seen[fmt::format("h1-{}", h)] = sockets_in(*c_->fabric, fmt::format("h1-{}", h));
  std::ofstream(release).put('\n');
  const auto codes = finish(ranks);
  expect_all_succeeded(ranks, codes);

  for (int r = 0; r < kRanks; ++r) {
    std::string peers;
    for (int p = 0; p < kRanks; ++p) {
      if (p != r) peers += fmt::format(" {}:{}", p, host_of_rank(p) == host_of_rank(r) ? "shm" : "tcp");
    }
    EXPECT_EQ(said[static_cast<size_t>(r)], fmt::format("rank {} of {}: 0 elements wrong; peers{}\n", r, kRanks, peers));
  }
  const auto ip = [](int r) { return fmt::format("10.0.1.{}", r / kPerHost + 1); };
  const auto has = [&](int owner, const std::string& local, const std::string& peer) {
    for (const Socket& s : seen[host_of_rank(owner)]) {
      if (s.pid == ranks[static_cast<size_t>(owner)].pid && s.local == local && s.peer == peer) return true;
    }
    return false;
  };
  int cross = 0;
  for (const auto& f : plan["flows"]) {
    const int a = f["src_rank"], b = f["dst_rank"];
    if (host_of_rank(a) == host_of_rank(b)) continue;  // shared memory: no socket
    ++cross;
    const std::string src = fmt::format("{}:{}", ip(a), f["sport"].get<int>());
    const std::string dst = fmt::format("{}:{}", ip(b), f["dport"].get<int>());
    EXPECT_TRUE(has(a, src, dst)) << "rank " << a << " has no connection " << src << " -> " << dst;
    EXPECT_TRUE(has(b, dst, src)) << "rank " << b << " has no connection " << dst << " <- " << src;
  }
  EXPECT_EQ(cross, 6) << "the plan's cross-host flows";
  // Inside a host the ranks share memory: no rank socket joins two ranks of
  // one host, only the store's connections (rank 0 serves it on h1-1).
  const std::string store_port = fmt::format(":{}", c_->next_port - 1);
  for (const auto& [host, sockets] : seen) {
    for (const Socket& s : sockets) {
      if (s.local.ends_with(store_port) || s.peer.ends_with(store_port)) continue;
      EXPECT_NE(s.local.substr(0, s.local.rfind(':')), s.peer.substr(0, s.peer.rfind(':')))
          << host << ": a TCP connection inside the host " << s.local << " <-> " << s.peer;
    }
  }
}

}  // namespace
}  // namespace weft::test
