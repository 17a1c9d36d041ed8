// Drives libnccl-net-weft.so through one of its exported tables, as NCCL
// does: dlopen the library, dlsym ncclNetPlugin_vN, and call through the
// table. The calls are given one shape here (v9's sizes, no profiler
// handles) and adapted to each version's signatures, so a test or a
// benchmark (bench/nccl_net_bw.cc) is written once and runs against v8, v9,
// v10 and v11.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/nccl_net/abi.h"
#include "weft/nccl_net/counters.h"

namespace weft::nccl_net {

// The plugin this build made (a compile definition of weft_nccl_net_driver).
const char* plugin_path();

struct Props {
  std::string name;
  int ptr_support = 0, speed = 0, port = 0, max_comms = 0, max_recvs = 0, force_flush = -1;
  std::uint64_t guid = 0;
  std::size_t max_p2p_bytes = 0;  // 0 for v8, which has no such member
};

class Driver {
 public:
  // dlopen + dlsym; an error names the library or the symbol.
  static Result<Driver> load(int version);
  Driver(Driver&& o) noexcept;
  Driver& operator=(Driver&&) = delete;
  ~Driver();

  int version() const { return version_; }
  const char* name() const;
  // traffic_class: what NCCL's config gives the QPs (v11: init's config, v10:
  // connect's; v8 and v9 have none); -1 = NCCL_NET_TRAFFIC_CLASS_UNDEF.
  ncclResult_t init(ncclDebugLogger_t log, int traffic_class = -1);
  ncclResult_t devices(int* n);
  ncclResult_t properties(int dev, Props* p);
  ncclResult_t listen(int dev, void* handle, void** lc);
  ncclResult_t connect(int dev, void* handle, void** sc);
  ncclResult_t accept(void* lc, void** rc);
  ncclResult_t reg_mr(void* comm, void* data, std::size_t size, int type, void** mh);
  ncclResult_t reg_mr_dmabuf(void* comm, void* data, std::size_t size, int type, std::uint64_t offset, int fd,
                             void** mh);
  ncclResult_t dereg_mr(void* comm, void* mh);
  ncclResult_t isend(void* sc, void* data, std::size_t size, int tag, void* mh, void** req);
  ncclResult_t irecv(void* rc, int n, void** data, std::size_t* sizes, int* tags, void** mhs, void** req);
  ncclResult_t iflush(void* rc, int n, void** data, int* sizes, void** mhs, void** req);
  ncclResult_t test(void* req, int* done, int* sizes);
  // As NCCL's proxy after each completed receive (the request already freed).
  ncclResult_t irecv_consumed(void* rc, int n, void* req);
  // makeVDevice of devs[0..ndevs) (v9 on); v8 has none: ncclInvalidUsage.
  ncclResult_t make_vdevice(int* d, int ndevs, const int* devs);
  ncclResult_t close_send(void* c);
  ncclResult_t close_recv(void* c);
  ncclResult_t close_listen(void* c);
  ncclResult_t finalize();  // v11 only; ncclSuccess elsewhere
  weft_nccl_net_counters_t counters() const;

 private:
  Driver() = default;
  int version_ = 0;
  void* dl_ = nullptr;
  const void* table_ = nullptr;
  void* ctx_ = nullptr;  // v11's init context
  int traffic_class_ = -1;
  weft_nccl_net_counters_fn counters_ = nullptr;
};

}  // namespace weft::nccl_net
