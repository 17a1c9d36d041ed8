// Whether the shm transport may copy a message straight out of the
// sender's memory (internal). process_vm_readv(2) needs ptrace access to
// the sender (PTRACE_MODE_ATTACH_REALCREDS, ptrace(2)), which hosts refuse
// more often than not: Yama's ptrace_scope 1 (Ubuntu's default) allows it
// only to ancestors, containers drop CAP_SYS_PTRACE, seccomp profiles deny
// the call. Open MPI's vader then uses its copy-in/copy-out path; so does
// weft: the permission is probed once per peer at setup, and a refused peer
// sends through the ring (two copies) instead of failing every large
// message.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace weft::coll::shm {

// Where Yama's ptrace_scope is 1, names this process's parent as its
// ptracer (prctl PR_SET_PTRACER, Documentation/admin-guide/LSM/Yama.rst):
// a process may then be read by the parent and the parent's descendants —
// the other ranks a launcher (torchrun, prted, slurmstepd) started on this
// host, and the launcher itself, which could already. It replaces a ptracer
// the process named before. Nothing where Yama is off, in another mode, or
// the parent is init (an orphan would grant everything). True if granted.
bool grant_ptrace_to_parent();

// 0 if this process can read the 8-byte word at `addr` in process `pid`
// and it holds `expect`; else the errno of process_vm_readv (EFAULT for a
// short read or another value).
int probe_single_copy(pid_t pid, uint64_t addr, uint64_t expect);

// The one line (spdlog warning) a rank logs when some peers refused:
// (peer rank, errno) each.
void log_single_copy_refused(int rank, const std::vector<std::pair<int, int>>& refused, size_t min_bytes);

}  // namespace weft::coll::shm
