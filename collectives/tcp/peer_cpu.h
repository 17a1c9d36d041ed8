// Where a same-host peer rank runs (internal): the TCP transport's waits use
// it to tell a peer that shares this rank's CPU from one that is merely
// slow, and to move off a shared CPU (internal::leave_cpu; tcp_transport.cc,
// TcpTransport::yield_to).
//
// Why: two ranks on one CPU take turns; each exchange then costs the turns
// of both (a 2-rank AllReduce over loopback TCP pinned to one CPU on this
// 2-CPU VM: 25 us per 4 KiB call instead of 8, 290 us per 1 MiB instead of
// 140), and the load balancer leaves them together for whole runs: it does
// not move a task that ran within sched_migration_cost (kernel/sched/fair.c,
// task_hot), and both ranks always just ran. The shared-memory transport
// sees its peer's CPU in shared memory; over TCP the id of the peer's
// thread that connected (the one that runs its calls, as a rule) comes in
// the connection's hello and its CPU from procfs (a thread id names the
// thread's /proc/<tid> entry too, and ranks that are threads of one process
// are told apart).
#pragma once

#include "tcp/socket.h"

namespace weft::coll::tcp {

class PeerCpu {
 public:
  PeerCpu() = default;
  // /proc/<tid>/stat of the peer's thread, kept open; tid <= 0 (not on
  // this host, or a peer that did not say) gives an empty PeerCpu. An id of
  // another PID namespace names some other thread: its CPU is then a wrong
  // hint, which costs at most a needless migration.
  explicit PeerCpu(int tid);
  bool known() const { return static_cast<bool>(stat_); }
  // The CPU the peer last ran on (proc(5), /proc/[pid]/stat field 39
  // "processor"), -1 when unknown or unreadable (the peer exited).
  int cpu() const;

 private:
  Fd stat_;
};

}  // namespace weft::coll::tcp
