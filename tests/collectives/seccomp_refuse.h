// Test helper: one system call fails with an errno in the calling thread
// only, as under a container's seccomp profile that refuses it (seccomp(2),
// SECCOMP_RET_ERRNO). Run it on a rank's thread (run_ranks' tweak runs
// there, before the communicator is created): the filter ends with the
// thread. PR_SET_NO_NEW_PRIVS comes first, which a filter needs without
// CAP_SYS_ADMIN; it too stays on that thread.
#pragma once

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include <cstddef>

namespace weft::coll::testing {

// True if the filter is in place; else errno says why.
inline bool refuse_syscall_in_this_thread(unsigned nr, int err) {
  sock_filter prog[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(err) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog fprog{static_cast<unsigned short>(sizeof prog / sizeof prog[0]), prog};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) == 0;
}

}  // namespace weft::coll::testing
