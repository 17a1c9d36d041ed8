// DemoSession: weft's own commands run as processes on an EmulatedFabric,
// exactly as an operator runs them on a cluster:
//   `weft agent`  in every host namespace (reflector + control plane);
//   `weft probe`  from the first host (the controller must reach the agents'
//                 control ports through the fabric), TCP SYN probes to the
//                 data port, results into fabric.db in the work directory;
//   `weft demo worker`  one rank process per host for the whole demo
//                 (demo_worker.h): each AllReduce is a job it runs as a new
//                 communicator, rendezvous through a TCP store on rank 0, the
//                 plan's source ports bound when a plan is given, the one
//                 timed call verified element by element.
// Byte counters of every link are read around each AllReduce.
//
//   auto s = DemoSession::start(cfg, "/usr/bin/weft", dir).value();
//   auto probe = s->probe(hosts, /*targeted=*/false).value();
//   auto run = s->allreduce(hosts, "", "a1").value();   // ephemeral ports
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "demo_config.h"
#include "emulated_fabric.h"

namespace weft::cli::demo {

struct ProbeRun {
  int64_t campaign = 0;
  int64_t flows = 0;  // 5-tuples recorded
  double seconds = 0;
};

struct AllreduceRun {
  double seconds = 0;    // the call, slowest rank (bench --once)
  double busbw_Bps = 0;  // nccl-tests busbw: bytes x 2(n-1)/n / seconds
  int64_t wrong = -1;    // elements that missed the exact result, all ranks
  FabricCounters bytes;  // per link and direction, over the run
};

// One call of a series (DemoSession::series), every element verified.
struct SeriesCall {
  double at_s = 0;       // its start, seconds after the series began
  double seconds = 0;    // from the first rank's start to the last rank's end
  double busbw_Bps = 0;  // nccl-tests busbw of the call
  int64_t wrong = 0;
  uint64_t epoch = 0;    // the plan epoch it ended on (0: the job's own plan)
};

class DemoSession {
 public:
  // Builds the fabric and starts an agent on every host; `dir` exists.
  static Result<std::unique_ptr<DemoSession>> start(const DemoConfig& cfg, const std::string& weft,
                                                    const std::string& dir, bool own_dir);

  EmulatedFabric& fabric() { return *fabric_; }
  const std::string& db_path() const { return db_; }
  // Host names, leaf by leaf (h1-1, h1-2, ...).
  std::vector<std::string> host_names() const;

  // A campaign over `hosts` (written as the hosts file in this order): all
  // ordered pairs x probe_ports, or only the HD pairs of this order, each
  // stopping once every spine has a port (job launch).
  Result<ProbeRun> probe(const std::vector<std::string>& hosts, bool targeted);
  // A DSCP (UDP) campaign over `hosts`, `ports` source ports per pair: what
  // `weft watch` watches from (its hosts file is the watcher's).
  Result<ProbeRun> probe_udp(const std::vector<std::string>& hosts, int ports);
  // `weft watch` on the hosts of the last probe_udp(), watching `plan` and
  // publishing plan epochs of job `job` to `epochs`; returns once it watches.
  Result<pid_t> start_watch(const std::string& plan, const std::string& epochs, const std::string& job);
  // SIGTERM, wait, and what it printed (one line per verdict, cmd_watch.cc).
  Result<std::string> stop_watch(pid_t pid);

  // HD AllReduce with rank r on hosts[r]; `plan` = "" for ephemeral ports.
  // `tag` names the run in messages.
  Result<AllreduceRun> allreduce(const std::vector<std::string>& hosts, const std::string& plan,
                                 const std::string& tag);
  // Back-to-back HD AllReduce calls of cfg.call_bytes for cfg.timeline_s,
  // from a start rank 0 picks once every rank is connected; meanwhile
  // `at(t)` is called every few ms with the seconds since that start, to act
  // on the fabric. An error from it ends the wait. With `epochs`, the ranks
  // adopt the plan epochs published there for job `job_id`.
  Result<std::vector<SeriesCall>> series(const std::vector<std::string>& hosts, const std::string& plan,
                                         const std::string& tag, const std::function<Status(double t)>& at,
                                         const std::string& epochs = "", const std::string& job_id = "");
  // CLOCK_REALTIME ns at which the last series started (0: none yet).
  int64_t series_start_ns() const { return series_start_ns_; }

 private:
  DemoSession() = default;
  Status start_agents();
  Status start_workers();
  Result<ProbeRun> run_probe(const std::vector<std::string>& hosts, const std::string& file,
                             const std::vector<std::string>& args, int protocol);
  // Writes job k (hosts, store, timeout and socket buffer added) and waits
  // for every rank's result, calling `tick` while it waits.
  Result<std::vector<nlohmann::json>> run_job(const std::vector<std::string>& hosts, nlohmann::json job,
                                              const std::string& tag, int timeout_s,
                                              const std::function<Status()>& tick);
  int socket_buffer() const;

  DemoConfig cfg_;
  std::string weft_, dir_, db_, secret_;
  std::unique_ptr<EmulatedFabric> fabric_;
  std::vector<pid_t> workers_;  // by host, in fabric_->hosts() order
  int jobs_ = 0;
  int64_t series_start_ns_ = 0;
};

}  // namespace weft::cli::demo
