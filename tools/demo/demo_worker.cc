// The demo's rank worker (demo_worker.h).
#include "demo_worker.h"

#include <unistd.h>

#include <chrono>
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
  const auto deadline = Clock::now() + std::chrono::seconds(job.timeout_s);
  WEFT_ASSIGN_OR_RETURN(auto store, coll::open_store(job.store, rank, deadline));
  coll::CommConfig cfg;
  cfg.rank = rank;
  cfg.size = n;
  cfg.transport = "tcp";
  cfg.host = a.host;
  cfg.timeout = std::chrono::seconds(job.timeout_s);
  cfg.tcp.listen_address = a.ip;
  if (job.socket_buffer > 0) cfg.tcp.socket_buffer_bytes = job.socket_buffer;
  cfg.scratch_reserve_bytes = job.bytes;  // recycled memory: no page faults inside the timed call
  if (!job.plan.empty()) {
    WEFT_ASSIGN_OR_RETURN(cfg.plan, routing::load_plan(job.plan));
  }
  WEFT_ASSIGN_OR_RETURN(auto comm, coll::Communicator::create(cfg, *store));
  coll::CollectiveOptions o;
  o.algorithm = coll::Algorithm::kHalvingDoubling;
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

}  // namespace

int run_worker(const WorkerArgs& a) {
  if (a.dir.empty() || a.host.empty() || a.ip.empty() || a.max_bytes == 0) {
    return fail(invalid_argument("weft demo worker needs --dir, --host, --ip and --max-bytes"));
  }
  // The data buffer for good, and one scratch-sized buffer faulted in now
  // and recycled for every communicator's scratch.
  HugeBuffer::set_recycling(a.max_bytes + (4u << 20));
  HugeBuffer data(a.max_bytes);
  { HugeBuffer warm(a.max_bytes); }
  if (auto st = write_file_atomic(fmt::format("{}/ready-{}", a.dir, a.host), "ok\n"); !st) return fail(st);
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
        if (job->hosts[i] == a.host) rank = static_cast<int>(i);
      }
      if (rank < 0) continue;  // not in this job
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
    if (auto st = write_file_atomic(fmt::format("{}/result-{}-{}.json", a.dir, k, a.host), res.dump() + "\n"); !st) {
      return fail(st);
    }
  }
}

}  // namespace weft::cli::demo
