// The test fabric itself (scripts/netns-fabric.sh): every cross-leaf flow hashes
// onto exactly one live spine, the hash is stable (fixed seed), failed links are
// withdrawn and restored, and the fabric is torn down even when the test process
// is killed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "netns_fabric.h"

namespace weft::test {
namespace {

std::vector<FiveTuple> all_pairs(const NetnsFabric& f, int ports, int proto) {
  std::vector<FiveTuple> t;
  for (const auto& a : f.hosts())
    for (const auto& b : f.hosts())
      if (a.ip != b.ip)
        for (int p = 0; p < ports; ++p) t.push_back({a.ip, b.ip, proto, 40000 + p, proto == 6 ? 5201 : 4791});
  return t;
}

TEST(NetnsFabricTest, EveryCrossLeafFlowTakesOneLiveSpineAndSameLeafNone) {
  WEFT_SKIP_UNLESS_NETNS();
  auto f = NetnsFabric::create(FabricOptions::clos(3, 3, 2));
  ASSERT_TRUE(f) << f.status().to_string();
  for (int proto : {17, 6}) {
    const auto tuples = all_pairs(**f, 7, proto);
    auto gt = (*f)->ground_truth(tuples);
    ASSERT_TRUE(gt) << gt.status().to_string();
    std::set<int> used;
    for (size_t i = 0; i < tuples.size(); ++i) {
      const bool same_leaf = tuples[i].src_ip.substr(0, 7) == tuples[i].dst_ip.substr(0, 7);
      if (same_leaf) {
        EXPECT_EQ((*gt)[i], 0) << tuples[i].src_ip << " -> " << tuples[i].dst_ip;
      } else {
        EXPECT_GE((*gt)[i], 1);
        EXPECT_LE((*gt)[i], 3);
        used.insert((*gt)[i]);
      }
    }
    EXPECT_EQ(used, (std::set<int>{1, 2, 3})) << "L4 hashing should spread 7 ports x 24 pairs over all spines";
    auto again = (*f)->ground_truth(tuples);
    ASSERT_TRUE(again);
    EXPECT_EQ(*again, *gt) << "fixed hash seed: the same 5-tuple must keep its spine";
  }
}

TEST(NetnsFabricTest, FailedLinkIsWithdrawnAndRestored) {
  WEFT_SKIP_UNLESS_NETNS();
  auto f = NetnsFabric::create(FabricOptions::clos(3, 3, 1));
  ASSERT_TRUE(f) << f.status().to_string();
  const auto tuples = all_pairs(**f, 13, 17);
  ASSERT_TRUE((*f)->fail_link(2, 1).is_ok());
  auto gt = (*f)->ground_truth(tuples);
  ASSERT_TRUE(gt) << gt.status().to_string();
  std::set<int> to_or_from_leaf1, others;
  for (size_t i = 0; i < tuples.size(); ++i) {
    const bool touches1 = tuples[i].src_ip == "10.0.1.1" || tuples[i].dst_ip == "10.0.1.1";
    (touches1 ? to_or_from_leaf1 : others).insert((*gt)[i]);
  }
  EXPECT_EQ(to_or_from_leaf1, (std::set<int>{1, 3})) << "no flow of leaf 1 may use spine 2";
  EXPECT_EQ(others, (std::set<int>{1, 2, 3}));
  auto failed = (*f)->script("failed");
  ASSERT_TRUE(failed);
  EXPECT_EQ(*failed, "2 1\n");
  ASSERT_TRUE((*f)->restore_link(2, 1).is_ok());
  auto back = (*f)->ground_truth(tuples);
  ASSERT_TRUE(back);
  EXPECT_EQ(std::set<int>(back->begin(), back->end()), (std::set<int>{1, 2, 3}));
  EXPECT_EQ(*(*f)->script("failed"), "");
}

// The source ports of `sports` whose datagrams from `src` reach `dst` (UDP
// port 9999): three copies each, the receiver waits 300 ms after the last.
std::set<int> delivered(const FabricHost& src, const FabricHost& dst, const std::vector<int>& sports) {
  std::set<int> got;
  std::atomic<bool> bound{false};
  std::thread rx([&] {
    if (!enter_netns(dst.ns)) return;
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(9999);
    timeval tv{0, 300000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return void(::close(fd));
    bound = true;
    char b[16];
    sockaddr_in from{};
    socklen_t len = sizeof from;
    while (::recvfrom(fd, b, sizeof b, 0, reinterpret_cast<sockaddr*>(&from), &len) >= 0) {
      got.insert(ntohs(from.sin_port));
      len = sizeof from;
    }
    ::close(fd);
  });
  while (!bound) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::thread tx([&] {
    if (!enter_netns(src.ns)) return;
    for (int p : sports) {
      const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in me{}, to{};
      me.sin_family = to.sin_family = AF_INET;
      me.sin_port = htons(static_cast<uint16_t>(p));
      to.sin_port = htons(9999);
      ::inet_pton(AF_INET, dst.ip.c_str(), &to.sin_addr);
      if (::bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me) == 0) {
        for (int k = 0; k < 3; ++k) ::sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
      }
      ::close(fd);
    }
  });
  tx.join();
  rx.join();
  return got;
}

// A cut drops exactly the flows the fabric hashes over the link, in both
// directions, and changes no route (ground truth before = after); mended,
// every flow arrives again.
TEST(NetnsFabricTest, ACutLinkDropsExactlyTheFlowsThatCrossItAndMovesNone) {
  WEFT_SKIP_UNLESS_NETNS();
  auto f = NetnsFabric::create(FabricOptions::clos(3, 3, 1));
  ASSERT_TRUE(f) << f.status().to_string();
  const FabricHost& l1 = (*f)->host("h1-1");
  const FabricHost& l2 = (*f)->host("h2-1");
  std::vector<int> sports;
  for (int p = 50000; p < 50024; ++p) sports.push_back(p);
  auto spines = [&](const FabricHost& a, const FabricHost& b) {
    std::vector<FiveTuple> t;
    for (int p : sports) t.push_back({a.ip, b.ip, 17, p, 9999});
    return (*f)->ground_truth(t).value();
  };
  const std::vector<int> up = spines(l2, l1), down = spines(l1, l2);
  ASSERT_TRUE((*f)->cut_link(2, 1).is_ok());
  ASSERT_TRUE((*f)->cut_link(2, 1).is_ok()) << "cutting twice is cutting once";
  EXPECT_EQ(*(*f)->script("cuts"), "2 1\n");
  EXPECT_EQ(spines(l2, l1), up) << "a cut moves no route";
  for (const auto& [src, dst, truth] : {std::tuple{&l2, &l1, up}, std::tuple{&l1, &l2, down}}) {
    std::set<int> expect;
    for (size_t i = 0; i < sports.size(); ++i) {
      if (truth[i] != 2) expect.insert(sports[i]);
    }
    ASSERT_LT(expect.size(), sports.size()) << "some of 24 ports must hash onto spine 2";
    EXPECT_EQ(delivered(*src, *dst, sports), expect) << src->name << " -> " << dst->name;
  }
  ASSERT_TRUE((*f)->mend_link(2, 1).is_ok());
  EXPECT_EQ(*(*f)->script("cuts"), "");
  EXPECT_EQ(delivered(l2, l1, sports), std::set<int>(sports.begin(), sports.end()));
}

bool namespaces_with_prefix(const std::string& prefix) {
  auto out = run_shell("ip netns list");
  return out && out->find(prefix) != std::string::npos;
}

TEST(NetnsFabricTest, ReaperTearsDownTheFabricOfAKilledProcess) {
  WEFT_SKIP_UNLESS_NETNS();
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(p[0]);
    FabricOptions o = FabricOptions::clos(2, 2, 1);
    o.prefix_tag = "k";
    auto f = NetnsFabric::create(o);
    const char ok = f ? 'U' : 'E';
    (void)!::write(p[1], &ok, 1);
    ::kill(::getpid(), SIGKILL);  // no destructor, no atexit: only the reaper can clean up
  }
  ::close(p[1]);
  char c = 0;
  ASSERT_EQ(::read(p[0], &c, 1), 1);
  ::close(p[0]);
  ASSERT_EQ(c, 'U') << "child could not build its fabric";
  ::waitpid(child, nullptr, 0);
  const std::string prefix = fmt::format("wfk{}-", child);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = !namespaces_with_prefix(prefix);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone) << "namespaces " << prefix << "* still exist 10 s after the owner was killed";
}

TEST(NetnsFabricTest, DestructorRemovesNamespacesAndKillsChildren) {
  WEFT_SKIP_UNLESS_NETNS();
  std::string prefix;
  pid_t sleeper = -1;
  {
    auto f = NetnsFabric::create(FabricOptions::clos(1, 2, 1));
    ASSERT_TRUE(f) << f.status().to_string();
    prefix = (*f)->prefix();
    sleeper = (*f)->spawn("h1-1", {"/bin/sleep", "300"});
    ASSERT_GT(sleeper, 0);
    EXPECT_TRUE(namespaces_with_prefix(prefix));
  }
  EXPECT_FALSE(namespaces_with_prefix(prefix));
  EXPECT_NE(::kill(sleeper, 0), 0) << "child in the fabric survived teardown";
}

}  // namespace
}  // namespace weft::test
