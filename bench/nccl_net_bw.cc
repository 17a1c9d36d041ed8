// nccl_net_bw: the NCCL net plugin's streaming bandwidth, driven through its
// exported ncclNetPlugin_vN table as NCCL's proxy drives a net plugin
// (weft/nccl_net/driver.h): a receiving process on one device, a sending
// process on another, `--depth` messages of `--size` bytes in flight, each
// in its own slot of one registered buffer per side (NCCL_STEPS slots of a
// channel's buffer, src/include/device.h), the receiver reposting a slot's
// irecv as soon as test() reports it done, the sender re-sending from a
// slot as soon as its previous isend is done. A pass that moved nothing
// calls sched_yield(), as NCCL's proxy thread does ("No request progressed.
// Let others run.", ncclProxyProgress in src/proxy.cc): on a soft-RoCE
// device the kernel's packet processing needs the same CPUs.
//
// Verified output: every message's first and last 8 bytes carry its index
// (the sender stamps them; a message that did not land leaves an older
// index), every test() reports the full size, and at the end every byte of
// every receive slot must equal what the sender's slot held for the last
// message it carried. The throughput counts the `--messages` messages after
// `--warmup` untimed ones, from the receiver's completion of the last warmup
// message to its completion of the last one.
//
// Prints one line: version, size, depth, QPs, messages, seconds, Gb/s
// (10^9 bit/s, as ib_write_bw --report_gbits), bytes checked. Exit 1 when a
// check failed, 2 on a usage error. bench/nccl_net_vs_ib_write_bw.sh runs it
// against ib_write_bw inside the soft-RoCE VM.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <optional>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "weft/nccl_net/driver.h"

namespace {

using Clock = std::chrono::steady_clock;
using weft::nccl_net::Driver;

struct Options {
  int version = 11;
  std::string send_dev = "rxe1", recv_dev = "rxe2";
  std::size_t size = 1 << 20;
  int depth = 8, qps = 1;
  long messages = 1000, warmup = 32;
  int timeout_s = 600;
};

// The sender's slot bytes (each 8-byte word a splitmix64 step of slot and
// word index), so a byte written into the wrong slot or offset shows.
std::uint64_t word_of(int slot, std::size_t word) {
  std::uint64_t z = (static_cast<std::uint64_t>(slot) << 40) + word + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
void fill_slot(std::uint8_t* p, std::size_t size, int slot) {
  for (std::size_t w = 0; w * 8 < size; ++w) {
    std::uint64_t v = word_of(slot, w);
    std::memcpy(p + w * 8, &v, std::min<std::size_t>(8, size - w * 8));
  }
}
// Message i carries i in its first and last 8 bytes (sizes >= 16).
void stamp(std::uint8_t* p, std::size_t size, std::uint64_t i) {
  std::memcpy(p, &i, 8);
  std::memcpy(p + size - 8, &i, 8);
}

#define BW_CHECK(cond, ...)                                              \
  do {                                                                   \
    if (!(cond)) return fmt::format("{}: ", who) + fmt::format(__VA_ARGS__); \
  } while (0)
#define BW_CALL(call) BW_CHECK((call) == ncclSuccess, "{} failed", #call)

// Loads and initialises the plugin on one device, as the process's NCCL would.
std::string open_plugin(const Options& o, const std::string& dev, const char* who, std::optional<Driver>* out) {
  setenv("WEFT_NCCL_DEVICES", dev.c_str(), 1);
  setenv("WEFT_NCCL_QPS", std::to_string(o.qps).c_str(), 1);
  auto d = Driver::load(o.version);
  BW_CHECK(d, "{}", d.status().message());
  out->emplace(std::move(*d));
  BW_CALL((*out)->init(nullptr));
  return "";
}

std::string run_sender(const Options& o, int handle_fd) {
  const char* who = "sender";
  std::optional<Driver> d;
  if (std::string e = open_plugin(o, o.send_dev, who, &d); !e.empty()) return e;
  std::uint8_t handle[NCCL_NET_HANDLE_MAXSIZE];
  BW_CHECK(read(handle_fd, handle, sizeof(handle)) == sizeof(handle), "no handle from the receiver");
  const auto deadline = Clock::now() + std::chrono::seconds(o.timeout_s);
  void* sc = nullptr;
  while (sc == nullptr) {
    BW_CALL(d->connect(0, handle, &sc));
    BW_CHECK(Clock::now() < deadline, "connect never completed");
  }
  std::vector<std::uint8_t> buf(o.size * o.depth);
  for (int s = 0; s < o.depth; ++s) fill_slot(buf.data() + s * o.size, o.size, s);
  void* mh = nullptr;
  BW_CALL(d->reg_mr(sc, buf.data(), buf.size(), NCCL_PTR_HOST, &mh));
  const long total = o.warmup + o.messages;
  std::vector<void*> req(o.depth, nullptr);
  long next = 0, done = 0;  // next message to send; messages whose send completed (in order)
  while (done < total) {
    BW_CHECK(Clock::now() < deadline, "timed out with {} of {} sends done", done, total);
    bool moved = false;
    if (next < total && next - done < o.depth) {
      const int s = static_cast<int>(next % o.depth);
      std::uint8_t* p = buf.data() + s * o.size;
      stamp(p, o.size, static_cast<std::uint64_t>(next));
      BW_CALL(d->isend(sc, p, o.size, s, mh, &req[s]));
      if (req[s] != nullptr) ++next, moved = true;  // NULL: no credit yet, retry
    }
    if (done < next) {
      const int s = static_cast<int>(done % o.depth);
      int fin = 0;
      BW_CALL(d->test(req[s], &fin, nullptr));
      if (fin) req[s] = nullptr, ++done, moved = true;
    }
    if (!moved) sched_yield();
  }
  BW_CALL(d->dereg_mr(sc, mh));
  BW_CALL(d->close_send(sc));
  BW_CALL(d->finalize());
  return "";
}

struct Measured {
  double seconds = 0;
  std::uint64_t checked = 0;
};

std::string run_receiver(const Options& o, int handle_fd, Measured* m) {
  const char* who = "receiver";
  std::optional<Driver> d;
  if (std::string e = open_plugin(o, o.recv_dev, who, &d); !e.empty()) return e;
  std::uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* lc = nullptr;
  BW_CALL(d->listen(0, handle, &lc));
  BW_CHECK(write(handle_fd, handle, sizeof(handle)) == sizeof(handle), "cannot pass the handle");
  const auto deadline = Clock::now() + std::chrono::seconds(o.timeout_s);
  void* rc = nullptr;
  while (rc == nullptr) {
    BW_CALL(d->accept(lc, &rc));
    BW_CHECK(Clock::now() < deadline, "accept never completed");
  }
  std::vector<std::uint8_t> buf(o.size * o.depth, 0);
  void* mh = nullptr;
  BW_CALL(d->reg_mr(rc, buf.data(), buf.size(), NCCL_PTR_HOST, &mh));
  const long total = o.warmup + o.messages;
  std::vector<void*> req(o.depth, nullptr);
  long posted = 0, done = 0;
  Clock::time_point t0 = Clock::now();
  while (done < total) {
    BW_CHECK(Clock::now() < deadline, "timed out with {} of {} receives done", done, total);
    bool moved = false;
    if (posted < total && posted - done < o.depth) {
      int s = static_cast<int>(posted % o.depth);
      void* data = buf.data() + s * o.size;
      std::size_t size = o.size;
      BW_CALL(d->irecv(rc, 1, &data, &size, &s, &mh, &req[s]));
      if (req[s] != nullptr) ++posted, moved = true;
    }
    if (done < posted) {
      const int s = static_cast<int>(done % o.depth);
      int fin = 0, got = 0;
      BW_CALL(d->test(req[s], &fin, &got));
      if (!fin) {
        if (!moved) sched_yield();
        continue;
      }
      BW_CHECK(got == static_cast<int>(o.size), "message {}: test reported {} bytes of {}", done, got, o.size);
      const std::uint8_t* p = buf.data() + s * o.size;
      std::uint64_t head = 0, tail = 0;
      std::memcpy(&head, p, 8);
      std::memcpy(&tail, p + o.size - 8, 8);
      BW_CHECK(head == static_cast<std::uint64_t>(done) && tail == head, "message {} carries stamps {} and {}", done,
               head, tail);
      req[s] = nullptr;
      if (++done == o.warmup) t0 = Clock::now();
    }
  }
  m->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  // Every byte of every slot: the slot's pattern, stamped with the last message it held.
  std::vector<std::uint8_t> want(o.size);
  for (int s = 0; s < o.depth && s < total; ++s) {
    const long last = total - 1 - ((total - 1 - s) % o.depth);
    fill_slot(want.data(), o.size, s);
    stamp(want.data(), o.size, static_cast<std::uint64_t>(last));
    BW_CHECK(std::memcmp(want.data(), buf.data() + s * o.size, o.size) == 0, "slot {} (message {}) differs", s, last);
    m->checked += o.size;
  }
  BW_CALL(d->dereg_mr(rc, mh));
  BW_CALL(d->close_recv(rc));
  BW_CALL(d->close_listen(lc));
  BW_CALL(d->finalize());
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"NCCL net plugin streaming bandwidth (one sender, one receiver), every byte checked at the end"};
  app.add_option("--version", o.version, "ncclNetPlugin_vN table to drive")->check(CLI::Range(8, 11));
  app.add_option("--send-dev", o.send_dev, "sender's device (WEFT_NCCL_DEVICES)");
  app.add_option("--recv-dev", o.recv_dev, "receiver's device");
  app.add_option("--size", o.size, "message bytes")->check(CLI::Range(std::size_t{16}, std::size_t{1} << 30));
  app.add_option("--depth", o.depth, "messages in flight (slots)")->check(CLI::Range(1, 32));
  app.add_option("--qps", o.qps, "QPs per connection (WEFT_NCCL_QPS)")->check(CLI::Range(1, 16));
  app.add_option("--messages", o.messages, "timed messages")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "untimed messages first")->check(CLI::NonNegativeNumber);
  app.add_option("--timeout", o.timeout_s, "seconds before giving up")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (o.warmup < 1) o.warmup = 1;  // the clock starts at a completion

  int fds[2];
  if (pipe(fds) != 0) return std::perror("pipe"), 1;
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return std::perror("fork"), 1;
  if (pid == 0) {
    close(fds[1]);
    std::string err = run_sender(o, fds[0]);
    if (!err.empty()) std::fprintf(stderr, "nccl_net_bw: %s\n", err.c_str());
    std::fflush(nullptr);
    _exit(err.empty() ? 0 : 1);
  }
  close(fds[0]);
  Measured m;
  std::string err = run_receiver(o, fds[1], &m);
  close(fds[1]);
  if (!err.empty()) kill(pid, SIGKILL);  // the sender may wait for a peer that is gone
  int status = 0;
  waitpid(pid, &status, 0);
  if (!err.empty()) return std::fprintf(stderr, "nccl_net_bw: %s\n", err.c_str()), 1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::fprintf(stderr, "nccl_net_bw: sender failed\n"), 1;
  const double gbps = static_cast<double>(o.size) * static_cast<double>(o.messages) * 8 / m.seconds / 1e9;
  std::printf("nccl_net_bw v%d size %zu depth %d qps %d messages %ld seconds %.3f gbps %.3f checked %llu\n", o.version,
              o.size, o.depth, o.qps, o.messages, m.seconds, gbps, static_cast<unsigned long long>(m.checked));
  return 0;
}
