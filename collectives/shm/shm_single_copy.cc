#include "shm/shm_single_copy.h"

#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace weft::coll::shm {
namespace {

// -1 without Yama.
int yama_ptrace_scope() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int scope = -1;
  if (!(f >> scope)) return -1;
  return scope;
}

}  // namespace

bool grant_ptrace_to_parent() {
  if (yama_ptrace_scope() != 1) return false;
  const pid_t parent = ::getppid();
  if (parent <= 1) return false;
  return ::prctl(PR_SET_PTRACER, static_cast<unsigned long>(parent), 0, 0, 0) == 0;
}

int probe_single_copy(pid_t pid, uint64_t addr, uint64_t expect) {
  uint64_t word = 0;
  iovec local{&word, sizeof word};
  iovec remote{reinterpret_cast<void*>(addr), sizeof word};
  const ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n < 0) return errno;
  return n == static_cast<ssize_t>(sizeof word) && word == expect ? 0 : EFAULT;
}

void log_single_copy_refused(int rank, const std::vector<std::pair<int, int>>& refused, size_t min_bytes) {
  std::string peers;
  for (const auto& [peer, err] : refused) {
    peers += fmt::format("{}{} ({})", peers.empty() ? "" : ", ", peer, std::strerror(err));
  }
  const int scope = yama_ptrace_scope();
  spdlog::warn(
      "weft shm: rank {} may not read the memory of rank(s) {} with process_vm_readv (Yama ptrace_scope {}, a "
      "seccomp filter or a missing CAP_SYS_PTRACE can refuse it); their messages of {} bytes or more go through the "
      "shared ring instead (two copies)",
      rank, peers, scope < 0 ? std::string("absent") : std::to_string(scope), min_bytes);
}

}  // namespace weft::coll::shm
