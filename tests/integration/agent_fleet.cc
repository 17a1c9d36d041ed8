#include "agent_fleet.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace weft::test {
namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_args(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> v;
  for (std::string w; in >> w;) v.push_back(w);
  return v;
}

}  // namespace

AgentFleet::~AgentFleet() {
  if (!started_) return;
  if (::testing::Test::HasFailure()) {
    std::fprintf(stderr, "agent fleet: %s kept (the test failed)\n", dir_.c_str());
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string AgentFleet::weft() const { return std::string(WEFT_BINARY_DIR) + "/weft"; }

bool AgentFleet::Run::ok() const { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

Result<std::unique_ptr<AgentFleet>> AgentFleet::start(NetnsFabric& fabric, const std::string& dir,
                                                      const std::vector<std::string>& extra) {
  std::unique_ptr<AgentFleet> f(new AgentFleet());
  f->fabric_ = &fabric;
  f->dir_ = dir;
  std::filesystem::create_directories(dir);
  f->secret_ = dir + "/secret";
  f->hosts_ = dir + "/hosts";
  std::ofstream(f->secret_) << "weft-test-secret-" << ::getpid() << "\n";
  ::chmod(f->secret_.c_str(), 0600);
  std::ofstream hosts(f->hosts_);
  for (const auto& h : fabric.hosts()) {
    hosts << h.name << " " << h.ip << "\n";
    std::vector<std::string> argv = {f->weft(), "agent", "--secret-file", f->secret_, "--ip", h.ip, "--name", h.name};
    argv.insert(argv.end(), extra.begin(), extra.end());
    if (fabric.spawn(h.name, argv, "/dev/null", dir + "/agent-" + h.name + ".log") <= 0) {
      return internal_error("cannot spawn agent on " + h.name);
    }
  }
  hosts.close();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (const auto& h : fabric.hosts()) {
    while (slurp(dir + "/agent-" + h.name + ".log").find("control on") == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) {
        return deadline_exceeded(fmt::format("agent on {} did not start: {}", h.name,
                                             slurp(dir + "/agent-" + h.name + ".log")));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  f->started_ = true;
  return f;
}

pid_t AgentFleet::probe_async(const std::string& args) {
  std::vector<std::string> argv = {weft(), "probe", "--hosts", hosts_, "--secret-file", secret_, "--db", db_path(), "-q"};
  for (auto& a : split_args(args)) argv.push_back(a);
  return fabric_->spawn(fabric_->hosts().front().name, argv, dir_ + "/probe.out", dir_ + "/probe.err");
}

AgentFleet::Run AgentFleet::probe(const std::string& args, int timeout_ms) {
  Run r;
  const pid_t pid = probe_async(args);
  r.status = fabric_->wait_child(pid, timeout_ms);
  r.out = slurp(dir_ + "/probe.out");
  r.err = slurp(dir_ + "/probe.err");
  return r;
}

Result<std::vector<PathRow>> load_paths(const std::string& db_path, int64_t campaign) {
  db::OpenOptions ro;
  ro.read_only = true;
  WEFT_ASSIGN_OR_RETURN(db::Database db, db::Database::open(db_path, ro));
  WEFT_ASSIGN_OR_RETURN(db::Statement st, db.prepare(
      "SELECT s.ip, d.ip, o.sport, o.dport, COALESCE(o.spine, -1), COALESCE(o.hop_addr, ''), o.answered, o.unstable "
      "FROM observations o JOIN hosts s ON s.id = o.src_id JOIN hosts d ON d.id = o.dst_id "
      "WHERE o.campaign_id = ? ORDER BY s.id, d.id, o.sport"));
  WEFT_RETURN_IF_ERROR(st.bind(1, campaign));
  std::vector<PathRow> out;
  for (;;) {
    WEFT_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) return out;
    out.push_back({st.column_text(0), st.column_text(1), static_cast<int>(st.column_int(2)),
                   static_cast<int>(st.column_int(3)), static_cast<int>(st.column_int(4)), st.column_text(5),
                   static_cast<int>(st.column_int(6)), st.column_int(7) != 0});
  }
}

}  // namespace weft::test
