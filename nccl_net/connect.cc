// listen / connect / accept: the TCP rendezvous that swaps the QPs'
// endpoint records, never blocking (NCCL polls connect and accept until
// they return a comm).
//
//   connector                               listener
//   TCP connect to the handle's address     accept
//   hello: its NIC address, the handle's    reads it; creates as many QPs,
//     serial, one record per QP       --->  RTR/RTS, receives posted
//                                     <---  reply: one record per QP
//   RTR/RTS, credit receives posted
//   one byte "R"                      --->  reads it: the comm is ready
//
// The listener's QPs reach RTR before it replies and the connector's
// before it sends "R", so neither side's first packet meets a QP that cannot
// take it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "weft/nccl_net/comm.h"
#include "weft/nccl_net/in_progress.h"
#include "weft/nccl_net/ports.h"
#include "weft/nccl_net/wire.h"

namespace weft::nccl_net {
namespace {

Status errno_status(const std::string& what) { return io_error(what, errno); }

// Writes what is left of `out`; true when all of it has gone.
Result<bool> flush(int fd, const std::vector<std::uint8_t>& out, std::size_t& off) {
  while (off < out.size()) {
    ssize_t n = ::send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      if (errno == EINTR) continue;
      return errno_status("send to peer");
    }
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// Reads until `in` holds `want` bytes; true when it does.
Result<bool> fill(int fd, std::vector<std::uint8_t>& in, std::size_t want) {
  while (in.size() < want) {
    std::uint8_t buf[4096];
    std::size_t ask = std::min(sizeof(buf), want - in.size());
    ssize_t n = ::recv(fd, buf, ask, 0);
    if (n == 0) return unavailable("peer closed the connection during setup");
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      if (errno == EINTR) continue;
      return errno_status("recv from peer");
    }
    in.insert(in.end(), buf, buf + n);
  }
  return true;
}

verbs::EndpointWire local_record(const NetDevice& d, const verbs::RcQp& qp, std::uint32_t recv_depth) {
  verbs::EndpointInfo e;
  e.qpn = qp.qpn();
  e.psn = qp.psn();
  e.gid = d.dev->gid().gid;
  e.mtu_bytes = d.dev->port().active_mtu_bytes;
  e.recv_depth = recv_depth;
  e.max_msg_bytes = d.dev->port().max_msg_bytes;
  return verbs::encode(e);
}

// A comm with `nqps` QPs in INIT; on the sending side each QP gets the port
// the plan gives (local -> remote, conn, q), and misses and unapplicable
// entries are logged and counted here, once per QP.
Result<std::unique_ptr<Comm>> make_comm(NetDevice* d, bool is_send, int nqps, std::uint32_t remote_addr,
                                        std::uint32_t conn, int traffic_class) {
  Net& net = Net::get();
  auto c = std::make_unique<Comm>();
  c->dev = d;
  c->is_send = is_send;
  verbs::RcQpConfig qc;
  qc.max_send_wr = is_send ? 2 * kSlots + 8 : kSlots + 8;
  qc.max_recv_wr = is_send ? kSenderCreditBufs : kRecvDepth;
  if (traffic_class >= 0 && traffic_class <= 255) qc.traffic_class = static_cast<std::uint8_t>(traffic_class);
  int depth = nqps * static_cast<int>(qc.max_send_wr + qc.max_recv_wr) + 16;
  c->cq = verbs::CqHandle(ibv_create_cq(d->dev->context(), depth, nullptr, nullptr, 0));
  if (!c->cq) return errno_status(fmt::format("ibv_create_cq({})", depth));
  const std::string local = ipv4_string(d->ipv4), remote = ipv4_string(remote_addr);
  for (int q = 0; q < nqps; ++q) {
    // Only the connecting side's QPs carry data (RDMA writes); the
    // listener's send credits and ACKs, and keep flow label 0.
    PortChoice pc = is_send ? choose_port(net.plan(), local, remote, static_cast<int>(conn), q) : PortChoice{};
    verbs::RcQpConfig cfg = qc;
    switch (pc.kind) {
      case PortChoice::kPlanned: cfg.planned_sport = pc.sport; break;  // counted once set (count_port)
      case PortChoice::kNotInPlan:
        net.counters().unplanned++;
        net.alert("not in plan",
                  pc.why + "; this QP gets flow label 0 (the kernel hashes its QP numbers into the port)");
        break;
      case PortChoice::kUnapplicable:
        net.counters().unapplicable++;
        net.alert("unapplicable", pc.why + "; this QP gets flow label 0 instead");
        break;
      case PortChoice::kNoPlan: break;
    }
    WEFT_ASSIGN_OR_RETURN(verbs::RcQp qp, verbs::RcQp::create(*d->dev, c->cq.get(), c->cq.get(), cfg));
    c->qps.push_back(std::move(qp));
    c->ports.push_back(std::move(pc));
  }
  return c;
}

// A planned QP, connected, is counted: planned when its port is set, and
// unapplicable (one line, as for an entry the flow label cannot express)
// when the device refused to set it directly (mlx5dv_modify_qp_udp_sport(3):
// rc_qp.h sport_status). The plan asked for a port, not for this
// connection to fail: the QP goes on with its flow label.
void count_port(const PortChoice& pc, const verbs::RcQp& qp) {
  if (pc.kind != PortChoice::kPlanned) return;
  Net& net = Net::get();
  if (qp.sport_status().is_ok()) {
    net.counters().planned++;
    return;
  }
  net.counters().unapplicable++;
  net.alert("port refused", fmt::format("{}: {}; this QP goes on with flow label {:#x} and the port the device makes "
                                        "of it",
                                        pc.flow, qp.sport_status().message(), qp.flow_label()));
}

Status connect_qps(Comm& c, const Hello& peer) {
  if (peer.qps.size() != c.qps.size()) {
    return data_loss(fmt::format("peer answered with {} QP records for {} QPs", peer.qps.size(), c.qps.size()));
  }
  for (std::size_t q = 0; q < c.qps.size(); ++q) {
    WEFT_ASSIGN_OR_RETURN(verbs::EndpointInfo remote, verbs::decode(peer.qps[q]));
    WEFT_RETURN_IF_ERROR(c.qps[q].connect(remote).with_context(fmt::format("QP {}", q)));
    if (q < c.ports.size()) count_port(c.ports[q], c.qps[q]);
  }
  return arm(c);
}

Hello hello_of(const Comm& c, std::uint32_t serial, int traffic_class) {
  Hello h;
  h.nic_ipv4 = c.dev->ipv4;
  h.serial = serial;
  h.traffic_class = traffic_class;
  std::uint32_t depth = c.is_send ? kSenderCreditBufs : kRecvDepth;
  for (const auto& qp : c.qps) h.qps.push_back(local_record(*c.dev, qp, depth));
  return h;
}

}  // namespace

struct Connecting {
  Held held;
  NetDevice* dev = nullptr;
  ListenHandle handle;
  int traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;
  int fd = -1;
  enum { kTcp, kHello, kReply, kReady } stage = kTcp;
  std::unique_ptr<Comm> comm;
  std::vector<std::uint8_t> out, in;
  std::size_t out_off = 0;
  ~Connecting() {
    if (fd >= 0) ::close(fd);
  }

  // One step as far as it goes without blocking; the comm when ready.
  Result<std::unique_ptr<Comm>> advance() {
    if (stage == kTcp) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 0) < 0) return errno_status("poll");
      if (p.revents == 0) return std::unique_ptr<Comm>();
      int err = 0;
      socklen_t len = sizeof(err);
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno_status("getsockopt(SO_ERROR)");
      if (err != 0) {
        return io_error(fmt::format("TCP connect to {}:{}", ipv4_string(handle.nic_ipv4), handle.tcp_port), err);
      }
      WEFT_ASSIGN_OR_RETURN(comm, make_comm(dev, true, Net::get().settings().qps, handle.nic_ipv4, handle.serial,
                                            traffic_class));
      out = encode_hello(hello_of(*comm, handle.serial, traffic_class));
      stage = kHello;
    }
    if (stage == kHello) {
      WEFT_ASSIGN_OR_RETURN(bool sent, flush(fd, out, out_off));
      if (!sent) return std::unique_ptr<Comm>();
      stage = kReply;
    }
    if (stage == kReply) {
      std::size_t want = kHelloHeaderBytes + comm->qps.size() * sizeof(verbs::EndpointWire);
      WEFT_ASSIGN_OR_RETURN(bool got, fill(fd, in, want));
      if (!got) return std::unique_ptr<Comm>();
      WEFT_ASSIGN_OR_RETURN(Hello reply, decode_hello(in.data(), in.size()));
      WEFT_RETURN_IF_ERROR(connect_qps(*comm, reply));
      out = {'R'};
      out_off = 0;
      stage = kReady;
    }
    WEFT_ASSIGN_OR_RETURN(bool sent, flush(fd, out, out_off));
    if (!sent) return std::unique_ptr<Comm>();
    comm->fd = std::exchange(fd, -1);
    return std::move(comm);
  }
};

// The connects NCCL is polling (in_progress.h). Made by the first connect,
// which follows init: it is deleted before the Net (net.cc Net::get), so
// parked QPs close while their device is still open; neither is deleted
// while NCCL holds anything of the plugin's (net.h Lasting).
InProgress<Connecting>& connects() {
  static Lasting<InProgress<Connecting>> c;
  return c.get();
}

// NCCL polls a connect it waits for without pause; one not polled for this
// long has been given up (in_progress.h).
constexpr auto kAbandonedAfter = std::chrono::minutes(5);

// A connection accepted but not yet through its handshake: dropped after
// kHandshakeLimit, or (oldest first) when kMaxPending are waiting. Not on
// time once this side has replied: the connector holds a working comm as
// soon as it reads the reply (it sends the ready byte and returns, unseen
// by this side), however late its proxy polls; dropping then would leave
// it sending into QPs that are gone while accept() waits forever. A peer
// that dies instead closes the socket, which drops it at once.
constexpr auto kHandshakeLimit = std::chrono::seconds(30);
constexpr std::size_t kMaxPending = 64;

struct ListenComm::Accepting {
  int fd = -1;
  std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
  enum { kHello, kReply, kReady } stage = kHello;
  std::unique_ptr<Comm> comm;
  std::vector<std::uint8_t> out, in;
  std::size_t out_off = 0;
  bool local_fault = false;  // the failure is this side's (QPs), not the connection's bytes
  ~Accepting() {
    if (fd >= 0) ::close(fd);
  }

  Result<std::unique_ptr<Comm>> advance(ListenComm& l) {
    if (stage == kHello) {
      WEFT_ASSIGN_OR_RETURN(bool got, fill(fd, in, kHelloHeaderBytes));
      if (!got) return std::unique_ptr<Comm>();
      WEFT_ASSIGN_OR_RETURN(int nqps, hello_qp_count(in.data()));
      WEFT_ASSIGN_OR_RETURN(got, fill(fd, in, kHelloHeaderBytes + static_cast<std::size_t>(nqps) * 64));
      if (!got) return std::unique_ptr<Comm>();
      WEFT_ASSIGN_OR_RETURN(Hello hello, decode_hello(in.data(), in.size()));
      if (hello.serial != l.serial) {
        return data_loss(fmt::format("peer {} connects to connection {}, this listener is {}",
                                     ipv4_string(hello.nic_ipv4), hello.serial, l.serial));
      }
      auto made = make_comm(l.dev, false, nqps, hello.nic_ipv4, l.serial, hello.traffic_class);
      if (!made) {
        local_fault = true;
        return made.status();
      }
      comm = std::move(*made);
      // QP records that do not decode are the sender's (a stranger's, or a
      // corrupted hello): the connection is dropped, the listener goes on.
      // Connecting decoded ones is this side's work (modify_qp, and arm()'s
      // registration, which a memlock limit fails): an error for NCCL.
      for (std::size_t q = 0; q < hello.qps.size(); ++q) {
        WEFT_RETURN_IF_ERROR(verbs::decode(hello.qps[q]).status().with_context(fmt::format("peer's QP records: QP {}", q)));
      }
      if (Status st = connect_qps(*comm, hello); !st) {
        local_fault = true;
        return st;
      }
      out = encode_hello(hello_of(*comm, l.serial, hello.traffic_class));
      stage = kReply;
    }
    if (stage == kReply) {
      WEFT_ASSIGN_OR_RETURN(bool sent, flush(fd, out, out_off));
      if (!sent) return std::unique_ptr<Comm>();
      in.clear();
      stage = kReady;
    }
    WEFT_ASSIGN_OR_RETURN(bool got, fill(fd, in, 1));
    if (!got) return std::unique_ptr<Comm>();
    if (in[0] != 'R') return data_loss(fmt::format("peer sent {:#04x} where the ready byte belongs", in[0]));
    comm->fd = std::exchange(fd, -1);
    return std::move(comm);
  }
};

ListenComm::~ListenComm() {
  for (Accepting* a : pending) delete a;
  if (fd >= 0) ::close(fd);
}

ncclResult_t do_listen(int dev, void* handle, void** listen_comm) {
  Net& net = Net::get();
  if (handle == nullptr || listen_comm == nullptr) return net.fail("listen", invalid_argument("NULL handle or comm"));
  *listen_comm = nullptr;
  NetDevice* d = net.device(dev);
  if (d == nullptr) return ncclInvalidArgument;
  auto l = std::make_unique<ListenComm>();
  l->dev = d;
  l->dev_index = dev;
  l->fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (l->fd < 0) return net.fail("listen", errno_status("socket"));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(d->ipv4);
  socklen_t len = sizeof(a);
  if (::bind(l->fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(l->fd, 64) != 0 ||
      ::getsockname(l->fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return net.fail("listen", errno_status(fmt::format("TCP listen on {}", ipv4_string(d->ipv4))));
  }
  l->serial = net.next_serial(dev);
  ListenHandle h{d->ipv4, ntohs(a.sin_port), l->serial};
  auto bytes = encode_handle(h);
  std::memcpy(handle, bytes.data(), bytes.size());
  *listen_comm = l.release();
  return ncclSuccess;
}

ncclResult_t do_connect(int dev, int traffic_class, const void* owner, void* handle, void** send_comm) {
  Net& net = Net::get();
  if (handle == nullptr || send_comm == nullptr) return net.fail("connect", invalid_argument("NULL handle or comm"));
  *send_comm = nullptr;
  const auto now = std::chrono::steady_clock::now();
  if (std::size_t n = connects().reap_idle(now, kAbandonedAfter); n > 0) {
    net.info(fmt::format("connect: freed {} connect(s) not polled for {} min (their communicator gave up)", n,
                         std::chrono::duration_cast<std::chrono::minutes>(kAbandonedAfter).count()));
  }
  auto* state_slot = static_cast<std::uint8_t*>(handle) + kHandleStateOffset;
  std::uint64_t id = 0;
  std::memcpy(&id, state_slot, sizeof(id));
  std::unique_ptr<Connecting> c;
  if (id != 0) {
    c = connects().resume(id);
    if (c == nullptr && connects().issued(id)) {
      return net.fail("connect", failed_precondition(fmt::format(
                                     "connect {} was given up: its NCCL context was finalized, or NCCL did not poll it "
                                     "for {} min; start a new connect from the listener's handle",
                                     id, std::chrono::duration_cast<std::chrono::minutes>(kAbandonedAfter).count())));
    }
    if (c == nullptr) {
      return net.fail("connect", invalid_argument(fmt::format("connection handle bytes {}..{} hold {:#x}, which no "
                                                              "connect of this process left there (not a handle from "
                                                              "listen?)",
                                                              kHandleStateOffset, kHandleBytes - 1, id)));
    }
  } else {
    NetDevice* d = net.device(dev);
    if (d == nullptr) return ncclInvalidArgument;
    auto h = decode_handle(static_cast<const std::uint8_t*>(handle));
    if (!h) return net.fail("connect", h.status());
    c = std::make_unique<Connecting>();
    c->dev = d;
    c->handle = *h;
    c->traffic_class = traffic_class;
    c->fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) return net.fail("connect", errno_status("socket"));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(h->nic_ipv4);
    a.sin_port = htons(h->tcp_port);
    if (::connect(c->fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS) {
      return net.fail("connect", errno_status(fmt::format("TCP connect to {}:{}", ipv4_string(h->nic_ipv4), h->tcp_port)));
    }
  }
  auto r = c->advance();
  if (r && !*r) {
    // Not yet: NCCL calls again with this handle.
    id = connects().park(id, std::move(c), owner, now);
    std::memcpy(state_slot, &id, sizeof(id));
    return ncclSuccess;
  }
  id = 0;
  std::memcpy(state_slot, &id, sizeof(id));
  if (!r) return net.fail("connect", r.status());
  *send_comm = r->release();
  return ncclSuccess;
}

void drop_connects(const void* owner) { connects().drop_owner(owner); }

// Takes every connection waiting on the listen socket, then advances each
// handshake in turn. A connection that is not a peer's handshake (a port
// scanner, a health check, a connector that died or stalled mid-handshake)
// is dropped with one line, as NCCL's own sockets do ("discarding peer
// connection", src/misc/socket.cc); only a failure of this side's QPs is an
// error. The first finished handshake is returned; others wait for the next
// call.
ncclResult_t do_accept(void* listen_comm, void** recv_comm) {
  Net& net = Net::get();
  if (listen_comm == nullptr || recv_comm == nullptr) return net.fail("accept", invalid_argument("NULL comm"));
  *recv_comm = nullptr;
  auto* l = static_cast<ListenComm*>(listen_comm);
  auto drop = [&](std::size_t i, const std::string& why) {
    net.warn(fmt::format("accept: dropped a connection that is not a peer's handshake: {}", why));
    delete l->pending[i];
    l->pending.erase(l->pending.begin() + static_cast<std::ptrdiff_t>(i));
  };
  for (;;) {
    int fd = ::accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == ECONNABORTED || errno == EINTR) continue;  // that one is gone; take the next
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return net.fail("accept", errno_status("accept"));
    }
    if (l->pending.size() >= kMaxPending) drop(0, fmt::format("{} handshakes were waiting", kMaxPending));
    l->pending.push_back(new ListenComm::Accepting());
    l->pending.back()->fd = fd;
  }
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < l->pending.size();) {
    ListenComm::Accepting* a = l->pending[i];
    auto r = a->advance(*l);
    if (r && *r) {
      delete a;
      l->pending.erase(l->pending.begin() + static_cast<std::ptrdiff_t>(i));
      *recv_comm = r->release();
      return ncclSuccess;
    }
    if (!r && a->local_fault) {
      Status st = r.status();
      delete a;
      l->pending.erase(l->pending.begin() + static_cast<std::ptrdiff_t>(i));
      return net.fail("accept", st);
    }
    if (!r) {
      drop(i, r.status().message());
    } else if (a->stage != ListenComm::Accepting::kReady && now - a->since > kHandshakeLimit) {
      drop(i, fmt::format("no handshake within {} s", kHandshakeLimit.count()));
    } else {
      ++i;
    }
  }
  return ncclSuccess;
}

ncclResult_t do_close_listen(void* listen_comm) {
  delete static_cast<ListenComm*>(listen_comm);
  return ncclSuccess;
}

}  // namespace weft::nccl_net
