#include "tcp/peer_cpu.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace weft::coll::tcp {

PeerCpu::PeerCpu(int tid) {
  if (tid <= 0) return;
  const std::string path = "/proc/" + std::to_string(tid) + "/stat";
  stat_ = Fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
}

int PeerCpu::cpu() const {
  if (!stat_) return -1;
  char buf[1024];
  const ssize_t n = ::pread(stat_.get(), buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  // Field 2 (comm) is in parentheses and may hold spaces: count from the
  // last ')'. Field 3 follows it; "processor" is field 39.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return -1;
  for (int field = 2; field < 39; ++field) {
    p = std::strchr(p + 1, ' ');
    if (p == nullptr) return -1;
  }
  return std::atoi(p + 1);
}

}  // namespace weft::coll::tcp
