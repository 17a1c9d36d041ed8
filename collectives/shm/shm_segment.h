// The shared-memory transport's segment layout (internal): what every rank
// maps of every other, the doorbell, and the ring frames. Shared between
// processes: only lock-free atomics and plain data, fixed layout.
#pragma once

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "weft/common/status.h"

namespace weft::coll::shm {

constexpr uint64_t kMagic = 0x344d485354464557;  // "WEFTSHM4": + single-copy probe (probe_addr, RingCtl::single_copy)

// The head of a rank's segment. Shared between processes: only lock-free
// atomics and plain data, fixed layout.
struct alignas(64) SegmentHeader {
  uint64_t magic;
  int32_t rank, size, pid;
  int32_t sleep_fence;  // 1: this rank calls membarrier() before it sleeps (ring_bell)
  uint64_t ring_bytes;
  // Where `magic` lies in this rank's own address space: a peer reads it
  // with process_vm_readv to learn whether it may copy from this rank's
  // memory (shm_single_copy.h).
  uint64_t probe_addr;
  alignas(64) std::atomic<uint32_t> bell;      // futex word: bumped by whoever has news for this rank
  std::atomic<uint32_t> sleepers;              // > 0 while this rank may sleep on bell
  // Flags set by other ranks: kAbortFlag once one told this rank to give up
  // (abort_rank, abort_msg say who and why), kStallFlag once one posted a
  // stall notice here (RingCtl::stall). One word, so that a wait checks
  // both with one load.
  alignas(64) std::atomic<uint32_t> aborted;
  int32_t abort_rank;
  char abort_msg[248];
  alignas(64) std::atomic<uint32_t> closed;    // this rank left cleanly
  // The CPU this rank last polled on (-1: not yet): a rank waiting for it
  // polls hard only while they run on different CPUs (idle_wait.h).
  alignas(64) std::atomic<int32_t> cpu;
  // 1 while this rank is in sched_yield() or asleep on its bell: where the
  // host's ranks outnumber its CPUs, a rank waiting for it yields at once
  // instead of polling (ShmTransport::wait). 0 in a segment of an older build.
  std::atomic<int32_t> off_cpu;
};
constexpr uint32_t kAbortFlag = 1, kStallFlag = 2;
constexpr int32_t kSingleCopyAllowed = 1, kSingleCopyRefused = 2;

// The control words of the ring from one sender, each on its own line: the
// first two written only by the receiver, `stall` only by the sender. There
// is no head word: a frame carries its own sequence number (shm_ring.h).
struct RingCtl {
  alignas(64) std::atomic<uint64_t> tail;
  // The receiver's verdict at setup, before its "mapped" key is in the
  // store: kSingleCopyAllowed if it can read the sender's memory
  // (process_vm_readv), else kSingleCopyRefused; the sender then sends
  // every message through the ring.
  std::atomic<int32_t> single_copy;
  alignas(64) std::atomic<uint64_t> acks;  // single-copy messages read so far
  // The sender's stall notice (transport.h): whom it waits on + 2; 0 = none
  // (the segment starts zeroed), 1 = no one known.
  alignas(64) std::atomic<int32_t> stall;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free,
              "shared-memory words must be lock-free atomics (no hidden locks across processes)");
static_assert(sizeof(SegmentHeader) % 64 == 0 && sizeof(RingCtl) == 192,
              "segment layout must be the same in every process");

inline int futex(std::atomic<uint32_t>* w, int op, uint32_t val, const timespec* ts) {
  return static_cast<int>(::syscall(SYS_futex, reinterpret_cast<uint32_t*>(w), op, val, ts, nullptr, 0));
}

class Segment {
 public:
  Segment() = default;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment() {
    if (base_) ::munmap(base_, bytes_);
  }
  Status map(int fd, size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return io_error("mmap shared segment", errno);
    base_ = static_cast<char*>(p);
    bytes_ = bytes;
    return ok_status();
  }
  // Faults in [off, off + len) now, writable. A page touched first in the
  // middle of a collective costs a page fault, and on this VM (memory the
  // guest returned to the host comes back through a host fault) a first
  // touch measured 45-60 us per 4 KiB page: a 4 KiB message through a
  // fresh ring took 40-70 us instead of one. MADV_POPULATE_WRITE
  // (madvise(2), Linux 5.14) needs a page-aligned start, and says EFAULT
  // where a touch would raise SIGBUS: /dev/shm (tmpfs) has no room left for
  // the pages (ftruncate reserves none). Older kernels: touch each page.
  Status populate(size_t off, size_t len) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t start = off / page * page;
    char* p = base_ + start;
    len += off - start;
    if (::madvise(p, len, MADV_POPULATE_WRITE) == 0) return ok_status();
    const int err = errno;
    if (err == EFAULT || err == ENOMEM) {
      return failed_precondition(fmt::format("shm: {} bytes of shared memory cannot be had: /dev/shm is full or too "
                                             "small (enlarge it, as docker run --shm-size does, or use the tcp "
                                             "transport)", len));
    }
    if (err != EINVAL) return io_error("shm: madvise(MADV_POPULATE_WRITE)", err);
    for (size_t i = 0; i < len; i += page) {
      reinterpret_cast<std::atomic<char>*>(p + i)->fetch_add(0, std::memory_order_relaxed);
    }
    return ok_status();
  }
  SegmentHeader* hdr() const { return reinterpret_cast<SegmentHeader*>(base_); }
  RingCtl* ctl(int sender) const {
    return reinterpret_cast<RingCtl*>(base_ + sizeof(SegmentHeader)) + sender;
  }
  char* ring(int sender) const {
    return base_ + sizeof(SegmentHeader) + sizeof(RingCtl) * static_cast<size_t>(hdr()->size) +
           static_cast<size_t>(sender) * hdr()->ring_bytes;
  }
  size_t ring_offset(int sender) const { return static_cast<size_t>(ring(sender) - base_); }
  static size_t control_bytes(int size) { return sizeof(SegmentHeader) + static_cast<size_t>(size) * sizeof(RingCtl); }
  static size_t bytes_for(int size, size_t ring_bytes) {
    return sizeof(SegmentHeader) + static_cast<size_t>(size) * (sizeof(RingCtl) + ring_bytes);
  }

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
};

// The doorbell. A rank that found no news sleeps on its `bell` (a futex
// word); a rank that published news for it (a frame's seq word, a ring tail,
// an ack, an abort notice) must wake it, but should not pay for that on
// every message: it bumps `bell` and calls FUTEX_WAKE only when `sleepers`
// says the owner may sleep. That is a Dekker pair. The sleeper
// (ShmTransport::wait) bumps `sleepers`, reads `bell`, then looks for news;
// the publisher stores its news, then reads `sleepers`. Each side's load
// must not be ordered before its own store, or both can miss the other
// (x86 lets a load pass an earlier store to another address: Intel SDM vol.
// 3A 9.2.3.4), and a sleeper then sleeps through news that is there.
// Either way round, a bell bumped after the sleeper read it makes
// FUTEX_WAIT return at once (futex(2): the value no longer matches).
//
// The classic fix is a full fence on both sides, and the publisher's side
// is the hot one: a seq_cst fence per message waits for the store of the
// message's line to leave the store buffer, i.e. for the line to come back
// from the receiver that polls it; perf put 84% of a small AllReduce's
// sender cycles on the instruction after it. So the fence is asymmetric
// where the kernel allows it (BellFence::kCompiler): the publisher orders
// its store and load with a compiler barrier only, and the sleeper, which
// is about to spend microseconds on a futex anyway, calls
// membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) between bumping `sleepers` and
// looking for news. membarrier(2): on return "all running threads have
// passed through a state where all memory accesses to user-space addresses
// match program order between entry to and return from the system call",
// for every process registered with MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED
// (threads not running are in that state anyway: a context switch is a full
// barrier); its NOTES give exactly this pattern, a compiler barrier on the
// fast path made a memory barrier by membarrier() on the slow path. Ranks
// are separate processes, so the PRIVATE commands (one process) do not
// apply. A publisher thus passes that state at some point P of its program:
// if P is before its store of news, its load of `sleepers` comes after the
// sleeper's bump (which the membarrier entry's own barrier made visible); if
// P is after the store, the news is visible to the sleeper's look, which
// comes after membarrier returns. The publisher skips its fence only if it
// registered itself and the sleeper's header says it calls membarrier
// (`sleep_fence`); otherwise, and on the rare paths (abort, close), it
// fences (BellFence::kFull).
enum class BellFence { kFull, kCompiler };

inline void ring_bell(SegmentHeader* h, BellFence fence) {
  if (fence == BellFence::kCompiler) {
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the store before the load
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  if (h->sleepers.load(std::memory_order_relaxed) == 0) return;
  h->bell.fetch_add(1);
  futex(&h->bell, FUTEX_WAKE, INT32_MAX, nullptr);
}

// Registers this process for MEMBARRIER_CMD_GLOBAL_EXPEDITED (once; the
// registration is for the process's lifetime): true if the kernel offers it
// (Linux 4.16; MEMBARRIER_CMD_QUERY) and took the registration. A registered
// process is interrupted whenever any process issues that command, which
// ranks do only before they sleep.
inline bool register_sleep_fence() {
  static const bool ok = [] {
    const long cmds = ::syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0) return false;
    return ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
  }();
  return ok;
}

// The sleeper's half of the asymmetric fence (ring_bell): false if the call
// failed, and then the caller must not sleep.
inline bool sleep_fence() { return ::syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0; }

inline Result<int> open_segment(const std::string& name, bool create, size_t bytes) {
  int fd = ::shm_open(name.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) return io_error(fmt::format("shm_open {}", name), errno);
  if (create && ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    ::close(fd);
    return io_error(fmt::format("sizing {} to {} bytes (is /dev/shm large enough?)", name, bytes), e);
  }
  return fd;
}

}  // namespace weft::coll::shm
