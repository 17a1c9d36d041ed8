// The loopback TCP limit: two processes stream to each other in both
// directions at once over one connection each way (as weft's TCP transport
// does) for a fixed time; prints the per-direction rate, the ceiling of a
// 2-rank AllReduce's busbw on this host (each rank sends and receives the
// vector once). Same socket options as weft: TCP_NODELAY, 4 MiB buffers,
// and Reno, the congestion control weft's "auto" picks for a peer on this
// host (bench/results/2026-11-24-tcp-loopback.md): under this host's
// default, BBR, the stream ran at 3.4-5.0 GB/s and weft at 2 ranks exceeded
// that "limit" by up to 1.47x; with Reno the same minute gave 4.6-6.0 GB/s
// (2026-11-24).
// The host is shared, so the rate is that of the best 50 ms window of each
// receiver (as the drivers report their best batch, timing.h): a limit
// measured while a neighbour held the CPU would flatter whoever is compared
// with it.
//   tcp_limit [seconds] [chunk_bytes]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int must(int v, const char* what) {
  if (v < 0) {
    std::perror(what);
    std::exit(2);
  }
  return v;
}

void tune(int fd) {
  int one = 1, buf = 4 << 20;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  // tcp(7) TCP_CONGESTION; Reno is built into every kernel.
  static const char kReno[] = "reno";
  must(setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, kReno, sizeof kReno - 1), "setsockopt TCP_CONGESTION reno");
}

int listener(uint16_t* port) {
  int fd = must(socket(AF_INET, SOCK_STREAM, 0), "socket");
  tune(fd);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  must(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), "bind");
  must(listen(fd, 4), "listen");
  socklen_t l = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l);
  *port = ntohs(a.sin_port);
  return fd;
}

int dial(uint16_t port) {
  int fd = must(socket(AF_INET, SOCK_STREAM, 0), "socket");
  tune(fd);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  must(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), "connect");
  return fd;
}

// Sends on `out` and receives on `in` until `seconds` passed; returns the
// bytes per second received in the best window of kWindow.
constexpr double kWindow = 0.05;

double stream(int out, int in, double seconds, size_t chunk) {
  std::vector<char> sbuf(chunk, 'x'), rbuf(chunk);
  size_t got = 0, window_got = 0;
  double best = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto window_t0 = t0;
  bool sending = true;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const double el = std::chrono::duration<double>(now - t0).count();
    const double wel = std::chrono::duration<double>(now - window_t0).count();
    if (wel >= kWindow) {
      best = std::max(best, static_cast<double>(got - window_got) / wel);
      window_got = got;
      window_t0 = now;
    }
    if (sending && el > seconds) {
      shutdown(out, SHUT_WR);
      sending = false;
    }
    pollfd p[2] = {{in, POLLIN, 0}, {out, static_cast<short>(sending ? POLLOUT : 0), 0}};
    poll(p, 2, 100);
    if (p[1].revents & POLLOUT) send(out, sbuf.data(), chunk, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (p[0].revents & (POLLIN | POLLHUP)) {
      ssize_t n = recv(in, rbuf.data(), chunk, MSG_DONTWAIT);
      if (n == 0) {
        if (sending) shutdown(out, SHUT_WR);  // the peer stopped first: stop too
        return best > 0 ? best : static_cast<double>(got) / el;
      }
      if (n > 0) got += static_cast<size_t>(n);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  const size_t chunk = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (1 << 20);
  uint16_t pa = 0, pb = 0;
  int la = listener(&pa), lb = listener(&pb);
  int pipefd[2];
  must(pipe(pipefd), "pipe");
  pid_t kid = must(fork(), "fork");
  if (kid == 0) {
    // Child: connects to A (its outgoing stream), accepts from B.
    int out = dial(pa);
    int in = must(accept(lb, nullptr, nullptr), "accept");
    double r = stream(out, in, seconds, chunk);
    (void)!write(pipefd[1], &r, sizeof r);
    _exit(0);
  }
  int out = dial(pb);
  int in = must(accept(la, nullptr, nullptr), "accept");
  double mine = stream(out, in, seconds, chunk);
  double theirs = 0;
  (void)!read(pipefd[0], &theirs, sizeof theirs);
  waitpid(kid, nullptr, 0);
  std::printf("loopback TCP, bidirectional, per direction: %.3f GB/s (%.3f and %.3f)\n", (mine + theirs) / 2e9,
              mine / 1e9, theirs / 1e9);
  return 0;
}
