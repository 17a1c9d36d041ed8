// DemoSession (demo_session.h): the processes of the demo and their files.
#include "demo_session.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdio>

#include <cmath>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "demo_text.h"
#include "weft/common/file_util.h"
#include "weft/db/database.h"
#include "weft/db/stores.h"

namespace weft::cli::demo {
namespace {

constexpr int kProtoTcp = 6;
constexpr int kProtoUdp = 17;

}  // namespace

Status DemoConfig::validate() const {
  if (fabric != "spine-leaf" && fabric != "rail") {
    return invalid_argument(fmt::format("--fabric '{}' is not spine-leaf or rail", fabric));
  }
  if (fabric == "rail") {
    if (planes < 1 || planes > 4) return invalid_argument(fmt::format("--planes {} is not 1..4", planes));
    if (rails < 1 || rails > 8) return invalid_argument(fmt::format("--rails {} is not 1..8", rails));
    if (rail_hosts < kRailLeaves || rail_hosts > 64) {
      return invalid_argument(fmt::format("--rail-hosts {} is not {}..64 (every rail leaf needs a host)", rail_hosts, kRailLeaves));
    }
  }
  if (spines < 1 || leaves < 1 || hosts_per_leaf < 1) return invalid_argument("fabric sizes must be >= 1");
  if (hosts() < 2) return invalid_argument("an AllReduce needs at least 2 hosts");
  if (rate_mbit < 1 || rate_mbit > 100000) return invalid_argument(fmt::format("--rate-mbit {} is not 1..100000", rate_mbit));
  // The range scripts/netns-fabric.sh and EmulatedFabric accept (576: the
  // smallest datagram every IPv4 host must accept, RFC 791).
  if (mtu < 576 || mtu > 65535) return invalid_argument(fmt::format("--mtu {} is not 576..65535", mtu));
  if (bytes < 4) return invalid_argument("--size must be at least 4 bytes (one f32 element)");
  if (bytes % 4 != 0) return invalid_argument("--size must be a multiple of 4 bytes (f32 elements)");
  if (trials < 1 || trials > 100) return invalid_argument(fmt::format("--trials {} is not 1..100", trials));
  if (order != "shuffled" && order != "interleaved" && order != "sorted") {
    return invalid_argument(fmt::format("--order '{}' is not shuffled, interleaved or sorted", order));
  }
  if (fail && (fail->first < 1 || fail->first > spines || fail->second < 1 || fail->second > leaves)) {
    return invalid_argument(fmt::format("--fail {}:{}: no such link (spines 1..{}, leaves 1..{})", fail->first,
                                        fail->second, spines, leaves));
  }
  if (fail_during) {
    const FaultDuring& f = *fail_during;
    if (fail) return invalid_argument("--fail and --fail-during do not go together (one failure at a time)");
    if (f.spine < 1 || f.spine > spines || f.leaf < 1 || f.leaf > leaves) {
      return invalid_argument(fmt::format("--fail-during {}:{}: no such link (spines 1..{}, leaves 1..{})", f.spine,
                                          f.leaf, spines, leaves));
    }
    if (!(f.cut_s > 0) || !(timeline_s > f.cut_s)) {
      return invalid_argument(fmt::format("--fail-during: the cut at {:g} s must fall inside the {:g} s timeline",
                                          f.cut_s, timeline_s));
    }
    if (f.restore_s != 0 && !(f.restore_s > f.cut_s && f.restore_s < timeline_s)) {
      return invalid_argument(fmt::format("--fail-during: the restore at {:g} s must fall after the cut ({:g} s) and "
                                          "inside the {:g} s timeline",
                                          f.restore_s, f.cut_s, timeline_s));
    }
    if (converge_ms < 0 || converge_ms > 60000) {
      return invalid_argument(fmt::format("--converge-ms {} is not 0..60000", converge_ms));
    }
    if (timeline_s > 3600) return invalid_argument(fmt::format("--timeline {:g} s is over an hour", timeline_s));
    if (call_bytes < 4) return invalid_argument("--call-size must be at least 4 bytes (one f32 element)");
    if (call_bytes % 4 != 0) return invalid_argument("--call-size must be a multiple of 4 bytes");
  }
  if (probe_ports < spines || probe_ports > 4096) {
    return invalid_argument(fmt::format("--probe-ports {} is not {}..4096: the campaign needs a source port per spine "
                                        "at least (--spines {})",
                                        probe_ports, spines, spines));
  }
  if (auto st = check_namespace_prefix(prefix); !st) return invalid_argument("--prefix: " + st.message());
  if (dport == 0 || store_port == 0 || dport == store_port) return invalid_argument("--dport and --store-port must differ and be > 0");
  if (dport >= 49152) return invalid_argument("--dport must lie below the planned source ports (49152-65535)");
  if (timeout_s < 10) return invalid_argument("--timeout must be >= 10 s");
  if (socket_buffer != 0 && (socket_buffer < 4096 || socket_buffer > (1u << 30))) {
    return invalid_argument("--socket-buffer must be 4 KiB..1 GiB (0 = 5 ms of the link rate)");
  }
  return ok_status();
}

Result<std::unique_ptr<DemoSession>> DemoSession::start(const DemoConfig& cfg, const std::string& weft,
                                                        const std::string& dir, bool own_dir) {
  std::unique_ptr<DemoSession> s(new DemoSession());
  s->cfg_ = cfg;
  s->weft_ = weft;
  s->dir_ = dir;
  s->db_ = dir + "/fabric.db";
  s->secret_ = dir + "/secret";
  EmulatedFabricConfig fc;
  fc.spines = cfg.spines;
  fc.leaves = cfg.leaves;
  fc.hosts_per_leaf = cfg.hosts_per_leaf;
  fc.rate_mbit = cfg.rate_mbit;
  fc.mtu = cfg.mtu;
  fc.hash_seed = cfg.seed;
  fc.prefix = cfg.prefix;
  fc.work_dir = dir;
  fc.remove_work_dir = own_dir;
  if (cfg.fabric == "rail") {
    fc.spines = DemoConfig::kRailSpines;
    fc.planes = cfg.planes;
    fc.rails = cfg.rails;
    fc.rail_hosts = cfg.rail_hosts;
    fc.rail_leaves = DemoConfig::kRailLeaves;
  }
  WEFT_ASSIGN_OR_RETURN(s->fabric_, EmulatedFabric::create(fc));
  // The rail demo plans on the model and checks the plan against the
  // fabric's own forwarding (demo_rail.h): no agents, no probe.
  if (cfg.fabric != "rail") WEFT_RETURN_IF_ERROR(s->start_agents());
  WEFT_RETURN_IF_ERROR(s->start_workers());
  return s;
}

std::vector<std::string> DemoSession::host_names() const {
  std::vector<std::string> out;
  for (const auto& h : fabric_->hosts()) out.push_back(h.name);
  return out;
}

// One agent per host, capturing TCP SYN probes to the data port (CAP_NET_RAW:
// we are root); ready once it logs its control port.
Status DemoSession::start_agents() {
  // A per-run secret: the agents accept campaigns only from this controller.
  std::string secret = fmt::format("weft-demo-{}-{}", ::getpid(),
                                   std::chrono::steady_clock::now().time_since_epoch().count());
  WEFT_RETURN_IF_ERROR(write_file_atomic(secret_, secret + "\n", 0600));
  for (const auto& h : fabric_->hosts()) {
    WEFT_RETURN_IF_ERROR(fabric_
                             ->spawn(h.name,
                                     {weft_, "agent", "--secret-file", secret_, "--ip", h.ip, "--name", h.name,
                                      "--listen", h.ip + ":7400", "--tcp-port", std::to_string(cfg_.dport)},
                                     {}, "/dev/null", fmt::format("{}/agent-{}.log", dir_, h.name))
                             .status());
  }
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (const auto& h : fabric_->hosts()) {
    const std::string log = fmt::format("{}/agent-{}.log", dir_, h.name);
    for (;;) {
      auto text = read_file(log);
      if (text && text->find("control on") != std::string::npos) break;
      if (text && text->find("error") != std::string::npos) {
        return internal_error(fmt::format("the agent on {} did not start: {}", h.name, first_line(*text)));
      }
      if (InterruptGuard::interrupted()) return aborted("interrupted while starting the agents");
      if (Clock::now() > deadline) return deadline_exceeded(fmt::format("the agent on {} did not start in 30 s", h.name));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return ok_status();
}

Result<ProbeRun> DemoSession::probe(const std::vector<std::string>& hosts, bool targeted) {
  std::vector<std::string> args = {"--backend", "tcp-syn", "--dport", std::to_string(cfg_.dport)};
  if (targeted) {
    // Windows of ports until each HD pair has, on every spine, as many
    // answered ports as its host has HD partners (controller.h).
    for (const char* a : {"--targeted", "allreduce-hd"}) args.push_back(a);
    args.push_back("--spines");
    args.push_back(std::to_string(cfg_.spines));
  } else {
    args.push_back("--ports");
    args.push_back(std::to_string(cfg_.probe_ports));
  }
  return run_probe(hosts, targeted ? "/hosts-ranked" : "/hosts", args, kProtoTcp);
}

Result<ProbeRun> DemoSession::probe_udp(const std::vector<std::string>& hosts, int ports) {
  return run_probe(hosts, "/hosts-watched", {"--ports", std::to_string(ports)}, kProtoUdp);
}

Result<ProbeRun> DemoSession::run_probe(const std::vector<std::string>& hosts, const std::string& file,
                                        const std::vector<std::string>& args, int protocol) {
  std::string list;
  for (const auto& name : hosts) {
    WEFT_ASSIGN_OR_RETURN(const EmulatedHost* h, fabric_->host(name));
    list += fmt::format("{} {} 7400\n", h->name, h->ip);
  }
  const std::string hosts_file = dir_ + file;
  WEFT_RETURN_IF_ERROR(write_file_atomic(hosts_file, list));
  std::vector<std::string> argv = {weft_, "probe", "--hosts", hosts_file, "--secret-file", secret_, "--db", db_,
                                   "--rate", "20000", "--quiet"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto t0 = Clock::now();
  WEFT_ASSIGN_OR_RETURN(pid_t pid, fabric_->spawn(fabric_->hosts().front().name, argv, {}, dir_ + "/probe.out",
                                                  dir_ + "/probe.err"));
  auto st = fabric_->wait_all({pid}, Clock::now() + std::chrono::seconds(120), "weft probe");
  if (!st) {
    auto err = read_file(dir_ + "/probe.err");
    return st.status().with_context(err ? first_line(*err) : "");
  }
  ProbeRun r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  db::OpenOptions ro;
  ro.read_only = true;
  WEFT_ASSIGN_OR_RETURN(db::Database db, db::Database::open(db_, ro));
  WEFT_ASSIGN_OR_RETURN(std::optional<int64_t> c, db::latest_done_campaign(db, protocol));
  if (!c) {
    return internal_error(fmt::format("weft probe finished but the database holds no finished {} campaign",
                                      protocol == kProtoTcp ? "TCP" : "UDP"));
  }
  r.campaign = *c;
  WEFT_ASSIGN_OR_RETURN(r.flows, db.query_int(fmt::format("SELECT COUNT(*) FROM observations WHERE campaign_id = {}", *c)));
  return r;
}

// The watcher runs on the first host, as the controller does (it reaches
// the agents' control ports through the fabric), and is ready once it
// prints what it watches.
Result<pid_t> DemoSession::start_watch(const std::string& plan, const std::string& epochs, const std::string& job) {
  const std::string out = dir_ + "/watch.out", err = dir_ + "/watch.err";
  (void)std::remove(out.c_str());
  WEFT_ASSIGN_OR_RETURN(pid_t pid, fabric_->spawn(fabric_->hosts().front().name,
                                                  {weft_, "watch", "--hosts", dir_ + "/hosts-watched", "--secret-file",
                                                   secret_, "--db", db_, "--plan", plan, "--publish", epochs, "--job",
                                                   job},
                                                  {}, out, err));
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    auto text = read_file(out);
    if (text && text->find("watching ") != std::string::npos) return pid;
    if (!fabric_->running(pid)) {
      auto e = read_file(err);
      return internal_error(fmt::format("weft watch exited: {}", e ? first_line(*e) : ""));
    }
    if (InterruptGuard::interrupted()) return aborted("interrupted while starting weft watch");
    if (Clock::now() > deadline) return deadline_exceeded("weft watch did not start watching in 30 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Result<std::string> DemoSession::stop_watch(pid_t pid) {
  if (!fabric_->running(pid)) {  // reaped now: it died during the run
    auto e = read_file(dir_ + "/watch.err");
    return internal_error(fmt::format("weft watch died during the run: {}", e ? first_line(*e) : ""));
  }
  ::kill(pid, SIGTERM);
  WEFT_RETURN_IF_ERROR(
      fabric_->wait_all({pid}, Clock::now() + std::chrono::seconds(10), "weft watch").status());
  // The agents whose control connection crossed the cut link (docs/watch.md).
  if (auto err = read_file(dir_ + "/watch.err")) {
    std::istringstream in(*err);
    int lost = 0, back = 0;
    for (std::string line; std::getline(in, line);) {
      lost += line.find("reconnecting") != std::string::npos;
      back += line.find("reports again") != std::string::npos;
    }
    if (lost > 0) {
      fmt::print("  watch: {} agent(s) fell silent (their control connection crossed the cut), {} reconnected\n",
                 lost, back);
    }
  }
  return read_file(dir_ + "/watch.out");
}

// A rank that finished an HD step early sends into the next one while its
// new partner may still receive the last: with 4 MiB socket buffers that
// overlap took a third of the bandwidth here (16 ranks, 100 Mbit/s: 67% of
// the ideal; 128 KiB: 97%). About 5 ms of the link rate covers the
// bandwidth-delay product and bounds the overlap.
int DemoSession::socket_buffer() const {
  if (cfg_.socket_buffer > 0) return static_cast<int>(cfg_.socket_buffer);
  const double bytes = cfg_.rate_mbit * 1e6 / 8 * 0.005;
  return std::max(64 << 10, static_cast<int>(std::ceil(bytes / 65536)) * 65536);
}

Status DemoSession::start_workers() {
  // One after another: each faults its memory in alone (demo_worker.h).
  for (const auto& h : fabric_->hosts()) {
    WEFT_ASSIGN_OR_RETURN(pid_t pid, fabric_->spawn(h.name,
                                                    {weft_, "demo", "worker", "--dir", dir_, "--host", h.machine,
                                                     "--name", h.name, "--ip", h.ip, "--max-bytes",
                                                     std::to_string(cfg_.fail_during ? cfg_.call_bytes : cfg_.bytes)},
                                                    {}, fmt::format("{}/worker-{}.out", dir_, h.name),
                                                    fmt::format("{}/worker-{}.log", dir_, h.name)));
    workers_.push_back(pid);
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (!read_file(fmt::format("{}/ready-{}", dir_, h.name))) {
      if (!fabric_->running(pid)) {
        auto log = read_file(fmt::format("{}/worker-{}.log", dir_, h.name));
        return internal_error(fmt::format("the rank worker on {} exited: {}", h.name, log ? first_line(*log) : ""));
      }
      if (InterruptGuard::interrupted()) return aborted("interrupted while starting the rank workers");
      if (Clock::now() > deadline) return deadline_exceeded(fmt::format("the rank worker on {} did not start", h.name));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return ok_status();
}

Result<std::vector<nlohmann::json>> DemoSession::run_job(const std::vector<std::string>& hosts, nlohmann::json job,
                                                         const std::string& tag, int timeout_s,
                                                         const std::function<Status()>& tick) {
  const int n = static_cast<int>(hosts.size());
  const int k = ++jobs_;
  WEFT_ASSIGN_OR_RETURN(const EmulatedHost* root, fabric_->host(hosts.front()));
  // A store port per job: a late client never meets the last job's store.
  job["hosts"] = hosts;
  job["store"] = fmt::format("tcp://{}:{}", root->ip, cfg_.store_port + k % 100);
  job["timeout_s"] = cfg_.timeout_s;
  job["socket_buffer"] = socket_buffer();
  if (cfg_.fabric == "rail") {
    // Hybrid, and no pair connected before a call needs it: the ring's
    // neighbours across hosts sit on different planes (CommConfig::connect_on_demand).
    job["algorithm"] = "hybrid";
    job["connect_on_demand"] = true;
  }
  WEFT_RETURN_IF_ERROR(write_file_atomic(fmt::format("{}/job-{}.json", dir_, k), job.dump(1) + "\n"));
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  std::vector<nlohmann::json> results(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const std::string path = fmt::format("{}/result-{}-{}.json", dir_, k, hosts[static_cast<size_t>(r)]);
    for (;;) {
      if (auto text = read_file(path)) {
        results[static_cast<size_t>(r)] = nlohmann::json::parse(*text, nullptr, false);
        break;
      }
      for (size_t w = 0; w < workers_.size(); ++w) {
        if (!fabric_->running(workers_[w])) {
          return internal_error(fmt::format("run {}: the rank worker on {} died", tag, fabric_->hosts()[w].name));
        }
      }
      if (InterruptGuard::interrupted()) return aborted(fmt::format("interrupted during AllReduce run {}", tag));
      if (Clock::now() > deadline) return deadline_exceeded(fmt::format("AllReduce run {} did not finish in time", tag));
      if (tick) WEFT_RETURN_IF_ERROR(tick());
      std::this_thread::sleep_for(std::chrono::milliseconds(tick ? 5 : 20));
    }
  }
  for (int r = 0; r < n; ++r) {
    const auto& res = results[static_cast<size_t>(r)];
    if (!res.is_object() || !res.value("ok", false)) {
      return internal_error(fmt::format("AllReduce run {}: rank {} on {}: {}", tag, r, hosts[static_cast<size_t>(r)],
                                        res.is_object() ? res.value("error", "unreadable result") : "unreadable result"));
    }
  }
  return results;
}

Result<AllreduceRun> DemoSession::allreduce(const std::vector<std::string>& hosts, const std::string& plan,
                                            const std::string& tag) {
  const int n = static_cast<int>(hosts.size());
  WEFT_ASSIGN_OR_RETURN(FabricCounters before, fabric_->counters());
  WEFT_ASSIGN_OR_RETURN(auto results,
                        run_job(hosts, {{"bytes", cfg_.bytes}, {"plan", plan}}, tag, cfg_.timeout_s + 30, {}));
  WEFT_ASSIGN_OR_RETURN(FabricCounters after, fabric_->counters());
  AllreduceRun run;
  run.seconds = results[0].value("seconds", 0.0);
  run.wrong = results[0].value("wrong", int64_t{-1});
  if (!(run.seconds > 0)) return internal_error(fmt::format("AllReduce run {}: no time measured", tag));
  run.busbw_Bps = static_cast<double>(cfg_.bytes) * 2.0 * (n - 1) / n / run.seconds;
  run.bytes = after - before;
  if (run.wrong != 0) {
    return data_loss(fmt::format("AllReduce run {}: {} elements differ from the exact sum", tag, run.wrong));
  }
  return run;
}

Result<std::vector<SeriesCall>> DemoSession::series(const std::vector<std::string>& hosts, const std::string& plan,
                                                    const std::string& tag, const std::function<Status(double t)>& at,
                                                    const std::string& epochs, const std::string& job_id) {
  const int n = static_cast<int>(hosts.size());
  const std::string start_file = fmt::format("{}/series-{}.start", dir_, jobs_ + 1);
  nlohmann::json job = {{"bytes", cfg_.call_bytes},
                        {"plan", plan},
                        {"series", {{"start_file", start_file}, {"duration_s", cfg_.timeline_s}}}};
  if (!epochs.empty()) {
    job["plan_epochs"] = epochs;
    job["job"] = job_id;
  }
  std::optional<int64_t> start_ns;
  auto tick = [&]() -> Status {
    if (!start_ns) {
      auto text = read_file(start_file);
      if (!text) return ok_status();  // not every rank is connected yet
      start_ns = std::stoll(*text);
    }
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    return at(static_cast<double>(now - *start_ns) / 1e9);
  };
  // A call still running when the timeline ends finishes within the timeout.
  WEFT_ASSIGN_OR_RETURN(auto results,
                        run_job(hosts, job, tag, static_cast<int>(cfg_.timeline_s) + 2 * cfg_.timeout_s + 30, tick));
  std::vector<SeriesCall> calls;
  const double bus = static_cast<double>(cfg_.call_bytes) * 2.0 * (n - 1) / n;
  for (const auto& row : results[0].value("calls", nlohmann::json::array())) {
    if (!row.is_array() || row.size() != 4) return internal_error(fmt::format("run {}: unreadable call row", tag));
    SeriesCall c{row[0].get<double>(), row[1].get<double>(), 0, row[2].get<int64_t>(), row[3].get<uint64_t>()};
    if (!(c.seconds > 0)) return internal_error(fmt::format("run {}: a call without a time", tag));
    c.busbw_Bps = bus / c.seconds;
    if (c.wrong != 0) {
      return data_loss(fmt::format("run {}: the call at {:.2f} s had {} elements off the exact sum", tag, c.at_s, c.wrong));
    }
    calls.push_back(c);
  }
  if (calls.empty()) return internal_error(fmt::format("run {}: no call completed", tag));
  if (auto text = read_file(start_file)) series_start_ns_ = std::stoll(*text);
  return calls;
}

}  // namespace weft::cli::demo
