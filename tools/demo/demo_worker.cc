// The demo's rank worker (demo_worker.h).
#include "demo_worker.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <utility>
#include <thread>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "../bench_values.h"
#include "../cli_common.h"
#include "weft/collectives/communicator.h"
#include "weft/common/file_util.h"
#include "weft/common/huge_buffer.h"

namespace weft::cli::demo {
namespace {

using Clock = std::chrono::steady_clock;

struct Job {
  std::vector<std::string> hosts;
  std::string store, plan;
  uint64_t bytes = 0;
  int timeout_s = 60;
  int socket_buffer = 0;
  // "series": back-to-back calls for duration_s from a start rank 0 picks
  // once every rank is connected, written to start_file (CLOCK_REALTIME ns,
  // shared by every namespace of the machine) for the demo to time its faults.
  bool series = false;
  std::string start_file;
  double duration_s = 0;
  // The plan epochs file a watcher publishes to (docs/collectives-routes.md
  // "Plan epochs"), and the job id its epochs must name; empty: the plan is
  // fixed.
  std::string plan_epochs, job_id;
  // "hd" (default) or "hybrid"; connect_on_demand: CommConfig's (a rail
  // fabric's planes share nothing, so not every pair of ranks has a route).
  coll::Algorithm algorithm = coll::Algorithm::kHalvingDoubling;
  bool connect_on_demand = false;
};

Result<Job> parse_job(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    Job job;
    job.hosts = j.at("hosts").get<std::vector<std::string>>();
    job.store = j.at("store").get<std::string>();
    job.plan = j.at("plan").get<std::string>();
    job.bytes = j.at("bytes").get<uint64_t>();
    job.timeout_s = j.at("timeout_s").get<int>();
    job.socket_buffer = j.at("socket_buffer").get<int>();
    if (j.contains("series")) {
      job.series = true;
      job.start_file = j.at("series").at("start_file").get<std::string>();
      job.duration_s = j.at("series").at("duration_s").get<double>();
      if (!(job.duration_s > 0)) return invalid_argument("series duration out of range");
    }
    job.plan_epochs = j.value("plan_epochs", std::string());
    job.job_id = j.value("job", std::string());
    const auto algo = coll::parse_algorithm(j.value("algorithm", std::string("hd")));
    if (!algo) return invalid_argument("job: unknown algorithm");
    job.algorithm = *algo;
    job.connect_on_demand = j.value("connect_on_demand", false);
    if (job.hosts.size() < 2 || job.bytes % 4 != 0 || job.timeout_s < 1) return invalid_argument("job out of range");
    return job;
  } catch (const std::exception& e) {
    return invalid_argument(fmt::format("bad job file: {}", e.what()));
  }
}

struct Outcome {
  int rank = -1;
  double seconds = 0;
  int64_t wrong = -1;
  double fill_s = 0, connect_s = 0, verify_s = 0;  // where the rest of a job's time goes
};

// A job's communicator and its store: rank 0's store serves the others, so
// it stays up as long as the communicator (a late rank may still be reading).
struct Connected {
  std::unique_ptr<coll::Store> store;
  std::unique_ptr<coll::Communicator> comm;
};

Result<Connected> connect(const WorkerArgs& a, const Job& job, int rank) {
  const auto deadline = Clock::now() + std::chrono::seconds(job.timeout_s);
  Connected c;
  WEFT_ASSIGN_OR_RETURN(c.store, coll::open_store(job.store, rank, deadline));
  coll::CommConfig cfg;
  cfg.rank = rank;
  cfg.size = static_cast<int>(job.hosts.size());
  cfg.transport = "tcp";
  cfg.host = a.host;
  cfg.timeout = std::chrono::seconds(job.timeout_s);
  cfg.tcp.listen_address = a.ip;
  cfg.connect_on_demand = job.connect_on_demand;
  if (job.socket_buffer > 0) cfg.tcp.socket_buffer_bytes = job.socket_buffer;
  cfg.scratch_reserve_bytes = job.bytes;  // recycled memory: no page faults inside the timed call
  if (!job.plan.empty()) {
    WEFT_ASSIGN_OR_RETURN(cfg.plan, routing::load_plan(job.plan));
    cfg.plan_epochs = job.plan_epochs;
    cfg.job = job.job_id;
  }
  WEFT_ASSIGN_OR_RETURN(c.comm, coll::Communicator::create(cfg, *c.store, deadline));
  return c;
}

Result<Outcome> run_job(const WorkerArgs& a, const Job& job, int rank, HugeBuffer& data) {
  const int n = static_cast<int>(job.hosts.size());
  const size_t count = job.bytes / 4;
  if (job.bytes > data.size()) return invalid_argument(fmt::format("job of {} bytes > --max-bytes", job.bytes));
  Outcome out;
  out.rank = rank;
  auto t = Clock::now();
  auto lap = [&t] {
    const auto now = Clock::now();
    return std::chrono::duration<double>(now - std::exchange(t, now)).count();
  };
  fill_input("allreduce", coll::ReduceOp::kSum, coll::DataType::kF32, rank, count, data.data());
  out.fill_s = lap();
  WEFT_ASSIGN_OR_RETURN(Connected c, connect(a, job, rank));
  coll::Communicator* comm = c.comm.get();
  coll::CollectiveOptions o;
  o.algorithm = job.algorithm;
  WEFT_RETURN_IF_ERROR(comm->barrier());
  out.connect_s = lap();
  const auto t0 = Clock::now();
  WEFT_RETURN_IF_ERROR(comm->allreduce(data.data(), data.data(), count, coll::DataType::kF32, coll::ReduceOp::kSum, o));
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  lap();
  out.wrong = count_wrong("allreduce", coll::ReduceOp::kSum, coll::DataType::kF32, n, rank, count, count, data.data());
  WEFT_RETURN_IF_ERROR(comm->allreduce(&out.wrong, &out.wrong, 1, coll::DataType::kI64, coll::ReduceOp::kSum));
  WEFT_RETURN_IF_ERROR(comm->allreduce(&out.seconds, &out.seconds, 1, coll::DataType::kF64, coll::ReduceOp::kMax));
  out.verify_s = lap();
  return out;
}

// One call of a series: when its first rank started it (s after the series'
// start), until its last rank ended it (s), elements off the exact sum on
// the worst rank, and the plan epoch the call ended on (the same on every
// rank: epochs switch at agreed calls).
struct Call {
  double at_s = 0, seconds = 0;
  int64_t wrong = 0;
  uint64_t epoch = 0;
};

int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Back-to-back HD AllReduce calls, each verified, until rank 0's clock says
// the series is over. After each call one 4-element MAX agrees on the
// call's span, the worst rank's wrong count and whether to stop, so every
// rank makes the same number of calls.
Result<std::vector<Call>> run_series(const WorkerArgs& a, const Job& job, int rank, HugeBuffer& data) {
  const int n = static_cast<int>(job.hosts.size());
  const size_t count = job.bytes / 4;
  if (job.bytes > data.size()) return invalid_argument(fmt::format("job of {} bytes > --max-bytes", job.bytes));
  WEFT_ASSIGN_OR_RETURN(Connected c, connect(a, job, rank));
  // Rank 0 picks the start once everyone is connected (however long that
  // took on a loaded machine), a little ahead so every rank is waiting.
  int64_t start_ns = rank == 0 ? unix_ns() + 200'000'000 : 0;
  WEFT_RETURN_IF_ERROR(c.comm->allreduce(&start_ns, &start_ns, 1, coll::DataType::kI64, coll::ReduceOp::kMax));
  if (rank == 0) WEFT_RETURN_IF_ERROR(write_file_atomic(job.start_file, fmt::format("{}\n", start_ns)));
  const int64_t wait_ns = start_ns - unix_ns();
  if (wait_ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(wait_ns));
  const int64_t end_ns = start_ns + static_cast<int64_t>(job.duration_s * 1e9);
  coll::CollectiveOptions o;
  o.algorithm = coll::Algorithm::kHalvingDoubling;
  std::vector<Call> calls;
  for (;;) {
    fill_input("allreduce", coll::ReduceOp::kSum, coll::DataType::kF32, rank, count, data.data());
    const int64_t t0 = unix_ns();
    WEFT_RETURN_IF_ERROR(
        c.comm->allreduce(data.data(), data.data(), count, coll::DataType::kF32, coll::ReduceOp::kSum, o));
    const int64_t t1 = unix_ns();
    const uint64_t epoch = c.comm->plan_epoch();
    // The call lasts from the first rank's start to the last rank's end. A
    // rank leaves the agreement only once every rank has entered it, so the
    // next call starts after this one ended everywhere.
    int64_t agree[4] = {-t0, t1,
                        count_wrong("allreduce", coll::ReduceOp::kSum, coll::DataType::kF32, n, rank, count, count,
                                    data.data()),
                        rank == 0 && t1 >= end_ns ? 1 : 0};
    WEFT_RETURN_IF_ERROR(c.comm->allreduce(agree, agree, 4, coll::DataType::kI64, coll::ReduceOp::kMax));
    calls.push_back({static_cast<double>(-agree[0] - start_ns) / 1e9,
                     static_cast<double>(agree[1] + agree[0]) / 1e9, agree[2], epoch});
    if (agree[3] != 0) return calls;
  }
}

}  // namespace

uint64_t workers_memory_bytes(int workers, uint64_t bytes) {
  return static_cast<uint64_t>(workers) * (2 * bytes + kWorkerOverheadBytes);
}

Status check_workers_memory(std::string_view flag, int workers, uint64_t bytes, uint64_t available) {
  const uint64_t need = workers_memory_bytes(workers, bytes);
  if (need <= available) return ok_status();
  return invalid_argument(fmt::format(
      "{} {} needs about {} of memory for {} rank workers (each holds the data and a scratch buffer of that size); "
      "{} is available",
      flag, format_bytes(static_cast<double>(bytes)), format_bytes(static_cast<double>(need)), workers,
      format_bytes(static_cast<double>(available))));
}

std::optional<uint64_t> mem_available_bytes() {
  auto text = read_file("/proc/meminfo");
  if (!text) return std::nullopt;
  const auto at = text->find("MemAvailable:");
  if (at == std::string::npos) return std::nullopt;
  unsigned long long kib = 0;
  if (std::sscanf(text->c_str() + at, "MemAvailable: %llu kB", &kib) != 1) return std::nullopt;
  return static_cast<uint64_t>(kib) * 1024;
}

int run_worker(const WorkerArgs& a) {
  const std::string& name = a.name.empty() ? a.host : a.name;
  if (a.dir.empty() || a.host.empty() || a.ip.empty() || a.max_bytes == 0) {
    return fail(invalid_argument("weft demo worker needs --dir, --host, --ip and --max-bytes"));
  }
  // The data buffer for good, and one scratch-sized buffer faulted in now
  // and recycled for every communicator's scratch.
  HugeBuffer::set_recycling(a.max_bytes + (4u << 20));
  HugeBuffer data(a.max_bytes);
  { HugeBuffer warm(a.max_bytes); }
  if (auto st = write_file_atomic(fmt::format("{}/ready-{}", a.dir, name), "ok\n"); !st) return fail(st);
  for (int k = 1;; ++k) {
    const std::string path = fmt::format("{}/job-{}.json", a.dir, k);
    Result<std::string> text = not_found("");
    while (!(text = read_file(path))) {
      if (::access(fmt::format("{}/stop", a.dir).c_str(), F_OK) == 0) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto job = parse_job(*text);
    nlohmann::json res;
    int rank = -1;
    if (job) {
      for (size_t i = 0; i < job->hosts.size(); ++i) {
        if (job->hosts[i] == name) rank = static_cast<int>(i);
      }
      if (rank < 0) continue;  // not in this job
      if (job->series) {
        auto calls = run_series(a, *job, rank, data);
        if (calls) {
          nlohmann::json rows = nlohmann::json::array();
          for (const Call& call : *calls) rows.push_back({call.at_s, call.seconds, call.wrong, call.epoch});
          res = {{"rank", rank}, {"ok", true}, {"calls", rank == 0 ? rows : nlohmann::json::array()}};
        } else {
          res = {{"rank", rank}, {"ok", false}, {"error", calls.status().to_string()}};
        }
        if (auto st = write_file_atomic(fmt::format("{}/result-{}-{}.json", a.dir, k, name), res.dump() + "\n"); !st) {
          return fail(st);
        }
        continue;
      }
      const auto t_job = Clock::now();
      auto out = run_job(a, *job, rank, data);
      const double job_s = std::chrono::duration<double>(Clock::now() - t_job).count();
      if (out) {
        res = {{"rank", rank}, {"ok", true}, {"seconds", out->seconds}, {"wrong", out->wrong}, {"job_seconds", job_s},
               {"fill_seconds", out->fill_s}, {"connect_seconds", out->connect_s}, {"verify_seconds", out->verify_s}};
      } else {
        res = {{"rank", rank}, {"ok", false}, {"error", out.status().to_string()}};
      }
    } else {
      res = {{"rank", rank}, {"ok", false}, {"error", job.status().to_string()}};
    }
    if (auto st = write_file_atomic(fmt::format("{}/result-{}-{}.json", a.dir, k, name), res.dump() + "\n"); !st) {
      return fail(st);
    }
  }
}

}  // namespace weft::cli::demo
