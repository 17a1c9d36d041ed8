// weft bench: collective bandwidth in nccl-tests style, ranks as processes.
//
// Without a launcher environment the command forks --ranks processes of
// itself that meet through a file store in a temporary directory; under
// mpirun, srun or torchrun every process is one rank (store.h,
// launch_info_from_env). Every size is verified before it is timed: the
// inputs make exact results, and #wrong counts the elements that differ on
// any rank.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "bench_values.h"
#include "bench_calibrate.h"
#include "cli_common.h"
#include "rank_spawn.h"
#include "weft/collectives/communicator.h"
#include "weft/common/huge_buffer.h"
#include "weft/routing/plan.h"

namespace weft::cli {
namespace {

using coll::Communicator;
using coll::DataType;
using coll::ReduceOp;

struct BenchArgs {
  std::string collective;
  int ranks = 2;
  std::string transport = "tcp";
  std::string algo = "auto";
  std::string type = "f32";
  std::string op = "sum";
  std::string min_bytes = "4", max_bytes = "256M";
  double factor = 2;
  int iters = 0, warmup = -1, batches = 1;
  int ranks_per_host = 0;
  std::string plan;
  int timeout_s = 120;
  std::string segment = "0";
  std::string hd_piece;  // "" = the tuning's own
  int conns = 1;
  bool once = false;
  std::string socket_buffer = "0";
  std::string shm_single_copy;  // "" = the transport's default
  std::string tcp_splice;       // "" = the transport's default
  std::string congestion_control = "auto";
  std::string listen_address;
  std::string host;
  bool calibrate = false;
  std::string output;
};

struct Parsed {
  DataType t;
  ReduceOp op;
  coll::Algorithm algo;
  uint64_t lo, hi, segment;
};

// One rank's run over every size; rank 0 prints.
int run_rank(const BenchArgs& a, const Parsed& p, Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  const size_t es = coll::dtype_size(p.t);
  const std::string& c = a.collective;
  const double bus = c == "allreduce" ? 2.0 * (n - 1) / n : c == "broadcast" ? 1.0 : static_cast<double>(n - 1) / n;
  coll::CollectiveOptions o;
  o.algorithm = p.algo;
  o.segment_bytes = p.segment;
  if (me == 0) {
    fmt::print("# weft bench {}: {} ranks, transport {}, algorithm {}{}, {} hosts{}\n", c, n, a.transport, a.algo,
               a.hd_piece.empty() ? "" : ", hd piece " + a.hd_piece, comm.host_count(),
               a.batches > 1 ? fmt::format(", time = best of {} batches", a.batches) : "");
    fmt::print("#{:>12} {:>12} {:>6} {:>6} {:>12} {:>11} {:>11} {:>7}\n", "size(B)", "count", "type", "redop",
               "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    std::fflush(stdout);
  }
  int failures = 0;
  for (uint64_t bytes = p.lo; bytes <= p.hi; bytes = std::max<uint64_t>(bytes + 1, static_cast<uint64_t>(std::llround(static_cast<double>(bytes) * a.factor)))) {
    // Element counts: the whole vector for allreduce/broadcast; per rank
    // for reducescatter (output) and allgather (input), rounded down.
    const size_t total = std::max<size_t>(1, bytes / es);
    const bool split = c == "reducescatter" || c == "allgather";
    const size_t per = split ? std::max<size_t>(1, total / static_cast<size_t>(n)) : total;
    const size_t elems = split ? per * static_cast<size_t>(n) : total;
    HugeBuffer in(elems * es), out(elems * es);  // 64 MiB of 4 KiB faults: 0.5 s in a VM
    const size_t in_elems = c == "allgather" ? per : elems;
    fill_input(c, p.op, p.t, me, in_elems, in.data());
    // The collective is resolved here, not per call: the timed loop of a
    // 4 B AllReduce over shm is a few hundred nanoseconds a call, and the
    // peers' drivers (bench/peers/) call their library directly.
    const int kind = c == "allreduce" ? 0 : c == "reducescatter" ? 1 : c == "allgather" ? 2 : 3;
    auto call = [&](void* src, void* dst) -> Status {
      switch (kind) {
        case 0: return comm.allreduce(src, dst, elems, p.t, p.op, o);
        case 1: return comm.reduce_scatter(src, dst, per, p.t, p.op, o);
        case 2: return comm.allgather(src, dst, per, p.t, o);
        default:
          if (dst != src) std::memcpy(dst, src, elems * es);
          return comm.broadcast(dst, elems, p.t, 0, o);
      }
    };
    // Verify out of place against the closed form: the first call, or with
    // --once the one call that is also timed (a slow fabric, seconds a call).
    auto verify = [&]() -> Result<int64_t> {
      int64_t wrong = count_wrong(c, p.op, p.t, n, me, per, elems, out.data());
      WEFT_RETURN_IF_ERROR(comm.allreduce(&wrong, &wrong, 1, DataType::kI64, ReduceOp::kSum));
      return wrong;
    };
    double us = 0;
    int64_t wrong = 0;
    if (a.once) {
      if (Status s = comm.barrier(); !s) return fail(s);
      const auto t0 = std::chrono::steady_clock::now();
      if (Status s = call(in.data(), out.data()); !s) return fail(s);
      us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      auto w = verify();
      if (!w) return fail(w.status());
      wrong = *w;
      if (Status s = comm.allreduce(&us, &us, 1, DataType::kF64, ReduceOp::kMax); !s) return fail(s);
    } else {
      if (Status s = call(in.data(), out.data()); !s) return fail(s);
      auto w = verify();
      if (!w) return fail(w.status());
      wrong = *w;
      // Time, in place (as Gloo and MPI_IN_PLACE benchmarks do): `iters`
      // calls in --batches batches, each the slowest rank's mean; the best
      // batch is reported (bench/peers/timing.h: the host is shared).
      const int iters = a.iters > 0 ? a.iters : static_cast<int>(std::clamp<uint64_t>((uint64_t{1} << 29) / std::max<uint64_t>(bytes, 1), 5, 200));
      const int per_batch = std::max(1, iters / a.batches);
      const int warm = a.warmup >= 0 ? a.warmup : std::max(2, a.batches > 1 ? per_batch : iters / 5);
      for (int i = 0; i < warm; ++i) {
        if (Status s = call(out.data(), out.data()); !s) return fail(s);
      }
      std::vector<double> batch_us;
      for (int b = 0; b < a.batches; ++b) {
        if (Status s = comm.barrier(); !s) return fail(s);
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < per_batch; ++i) {
          if (Status s = call(out.data(), out.data()); !s) return fail(s);
        }
        batch_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / per_batch);
      }
      if (Status s = comm.allreduce(batch_us.data(), batch_us.data(), batch_us.size(), DataType::kF64, ReduceOp::kMax); !s) {
        return fail(s);
      }
      us = *std::min_element(batch_us.begin(), batch_us.end());
    }
    const double size_b = static_cast<double>(elems * es);
    const double algbw = size_b / us / 1e3;
    if (me == 0) {
      fmt::print(" {:>12} {:>12} {:>6} {:>6} {:>12.3f} {:>11.3f} {:>11.3f} {:>7}\n", elems * es, elems,
                 coll::dtype_name(p.t), split && c == "allgather" ? "none" : coll::reduce_op_name(p.op), us, algbw,
                 algbw * bus, wrong);
      std::fflush(stdout);
    }
    failures += wrong > 0;
    if (bytes == p.hi) break;
  }
  return failures ? 1 : 0;
}

int rank_main(const BenchArgs& a, const Parsed& p, int rank, int size, const std::string& store_spec) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.timeout_s);
  auto store = coll::open_store(store_spec, rank, deadline);
  if (!store) return fail(store.status());
  coll::CommConfig cfg;
  cfg.rank = rank;
  cfg.size = size;
  cfg.transport = a.transport;
  cfg.timeout = std::chrono::seconds(a.timeout_s);
  cfg.tcp.connections_per_peer = a.conns;
  cfg.tcp.congestion_control = a.congestion_control;
  if (a.ranks_per_host > 0) cfg.host = fmt::format("host{}", rank / a.ranks_per_host);
  if (!a.host.empty()) cfg.host = a.host;
  if (!a.listen_address.empty()) cfg.tcp.listen_address = a.listen_address;
  if (auto sb = parse_size(a.socket_buffer); sb && *sb > 0) cfg.tcp.socket_buffer_bytes = static_cast<int>(std::min<uint64_t>(*sb, 1u << 30));
  if (auto sc = parse_size(a.shm_single_copy); sc && !a.shm_single_copy.empty()) cfg.shm.single_copy_min_bytes = *sc;
  if (auto ts = parse_size(a.tcp_splice); ts && !a.tcp_splice.empty()) cfg.tcp.splice_min_bytes = *ts;
  if (!a.hd_piece.empty()) {
    auto tuning = coll::tuning_from_env();
    if (!tuning) return fail(tuning.status());
    for (auto& [name, c] : tuning->transports) c.hd_piece_bytes = *parse_size(a.hd_piece);  // checked in run_bench
    cfg.selection.tuning = std::move(*tuning);
  }
  if (a.once) cfg.scratch_reserve_bytes = p.hi;  // the one timed call must not pay page faults
  if (!a.plan.empty()) {
    auto plan = routing::load_plan(a.plan);
    if (!plan) return fail(plan.status());
    cfg.plan = std::move(*plan);
  }
  auto comm = Communicator::create(cfg, **store, deadline);
  if (!comm) return fail(comm.status());
  return run_rank(a, p, **comm);
}

int spawn(const BenchArgs& a, const Parsed& p) {
  return spawn_ranks(a.ranks, std::chrono::seconds(a.timeout_s) * 4,
                     [&](int r, const std::string& dir) { return rank_main(a, p, r, a.ranks, "file:" + dir); });
}

int run_bench(const BenchArgs& a) {
  auto t = coll::parse_dtype(a.type);
  auto op = coll::parse_reduce_op(a.op);
  auto algo = coll::parse_algorithm(a.algo);
  auto lo = parse_size(a.min_bytes), hi = parse_size(a.max_bytes), seg = parse_size(a.segment);
  if (!t) return fail(invalid_argument("--type must be f32, f64, f16, bf16, i32, i64 or u8, not '" + a.type + "'"));
  if (!op) return fail(invalid_argument("--op must be sum, prod, min or max, not '" + a.op + "'"));
  if (!algo) return fail(invalid_argument("--algo '" + a.algo + "' is unknown (auto, hd, ring, butterfly, oneshot, hybrid, hierarchical, binomial)"));
  if (!lo || !hi || *lo < 1 || *hi < *lo) return fail(invalid_argument("--min-bytes/--max-bytes must be sizes with 1 <= min <= max"));
  if (!seg) return fail(invalid_argument("--segment must be a size"));
  if (!a.hd_piece.empty()) {
    auto piece = parse_size(a.hd_piece);
    if (!piece || (*piece > 0 && *piece < coll::kMinHdPieceBytes)) {
      return fail(invalid_argument(fmt::format("--hd-piece must be 0 (whole) or a size of at least {} B, not '{}'",
                                               coll::kMinHdPieceBytes, a.hd_piece)));
    }
  }
  if (!parse_size(a.socket_buffer)) return fail(invalid_argument("--socket-buffer must be a size (0 = default)"));
  if (!a.shm_single_copy.empty() && !parse_size(a.shm_single_copy)) {
    return fail(invalid_argument("--shm-single-copy must be a size (0 = always through the ring)"));
  }
  if (!a.tcp_splice.empty() && !parse_size(a.tcp_splice)) {
    return fail(invalid_argument("--tcp-splice must be a size (0 = always copy)"));
  }
  if (a.factor <= 1.0) return fail(invalid_argument("--step-factor must be > 1"));
  Parsed p{*t, *op, *algo, *lo, *hi, *seg};
  if (auto info = coll::launch_info_from_env(); info) return rank_main(a, p, info->rank, info->size, info->store);
  if (a.ranks < 1 || a.ranks > 256) return fail(invalid_argument("--ranks must be in 1..256"));
  return spawn(a, p);
}

}  // namespace

void register_bench(CLI::App& app, Registry& reg) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Measure a collective's bandwidth (nccl-tests columns), verified; or --calibrate");
  cmd->footer(
      "weft bench COLLECTIVE runs --ranks processes on this host (or, under mpirun/srun/torchrun, one rank per process)\n"
      "and prints, for each size from --min-bytes to --max-bytes: time per call, algorithm\n"
      "bandwidth (size/time) and bus bandwidth (algbw x 2(n-1)/n for allreduce, (n-1)/n for\n"
      "reducescatter/allgather, 1 for broadcast), and #wrong: elements that missed the exact\n"
      "expected result on any rank (checked before timing; non-zero fails the command).\n"
      "Examples:\n"
      "  weft bench allreduce --ranks 4 --transport tcp -b 4 -e 64M\n"
      "  weft bench allreduce --ranks 4 --transport auto --ranks-per-host 2 --algo hybrid\n"
      "  weft bench allgather --ranks 8 --transport shm --algo ring\n"
      "\n"
      "weft bench --calibrate -o tuning.json measures the constants of the cost model that picks\n"
      "kAuto's AllReduce algorithm (docs/collectives.md \"Selection\"), per transport: alpha (the\n"
      "latency of a step: one message each way between two ranks), beta (each further byte of\n"
      "it) and gamma (each byte reduced, f32 sum), and alpha with both ranks on one CPU (a host\n"
      "running more ranks than CPUs). Two ranks on this host exchange messages of\n"
      "4 B to --max-bytes (default 16M, x4 apart) over tcp (loopback) and shm, or --transport\n"
      "only, and time reduce_into; each point is the best of --batches batches (default 9),\n"
      "every batch checked (the peer's bytes arrived, the sums are exact). A least-squares line\n"
      "through the points up to 1 MiB gives alpha and beta, the slope beyond it beta_far (messages that\n"
      "leave the cache), the reduce points gamma. About 5-20 s on an idle 2-CPU host; progress on\n"
      "stderr. The file records the machine, the time and the load average: measure on an idle\n"
      "machine of the kind your job runs on, with the transport it uses between hosts, then\n"
      "  WEFT_TUNING=tuning.json <your job>     (every rank must read the same file)\n"
      "or CommConfig::selection.tuning = *weft::coll::load_tuning(\"tuning.json\").\n"
      "Examples:\n"
      "  weft bench --calibrate -o tuning.json\n"
      "  weft bench --calibrate --transport tcp -e 16M --batches 9 -o tcp.json");
  cmd->add_option("collective", args->collective, "allreduce, reducescatter, allgather or broadcast (not with --calibrate)")
      ->check(CLI::IsMember({"allreduce", "reducescatter", "allgather", "broadcast"}));
  cmd->add_flag("--calibrate", args->calibrate, "measure the selection cost model's constants (below) instead");
  cmd->add_option("-o,--output", args->output, "--calibrate: the tuning file to write (default: stdout)");
  cmd->add_option("-n,--ranks", args->ranks, "processes to run (ignored under a launcher)")->capture_default_str();
  cmd->add_option("--transport", args->transport, "tcp, shm, auto (shm on one host, tcp across)")->capture_default_str();
  cmd->add_option("--algo", args->algo, "auto, hd, ring, butterfly, oneshot, hybrid, hierarchical, binomial")->capture_default_str();
  cmd->add_option("--type", args->type, "f32, f64, f16, bf16, i32, i64, u8")->capture_default_str();
  cmd->add_option("--op", args->op, "sum, prod, min, max")->capture_default_str();
  cmd->add_option("-b,--min-bytes", args->min_bytes, "smallest size (4, 1K, 8M...)")->capture_default_str();
  cmd->add_option("-e,--max-bytes", args->max_bytes, "largest size")->capture_default_str();
  cmd->add_option("-f,--step-factor", args->factor, "size multiplier between rows")->capture_default_str();
  cmd->add_option("--iters", args->iters, "timed calls per size (default: by size, 5..200)");
  cmd->add_option("--warmup", args->warmup, "untimed calls per size (default: iters/5, or one batch)");
  cmd->add_option("--batches", args->batches,
                  "split the timed calls into N batches and report the best batch (for a shared host)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--ranks-per-host", args->ranks_per_host, "pretend every K ranks are one host (hybrid, hierarchical)");
  cmd->add_option("--plan", args->plan, "route plan file (weft route): TCP binds the planned source ports");
  cmd->add_option("--segment", args->segment, "pipelining segment of ring algorithms (0 = default)")->capture_default_str();
  cmd->add_option("--hd-piece", args->hd_piece,
                  "allreduce HD: run in consecutive pieces of at most SIZE (0 = the whole vector; default:\n"
                  "the tuning's, docs/collectives.md \"Selection\"); sets every transport's hd_piece_bytes");
  cmd->add_option("--connections", args->conns, "TCP connections per peer and direction")->capture_default_str();
  cmd->add_flag("--once", args->once,
                "one call per size, timed and then verified (for fabrics where a call takes seconds)");
  cmd->add_option("--listen-address", args->listen_address,
                  "tcp: this rank's address peers connect to (default: WEFT_LISTEN_ADDR, WEFT_SOCKET_IFNAME,\n"
                  "127.0.0.1 on one host, else the address towards the store; docs/collectives.md)");
  cmd->add_option("--socket-buffer", args->socket_buffer,
                  "tcp: SO_SNDBUF/SO_RCVBUF per connection (0 = the transport's 4 MiB); it also bounds how far\n"
                  "a rank that finished a step early can send into the next (its peer may still be receiving)")
      ->capture_default_str();
  cmd->add_option("--shm-single-copy", args->shm_single_copy,
                  "shm: messages from this size on are copied once, straight from the sender (process_vm_readv);\n"
                  "smaller ones go through the ring, copied twice (default: the transport's 1M; 0 = always the ring)");
  cmd->add_option("--tcp-splice", args->tcp_splice,
                  "tcp: held sends (HD's and ring's reduce-scatter) from this size on go out from the rank's own\n"
                  "pages by vmsplice+splice, not copied by the sender (default: the transport's 256K; 0 = always copy)");
  cmd->add_option("--congestion-control", args->congestion_control,
                  "tcp: congestion control of the data connections: auto (Reno to ranks on this host, the\n"
                  "host's default elsewhere), \"\" (the host's default: net.ipv4.tcp_congestion_control), or a name")
      ->capture_default_str();
  cmd->add_option("--host", args->host, "this rank's host identity (default: hostname; equal = same memory)");
  cmd->add_option("--timeout", args->timeout_s, "seconds per collective call and for setup")->capture_default_str();
  cmd->callback([&reg, args, cmd] {
    // An option's default or the user's value: --calibrate has defaults of its own.
    const auto given = [cmd](const char* name) { return cmd->get_option(name)->count() > 0; };
    if (!args->calibrate) {
      if (args->collective.empty()) throw CLI::RequiredError("collective (or --calibrate)");
      reg.run = [args] { return run_bench(*args); };
      return;
    }
    if (!args->collective.empty()) throw CLI::ValidationError("collective", "--calibrate measures no collective");
    CalibrateArgs c;
    c.output = args->output;
    c.transports = given("--transport") ? std::vector<std::string>{args->transport} : std::vector<std::string>{"tcp", "shm"};
    auto most = parse_size(args->max_bytes);
    if (!most) throw CLI::ValidationError("--max-bytes", "must be a size");
    if (given("--max-bytes")) c.max_bytes = *most;
    if (given("--batches")) c.batches = args->batches;
    c.timeout_s = args->timeout_s;
    const std::string command = fmt::format("weft bench --calibrate{} -e {} --batches {}{}",
                                            c.transports.size() == 1 ? " --transport " + c.transports[0] : "", c.max_bytes,
                                            c.batches, c.output.empty() ? "" : " -o " + c.output);
    reg.run = [c, command] { return run_calibrate(c, command); };
  });
}

}  // namespace weft::cli
