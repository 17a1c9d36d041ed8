// AgentFleet: `weft agent` in every host namespace of a NetnsFabric, a secret
// and a hosts file, and `weft probe` run from a host (the controller must live
// inside the fabric to reach the agents' control ports).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "netns_fabric.h"
#include "weft/db/stores.h"

namespace weft::test {

class AgentFleet {
 public:
  // Starts the agents and waits until each reports its control port. The
  // fleet owns `dir` (secret, hosts, logs, database): removed when the fleet
  // goes, unless the test has failed by then (kept for a look, and named).
  static Result<std::unique_ptr<AgentFleet>> start(NetnsFabric& fabric, const std::string& dir,
                                                   const std::vector<std::string>& extra_agent_args = {});
  ~AgentFleet();
  AgentFleet(const AgentFleet&) = delete;
  AgentFleet& operator=(const AgentFleet&) = delete;
  const std::string& secret_path() const { return secret_; }
  const std::string& hosts_path() const { return hosts_; }
  std::string db_path() const { return dir_ + "/fabric.db"; }
  std::string weft() const;

  struct Run {
    int status = -1;  // waitpid status; -1 = timed out
    std::string out, err;
    bool ok() const;
  };
  // Runs `weft probe --hosts .. --secret-file .. --db .. ARGS` inside h1-1.
  Run probe(const std::string& args, int timeout_ms = 60000);
  // Starts it and returns at once (for kill tests).
  pid_t probe_async(const std::string& args);

 private:
  AgentFleet() = default;
  NetnsFabric* fabric_ = nullptr;
  bool started_ = false;  // a fleet that failed to start keeps its dir: its logs say why
  std::string dir_, secret_, hosts_;
};

// One row of the paths view, keyed for comparison with ground truth.
struct PathRow {
  std::string src_ip, dst_ip;
  int sport = 0, dport = 0;
  int spine = -1;  // -1 = NULL
  std::string hop_addr;
  int answered = 0;
  bool unstable = false;
};
Result<std::vector<PathRow>> load_paths(const std::string& db_path, int64_t campaign);

}  // namespace weft::test
