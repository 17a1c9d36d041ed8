// The metrics endpoint: the text it renders (exact lines), the bounded label
// sets of the sweep tallies, and the HTTP server's answers and limits.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "weft/agent/metrics.h"
#include "weft/agent/metrics_server.h"
#include "weft/agent/sweep_tally.h"

namespace weft::agent {
namespace {

probe::FlowResult flow(uint32_t dst, int sent, int answered, int spine, uint64_t rtt_ns, uint32_t hop = 0) {
  probe::FlowResult f;
  f.dst_ip = dst;
  f.sport = 50000;
  f.sent = sent;
  f.answered = answered;
  f.spine = spine;
  f.hop_ip = hop;
  f.min_rtt_ns = rtt_ns;
  return f;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(SweepTallyTest, PathLabelsNameTheSpineTheHopOrNone) {
  EXPECT_EQ(path_label(flow(1, 3, 2, 5, 1000)), "5");
  EXPECT_EQ(path_label(flow(1, 3, 2, 0, 1000)), "0");
  EXPECT_EQ(path_label(flow(1, 3, 1, -1, 1000, 0x0a000001)), "10.0.0.1");  // TTL: the hop
  EXPECT_EQ(path_label(flow(1, 3, 1, -1, 1000, 0)), "0");                  // TTL: same leaf
  EXPECT_EQ(path_label(flow(1, 3, 0, -1, 0)), "none");
}

TEST(SweepTallyTest, PlannedFlowsLeaveOutSkippedOnesInsideThePlan) {
  probe::CampaignPlan p;
  p.targets = {7, 9, 11};
  p.sport_first = 100;
  p.sport_count = 13;
  p.skip.add(7, 100);
  p.skip.add(9, 112, 113);  // 113 is past the range
  p.skip.add(5, 101);       // 5 is no target
  EXPECT_EQ(planned_flows(p), 3u * 13 - 2);
}

TEST(SweepTallyTest, RunningSweepsCountUntilTheyEndAndAFailureIsCounted) {
  SweepTally t;
  {
    auto a = t.start(10);
    auto b = t.start(7);
    a.flow(flow(0x0a000002, 2, 1, 3, 40'000));
    a.flow(flow(0x0a000003, 3, 0, -1, 0));
    b.flow(flow(0x0a000002, 1, 1, 3, 120'000));
    auto s = t.snapshot();
    EXPECT_EQ(s.running, 2);
    EXPECT_EQ(s.running_planned, 17u);
    EXPECT_EQ(s.running_settled, 3u);
    probe::ProbeStats st;
    st.sent = 5;
    st.answered = 1;
    a.finish(st);
  }  // b ends without finish(): failed
  auto s = t.snapshot();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.running_planned, 0u);
  EXPECT_EQ(s.running_settled, 0u);
  EXPECT_EQ(s.flows_settled, 3u);
  EXPECT_EQ(s.sweeps_started, 2u);
  EXPECT_EQ(s.sweeps_failed, 1u);
  EXPECT_EQ(s.finished.sent, 5u);
  const PathTally& p = s.peers.at("10.0.0.2");
  EXPECT_EQ(p.flows, 2u);
  EXPECT_EQ(p.probes_sent, 3u);
  EXPECT_EQ(p.probes_answered, 2u);
  EXPECT_EQ(p.rtt_count, 2u);
  EXPECT_DOUBLE_EQ(p.rtt_sum_seconds, 160e-6);
  EXPECT_EQ(s.paths.at("3").rtt_buckets[2], 1u);  // 40 us: the 50 us bucket
  EXPECT_EQ(s.paths.at("3").rtt_buckets[4], 1u);  // 120 us: the 250 us bucket
  EXPECT_EQ(s.paths.at("none").probes_sent, 3u);
  EXPECT_EQ(s.paths.at("none").rtt_count, 0u);
}

// 300 destinations: the last kMaxPeers get a series each, the 44 updated
// longest ago one between them; a peer that comes back takes the slot of
// the one updated longest ago then, whose totals join _other.
TEST(SweepTallyTest, PeersBeyondTheCapShareOneSeriesTheOldestFirst) {
  SweepTally t;
  auto sw = t.start(302);
  for (uint32_t i = 1; i <= 300; ++i) sw.flow(flow(0x0a000000 + i, 1, 1, static_cast<int>(i % 70), 1000));
  auto s = t.snapshot();
  EXPECT_EQ(s.peers.size(), kMaxPeers + 1);
  EXPECT_EQ(s.peers.at(kOtherLabel).flows, 300u - kMaxPeers);
  EXPECT_EQ(s.peers.count("10.0.0.44"), 0u);
  EXPECT_EQ(s.peers.at("10.0.0.45").flows, 1u);
  sw.flow(flow(0x0a000000 + 2, 1, 1, 1, 1000));  // 10.0.0.2 again: 10.0.0.45 makes room
  sw.flow(flow(0x0a000000 + 2, 1, 1, 1, 1000));
  s = t.snapshot();
  EXPECT_EQ(s.peers.size(), kMaxPeers + 1);
  EXPECT_EQ(s.peers.at("10.0.0.2").flows, 2u);
  EXPECT_EQ(s.peers.count("10.0.0.45"), 0u);
  EXPECT_EQ(s.peers.at(kOtherLabel).flows, 300u - kMaxPeers + 1);
  uint64_t all = 0;
  for (const auto& [label, p] : s.peers) all += p.flows;
  EXPECT_EQ(all, 302u);
  // Spines 1..64 are seen first; 0 and 65..69 (6 of every 70 ports, 4 times) share _other.
  EXPECT_EQ(s.paths.size(), kMaxPaths + 1);
  EXPECT_EQ(s.paths.at(kOtherLabel).flows, 24u);
  EXPECT_EQ(s.paths.count("0"), 0u);
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(MetricsTest, RendersEveryFamilyWithHelpTypeAndExactValues) {
  AgentSnapshot s;
  s.name = "h\"1";
  s.control.sessions = 9;
  s.control.rejected[static_cast<size_t>(ControlReject::kBadAuth)] = 4;
  s.live_sessions = 2;
  s.control.strangers = 1;
  s.control.authenticated = 1;
  s.control.rate_capped = 5;
  s.control.rejected[static_cast<size_t>(ControlReject::kReplayed)] = 6;
  s.reflector.answered = 123;
  s.reflector.reject(probe::Reject::kReplayed);
  SweepTally t;
  {
    auto sw = t.start(5);
    sw.flow(flow(0x0a000102, 3, 2, 2, 30'000));
    probe::ProbeStats st;
    st.sent = 3;
    st.answered = 2;
    st.timed_out = 1;
    st.retried = 1;
    st.reject(probe::Reject::kLate);
    sw.finish(st);
  }
  s.sweeps = t.snapshot();
  const std::string m = render_metrics(s);
  for (const char* line : {
           "weft_agent_info{name=\"h\\\"1\",version=\"0.1.0\"} 1",
           "# TYPE weft_agent_probes_sent_total counter",
           "weft_agent_probes_sent_total 3",
           "weft_agent_probes_answered_total 2",
           "weft_agent_probes_timed_out_total 1",
           "weft_agent_probes_retried_total 1",
           "weft_agent_probe_replies_rejected_total{reason=\"late\"} 1",
           "weft_agent_probe_replies_rejected_total{reason=\"bad_mac\"} 0",
           "weft_agent_reflector_answered_total 123",
           "weft_agent_reflector_rejected_total{reason=\"replayed\"} 1",
           "weft_agent_control_rejected_total{reason=\"bad_auth\"} 4",
           "weft_agent_control_rejected_total{reason=\"timeout\"} 0",
           "# TYPE weft_agent_sessions gauge",
           "weft_agent_sessions 2",
           "weft_agent_sessions_total 9",
           "weft_agent_control_rejected_total{reason=\"replayed\"} 6",
           "weft_agent_control_rejected_total{reason=\"target_not_in_hosts\"} 0",
           "weft_agent_sessions_unauthenticated 1",
           "weft_agent_sessions_authenticated 1",
           "# TYPE weft_agent_campaigns_rate_capped_total counter",
           "weft_agent_campaigns_rate_capped_total 5",
           "weft_agent_campaigns_started_total 1",
           "weft_agent_campaigns_running 0",
           "weft_agent_flows_settled_total 1",
           "weft_agent_peer_probes_sent_total{peer=\"10.0.1.2\"} 3",
           "weft_agent_peer_probes_answered_total{peer=\"10.0.1.2\"} 2",
           "# TYPE weft_agent_peer_rtt_seconds summary",
           "weft_agent_peer_rtt_seconds_count{peer=\"10.0.1.2\"} 1",
           "# TYPE weft_agent_path_rtt_seconds histogram",
           "weft_agent_path_rtt_seconds_bucket{spine=\"2\",le=\"2.5e-05\"} 0",
           "weft_agent_path_rtt_seconds_bucket{spine=\"2\",le=\"5e-05\"} 1",
           "weft_agent_path_rtt_seconds_bucket{spine=\"2\",le=\"+Inf\"} 1",
           "weft_agent_path_rtt_seconds_sum{spine=\"2\"} 3e-05",
       }) {
    EXPECT_TRUE(has_line(m, line)) << "missing: " << line << "\n" << m;
  }
  // Every family has its HELP right before its TYPE.
  size_t types = 0;
  for (size_t at = m.find("# TYPE "); at != std::string::npos; at = m.find("# TYPE ", at + 1)) {
    ++types;
    const std::string name = m.substr(at + 7, m.find(' ', at + 7) - at - 7);
    EXPECT_NE(m.rfind("# HELP " + name + " ", at), std::string::npos) << name;
  }
  EXPECT_EQ(types, 30u);
}

// A client of the server: one request, the whole answer (until close or timeout).
class Client {
 public:
  explicit Client(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Client() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const std::string& s) { ASSERT_EQ(::send(fd_, s.data(), s.size(), MSG_NOSIGNAL), ssize_t(s.size())); }
  // Reads until the peer closes (or `until` appears); "" on timeout.
  std::string read(const std::string& until = "") {
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return n == 0 || errno == ECONNRESET ? out + (n == 0 ? "" : "<reset>") : "<timeout>";
      out.append(buf, static_cast<size_t>(n));
      if (!until.empty() && out.find(until) != std::string::npos) return out;
    }
  }

 private:
  int fd_;
  bool connected_ = false;
};

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MetricsServerConfig c;
    c.port = 0;
    c.idle_timeout_ms = 300;
    c.max_connections = 3;
    auto s = MetricsServer::start(c, [] { return std::string("weft_x 1\n"); });
    ASSERT_TRUE(s) << s.status().to_string();
    srv_ = std::move(*s);
  }
  std::unique_ptr<MetricsServer> srv_;
};

TEST_F(MetricsServerTest, GetMetricsAnswersTheTextFormat) {
  Client c(srv_->port());
  c.send("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string r = c.read();
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("Content-Length: 9\r\n"), std::string::npos) << r;
  EXPECT_EQ(r.substr(r.size() - 9), "weft_x 1\n");
}

TEST_F(MetricsServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  Client c(srv_->port());
  for (int i = 0; i < 3; ++i) {
    c.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_NE(c.read("weft_x 1\n").find("200 OK"), std::string::npos) << i;
  }
}

struct Answer {
  const char* request;
  const char* status_line;
};
class MetricsServerAnswerTest : public MetricsServerTest, public ::testing::WithParamInterface<Answer> {};

TEST_P(MetricsServerAnswerTest, OtherPathsAndMethodsAreRefused) {
  Client c(srv_->port());
  c.send(GetParam().request);
  const std::string r = c.read();
  EXPECT_EQ(r.rfind(GetParam().status_line, 0), 0u) << r;
}

INSTANTIATE_TEST_SUITE_P(
    Requests, MetricsServerAnswerTest,
    ::testing::Values(Answer{"GET /secret HTTP/1.1\r\nConnection: close\r\n\r\n", "HTTP/1.1 404 Not Found\r\n"},
                      Answer{"POST /metrics HTTP/1.1\r\nConnection: close\r\n\r\n", "HTTP/1.1 405 Method Not Allowed\r\n"},
                      Answer{"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", "HTTP/1.1 200 OK\r\n"},
                      Answer{"HEAD /metrics HTTP/1.0\r\n\r\n", "HTTP/1.0 200 OK\r\n"}));

TEST_F(MetricsServerTest, ARequestWithABodyIsClosedUnanswered) {
  Client c(srv_->port());
  c.send("GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(c.read(), "");
}

TEST_F(MetricsServerTest, AHeaderOver8KiBIsClosedUnanswered) {
  Client c(srv_->port());
  c.send("GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(9000, 'a') + "\r\n\r\n");
  EXPECT_EQ(c.read(), "");
}

TEST_F(MetricsServerTest, AnIdleClientIsClosedAfterTheTimeout) {
  Client c(srv_->port());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(c.read(), "");  // closed by the server, not our 5 s receive timeout
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ms, 250);
  EXPECT_LT(ms, 3000);
}

// Clients that connect and stay idle must not lock a scrape out: at the limit
// the oldest connection is closed and the new one served (the new one was
// refused: 3 idle connections, here, kept Prometheus out until they timed out).
TEST_F(MetricsServerTest, ANewConnectionAtTheLimitClosesTheOldestAndIsServed) {
  Client a(srv_->port()), b(srv_->port()), c(srv_->port());
  a.send("GET /metrics HTTP/1.1\r\n\r\n");  // all three held open by the server
  ASSERT_NE(a.read("weft_x 1\n").find("200 OK"), std::string::npos);
  Client d(srv_->port());
  d.send("GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_NE(d.read("weft_x 1\n").find("200 OK"), std::string::npos);
  const std::string ra = a.read();  // closed, not the 5 s receive timeout
  EXPECT_TRUE(ra.empty() || ra == "<reset>") << ra;
  for (Client* k : {&b, &c, &d}) {
    k->send("GET /metrics HTTP/1.1\r\n\r\n");
    EXPECT_NE(k->read("weft_x 1\n").find("200 OK"), std::string::npos);
  }
  Client e(srv_->port());  // closes b, the oldest now
  e.send("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_NE(e.read().find("200 OK"), std::string::npos);
  const std::string rb = b.read();
  EXPECT_TRUE(rb.empty() || rb == "<reset>") << rb;
}

// Out of descriptors, a queued connection makes every accept fail at once
// (EMFILE): the loop spun a core for as long as the shortage lasted. Now it
// waits between attempts, and serves the connection once descriptors are free.
TEST_F(MetricsServerTest, OutOfDescriptorsTheAcceptLoopWaitsAndThenServes) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  std::vector<int> filler;
  struct Restore {
    rlimit lim;
    std::vector<int>& fds;
    ~Restore() {
      for (int fd : fds) ::close(fd);
      ::setrlimit(RLIMIT_NOFILE, &lim);
    }
  } restore{saved, filler};
  int top = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // the lowest free descriptor
  ASSERT_GE(top, 0);
  ::close(top);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(top) + 64;  // a few free; the filler takes them all
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);
  ASSERT_EQ(errno, EMFILE);
  ::close(filler.back());  // one descriptor for the client; none left for the server's accept
  filler.pop_back();
  Client c(srv_->port());
  ASSERT_TRUE(c.connected());
  c.send("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
  const auto cpu_ms = [] {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000.0 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000.0;
  };
  const double before = cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const double used = cpu_ms() - before;
  EXPECT_LT(used, 150.0) << "the accept loop spun for 600 ms";  // a spin takes ~600
  for (int fd : filler) ::close(fd);
  filler.clear();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(c.read().find("200 OK"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500));  // within the 1 s back-off
}

TEST(MetricsServerStartTest, ATakenPortIsAnError) {
  auto a = MetricsServer::start({.ip = "127.0.0.1", .port = 0}, [] { return std::string(); });
  ASSERT_TRUE(a);
  auto b = MetricsServer::start({.ip = "127.0.0.1", .port = (*a)->port()}, [] { return std::string(); });
  ASSERT_FALSE(b);
  EXPECT_NE(b.status().message().find("metrics endpoint 127.0.0.1:"), std::string::npos) << b.status().message();
  auto c = MetricsServer::start({.ip = "localhost", .port = 0}, [] { return std::string(); });
  ASSERT_FALSE(c);
  EXPECT_EQ(c.status().message(), "metrics address 'localhost' is not an IP address");
}

}  // namespace
}  // namespace weft::agent
