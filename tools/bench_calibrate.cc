// weft bench --calibrate: measures the cost model's constants (tuning.h) on
// the transports between two ranks of this host, fits them
// (fit_transport_cost) and writes a tuning file for $WEFT_TUNING.
//
// Per transport, two rank processes (rank_spawn.h) measure, each point the
// best of --batches batches (the host may be shared):
//   exchange  each rank posts a receive and sends m bytes, then waits for
//             both: one step of every algorithm (α, β);
//   reduce    reduce_into over m bytes (f32 sum), both ranks at once (γ);
//   shared    the 8-byte exchange with both ranks on one CPU (alpha_shared:
//             a host running more ranks than CPUs).
// Every batch is checked: the bytes received are the peer's pattern of that
// batch, and the reduced vector holds the exact sum of the calls made.
// Rank 0 writes what it measured into the ranks' directory; the parent
// fits and writes the file.
#include "bench_calibrate.h"

#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "rank_spawn.h"
#include "weft/collectives/communicator.h"
#include "weft/collectives/transport.h"
#include "weft/collectives/tuning.h"
#include "weft/common/file_util.h"
#include "weft/common/huge_buffer.h"
#include "weft/common/json.h"

namespace weft::cli {
namespace {

using coll::CalibrationSamples;
using Clock = std::chrono::steady_clock;
using Points = std::vector<std::pair<size_t, double>>;

// 4 B, then x4 up to the largest: every step size of the sizes a model
// decides between is within a factor of 2 of one.
std::vector<size_t> sizes(size_t from, size_t most) {
  std::vector<size_t> v;
  for (size_t m = from; m <= most; m *= 4) v.push_back(m);
  return v;
}

// Iterations per batch: 16 MiB of messages, 8..2000 of them. Short
// batches, several: the best is the one no other work on the host interrupted.
int iters_for(size_t bytes) { return static_cast<int>(std::clamp<size_t>((16u << 20) / std::max<size_t>(bytes, 1), 8, 2000)); }

// The byte a rank sends in a batch: another in every batch, so that a
// message that did not arrive leaves the last batch's byte behind.
unsigned char pattern(int rank, int batch) { return static_cast<unsigned char>(1 + rank * 101 + batch * 7); }

// One rank's side of the exchanges with the other rank.
class Exchanger {
 public:
  Exchanger(coll::Transport& t, int rank, size_t most) : t_(t), rank_(rank), send_(most), recv_(most) {}
  Status init() {
    pair_ = t_.pair(1 - rank_);
    if (pair_ == nullptr) return internal_error("calibrate: the transport has no pair to the peer");
    WEFT_ASSIGN_OR_RETURN(smem_, t_.register_memory(send_.data(), send_.size()));
    WEFT_ASSIGN_OR_RETURN(rmem_, t_.register_memory(recv_.data(), recv_.size()));
    return ok_status();
  }
  Status step(size_t bytes) {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    WEFT_ASSIGN_OR_RETURN(coll::Ticket r, pair_->recv(*rmem_, 0, bytes));
    WEFT_ASSIGN_OR_RETURN(coll::Ticket s, pair_->send(*smem_, 0, bytes));
    WEFT_RETURN_IF_ERROR(pair_->wait_recv(r, deadline));
    return pair_->wait_send(s, deadline);
  }
  // The best batch's time per step, µs; every batch verified.
  Result<double> time(size_t bytes, int batches) {
    const int iters = iters_for(bytes);
    for (int i = 0; i < iters / 4 + 2; ++i) WEFT_RETURN_IF_ERROR(step(bytes));
    double best = 1e300;
    for (int b = 0; b < batches; ++b) {
      std::memset(send_.data(), pattern(rank_, b), bytes);
      WEFT_RETURN_IF_ERROR(step(8));  // both ranks filled their buffers: start together
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) WEFT_RETURN_IF_ERROR(step(bytes));
      best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters);
      const auto* got = reinterpret_cast<const unsigned char*>(recv_.data());
      const unsigned char want = pattern(1 - rank_, b);
      for (size_t i = 0; i < bytes; ++i) {
        if (got[i] != want) {
          return data_loss(fmt::format("calibrate: {} B exchange, batch {}: byte {} is {}, the peer sent {}", bytes, b, i, got[i], want));
        }
      }
    }
    return best;
  }

 private:
  coll::Transport& t_;
  int rank_;
  HugeBuffer send_, recv_;
  coll::Pair* pair_ = nullptr;
  std::unique_ptr<coll::Memory> smem_, rmem_;
};

// reduce_into over `bytes` of f32 ones into zeros, best batch, µs; the sum
// is checked against the number of calls (exact in f32 below 2^24).
Result<double> time_reduce(Exchanger& ex, size_t bytes, int batches) {
  const size_t n = bytes / 4;
  HugeBuffer dst(bytes), src(bytes);
  auto* d = reinterpret_cast<float*>(dst.data());
  auto* s = reinterpret_cast<float*>(src.data());
  std::fill(d, d + n, 0.0f);
  std::fill(s, s + n, 1.0f);
  const int iters = std::min(iters_for(bytes) * 4, 4000);
  WEFT_RETURN_IF_ERROR(ex.step(8));  // both ranks reduce at once, as in a step
  int calls = 0;
  auto call = [&] {
    coll::reduce_into(d, s, n, coll::DataType::kF32, coll::ReduceOp::kSum);
    ++calls;
  };
  for (int i = 0; i < iters / 4 + 2; ++i) call();
  double best = 1e300;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) call();
    best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters);
  }
  for (size_t i = 0; i < n; ++i) {
    if (d[i] != static_cast<float>(calls)) {
      return data_loss(fmt::format("calibrate: reduce of {} B: element {} is {}, not {}", bytes, i, d[i], calls));
    }
  }
  return best;
}

Result<std::unique_ptr<coll::Transport>> connect(const std::string& name, int rank, coll::Store& store, const char* prefix) {
  coll::TransportConfig tc;
  tc.name = name;
  tc.rank = rank;
  tc.size = 2;
  tc.ranks_on_host = 2;
  tc.store_prefix = prefix;
  return coll::make_transport(tc, store, Clock::now() + std::chrono::seconds(60));
}

// Both ranks on the first CPU this process may use; the transport is made
// after the move, so that its waits see the CPUs outnumbered
// (collectives/idle_wait.h), as on a host that runs more ranks than CPUs.
Result<double> time_shared(const std::string& name, int rank, coll::Store& store, int batches) {
  cpu_set_t all, one;
  if (::sched_getaffinity(0, sizeof all, &all) != 0) return io_error("sched_getaffinity", errno);
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &all)) {
      CPU_SET(c, &one);
      break;
    }
  }
  if (::sched_setaffinity(0, sizeof one, &one) != 0) return io_error("sched_setaffinity", errno);
  WEFT_ASSIGN_OR_RETURN(auto t, connect(name, rank, store, "calibrate-shared"));
  Exchanger ex(*t, rank, 64);
  WEFT_RETURN_IF_ERROR(ex.init());
  WEFT_ASSIGN_OR_RETURN(double us, ex.time(8, batches));
  if (::sched_setaffinity(0, sizeof all, &all) != 0) return io_error("sched_setaffinity", errno);
  return us;
}

Status measure(const std::string& name, int rank, coll::Store& store, const CalibrateArgs& a, CalibrationSamples& out) {
  WEFT_ASSIGN_OR_RETURN(auto t, connect(name, rank, store, "calibrate"));
  Exchanger ex(*t, rank, a.max_bytes);
  WEFT_RETURN_IF_ERROR(ex.init());
  for (size_t m : sizes(4, a.max_bytes)) {
    WEFT_ASSIGN_OR_RETURN(double us, ex.time(m, a.batches));
    out.exchange_us.emplace_back(m, us);
    if (rank == 0) fmt::print(stderr, "  {} exchange {:>8} B: {:10.2f} us (verified)\n", name, m, us);
  }
  for (size_t m : sizes(std::min<size_t>(1024, a.max_bytes), a.max_bytes)) {
    WEFT_ASSIGN_OR_RETURN(double us, time_reduce(ex, m, a.batches));
    out.reduce_us.emplace_back(m, us);
    if (rank == 0) fmt::print(stderr, "  {} reduce   {:>8} B: {:10.2f} us (verified)\n", name, m, us);
  }
  WEFT_ASSIGN_OR_RETURN(out.shared_us, time_shared(name, rank, store, a.batches));
  if (rank == 0) fmt::print(stderr, "  {} exchange        8 B, both ranks on one CPU: {:.2f} us (verified)\n", name, out.shared_us);
  return ok_status();
}

int rank_main(const std::string& name, int rank, const std::string& dir, const CalibrateArgs& a) {
  auto store = coll::open_store("file:" + dir, rank, Clock::now() + std::chrono::seconds(60));
  if (!store) return fail(store.status());
  CalibrationSamples s;
  if (Status st = measure(name, rank, **store, a, s); !st) return fail(st.with_context("calibrate " + name));
  if (rank != 0) return 0;
  const nlohmann::json j = {{"exchange_us", s.exchange_us}, {"reduce_us", s.reduce_us}, {"shared_us", s.shared_us}};
  if (Status st = write_file_atomic(dir + "/samples.json", j.dump()); !st) return fail(st);
  return 0;
}

// Rank 0's samples from the ranks' directory.
int collect(const std::string& dir, CalibrationSamples& s) {
  auto text = read_file(dir + "/samples.json");
  if (!text) return fail(text.status());
  auto j = parse_json(*text);
  if (!j) return fail(j.status());
  s.exchange_us = (*j)["exchange_us"].get<Points>();
  s.reduce_us = (*j)["reduce_us"].get<Points>();
  s.shared_us = (*j)["shared_us"].get<double>();
  return 0;
}

std::string utc_now() {
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The 1-minute load average (/proc/loadavg's first field): the constants
// of a busy host are slower than its own.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one.empty() ? "?" : one;
}

std::string machine() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string cpu = "?";
  std::ifstream in("/proc/cpuinfo");
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("model name", 0) == 0 && l.find(':') != std::string::npos) {
      cpu = l.substr(l.find(':') + 2);
      break;
    }
  }
  utsname u{};
  ::uname(&u);
  return fmt::format("{}: {} x {}, Linux {}", host, ::sysconf(_SC_NPROCESSORS_ONLN), cpu, u.release);
}

// What the constants pick, for the record: one host, and two hosts.
void print_picks(const coll::Tuning& t, const std::string& name) {
  for (int n : {2, 4, 8}) {
    const auto in = coll::SelectionInput::blocks(name, 1, n);
    fmt::print(stderr, "  {} ranks on one host over {}: {}\n", n, name, coll::select_allreduce({}, t, in).describe());
  }
  if (name != "tcp" || !t.transports.count("shm")) return;
  for (int per : {2, 4}) {
    const auto in = coll::SelectionInput::blocks("tcp", 2, per, "shm");
    fmt::print(stderr, "  2 hosts x {} ranks (shm inside, tcp across): {}\n", per, coll::select_allreduce({}, t, in).describe());
  }
}

}  // namespace

int run_calibrate(const CalibrateArgs& a, const std::string& command) {
  if (a.batches < 1) return fail(invalid_argument("--batches must be >= 1"));
  if (a.max_bytes < 64) return fail(invalid_argument(fmt::format("--max-bytes must be at least 64 for --calibrate (got {})", a.max_bytes)));
  const auto known = coll::transport_names();
  std::map<std::string, CalibrationSamples> all;
  const std::string load_before = load_average();
  const auto t0 = Clock::now();
  for (const std::string& name : a.transports) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return fail(not_found(fmt::format("--transport: '{}' is not a transport of this build", name)));
    }
    fmt::print(stderr, "calibrating {} (2 ranks on this host)...\n", name);
    CalibrationSamples s;
    const int rc = spawn_ranks(2, std::chrono::seconds(a.timeout_s), [&](int r, const std::string& dir) { return rank_main(name, r, dir, a); },
                               [&](const std::string& dir) { return collect(dir, s); });
    if (rc != 0) return rc;
    all[name] = std::move(s);
  }
  coll::Tuning tuning = coll::built_in_tuning();
  tuning.source = a.output.empty() ? "calibration" : a.output;
  for (const auto& [name, s] : all) {
    auto cost = coll::fit_transport_cost(s);
    if (!cost) return fail(cost.status().with_context("calibrate " + name));
    cost->hd_piece_bytes = tuning.of(name).hd_piece_bytes;
    tuning.transports[name] = *cost;
  }
  const coll::TuningInfo info{machine(), utc_now(), command,
                              fmt::format("1-minute load average {} before, {} after", load_before, load_average())};
  if (Status st = emit(a.output, coll::tuning_to_json(tuning, info, all)); !st) return fail(st);
  fmt::print(stderr, "measured in {:.1f} s ({}); the host's CPUs were shared: {}\n",
             std::chrono::duration<double>(Clock::now() - t0).count(), info.machine, info.load);
  for (const auto& [name, s] : all) {
    const coll::TransportCost& c = tuning.of(name);
    fmt::print(stderr, "{}: alpha {:.3g} us (ranks sharing a CPU: {:.3g}), beta {:.3g} ns/B (past {} B: {:.3g}), gamma {:.3g} ns/B\n",
               name, c.alpha_us, c.alpha_shared_us, c.beta_ns_per_byte, c.cache_bytes, c.beta_far_ns_per_byte, c.gamma_ns_per_byte);
    print_picks(tuning, name);
  }
  return 0;
}

}  // namespace weft::cli
