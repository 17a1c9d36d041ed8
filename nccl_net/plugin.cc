// The exported tables ncclNetPlugin_v8 .. ncclNetPlugin_v11: each version's
// signatures adapted to the operations of comm.h. Nothing throws across
// this boundary: a C++ exception becomes ncclInternalError and a log line.
#include <algorithm>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "weft/nccl_net/abi.h"
#include "weft/nccl_net/comm.h"
#include "weft/nccl_net/counters.h"

#define WEFT_EXPORT __attribute__((visibility("default")))

namespace weft::nccl_net {
namespace {

template <typename F>
ncclResult_t guarded(const char* call, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Net::get().fail(call, internal_error(e.what()));
  } catch (...) {
    return Net::get().fail(call, internal_error("unknown exception"));
  }
}

ncclResult_t init(ncclDebugLogger_t log) {
  return guarded("init", [&] { return Net::get().init(log); });
}

ncclResult_t devices(int* ndev) {
  if (ndev == nullptr) return Net::get().fail("devices", invalid_argument("NULL count"));
  *ndev = Net::get().device_count();
  return ncclSuccess;
}

// The members every version shares (v8 has no forceFlush, vProps, max*Bytes).
template <typename P>
ncclResult_t fill_common(int dev, P* props) {
  Net& net = Net::get();
  if (props == nullptr) return net.fail("getProperties", invalid_argument("NULL properties"));
  NetDevice* d = net.device(dev);
  if (d == nullptr) return ncclInvalidArgument;
  std::memset(props, 0, sizeof(*props));
  props->name = const_cast<char*>(d->dev->name().c_str());
  props->pciPath = d->pci_path.empty() ? nullptr : const_cast<char*>(d->pci_path.c_str());
  props->guid = d->guid;
  // Host memory only, even where the device takes dma-bufs: NCCL counts
  // NCCL_PTR_DMABUF on a dma-buf-capable NIC as GPU Direct RDMA and then
  // receives into GPU memory, which, before compute capability 9.0, needs
  // iflush to order the NIC's writes before the GPU reads them (an RDMA
  // READ after the receive: ncclIbIflush, src/transport/net_ib/p2p.cc;
  // ncclTopoNeedFlush, src/graph/paths.cc). This plugin's iflush does no
  // such read, so it must not be offered GPU memory: NCCL stages through
  // host buffers instead.
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 0;
  props->speed = d->speed_mbps;
  props->port = d->dev->port().port_num;
  props->latency = 0;
  props->maxComms = std::max(1, d->max_qp / net.settings().qps);  // each comm holds that many QPs
  props->maxRecvs = kMaxRecvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  return ncclSuccess;
}

template <typename P>
ncclResult_t fill_v9(int dev, P* props) {
  ncclResult_t r = fill_common(dev, props);
  if (r != ncclSuccess) return r;
  NetDevice* d = Net::get().device(dev);
  props->forceFlush = 0;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = d->dev->port().max_msg_bytes;
  props->maxCollBytes = d->dev->port().max_msg_bytes;
  return ncclSuccess;
}

ncclResult_t props_v8(int dev, ncclNetProperties_v8_t* p) {
  return guarded("getProperties", [&] {
    ncclResult_t r = fill_common(dev, p);
    // v8's isend takes an int size.
    return r;
  });
}
ncclResult_t props_v9(int dev, ncclNetProperties_v9_t* p) {
  return guarded("getProperties", [&] { return fill_v9(dev, p); });
}
ncclResult_t props_v11(int dev, ncclNetProperties_v11_t* p) {
  return guarded("getProperties", [&] {
    ncclResult_t r = fill_v9(dev, p);
    if (r == ncclSuccess) p->maxMultiRequestSize = 1;
    return r;
  });
}

ncclResult_t listen(int dev, void* handle, void** lc) {
  return guarded("listen", [&] { return do_listen(dev, handle, lc); });
}
ncclResult_t connect_tc(int dev, int tc, const void* owner, void* handle, void** sc, ncclNetDeviceHandle_v8_t** dc) {
  return guarded("connect", [&] {
    if (dc != nullptr && *dc != nullptr) {
      return Net::get().fail("connect", invalid_argument("device offload asked for; this plugin is host-only"));
    }
    return do_connect(dev, tc, owner, handle, sc);
  });
}
ncclResult_t connect_v8(int dev, void* handle, void** sc, ncclNetDeviceHandle_v8_t** dc) {
  return connect_tc(dev, NCCL_NET_TRAFFIC_CLASS_UNDEF, nullptr, handle, sc, dc);
}
ncclResult_t connect_v10(int dev, ncclNetCommConfig_v10_t* cfg, void* handle, void** sc,
                         ncclNetDeviceHandle_v10_t** dc) {
  return connect_tc(dev, cfg ? cfg->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF, nullptr, handle, sc, dc);
}
ncclResult_t accept(void* lc, void** rc, ncclNetDeviceHandle_v8_t** dc) {
  return guarded("accept", [&] {
    if (dc != nullptr && *dc != nullptr) {
      return Net::get().fail("accept", invalid_argument("device offload asked for; this plugin is host-only"));
    }
    return do_accept(lc, rc);
  });
}
ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mh) {
  return guarded("regMr", [&] { return do_reg_mr(comm, data, size, type, mh); });
}
ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mh) {
  return guarded("regMrDmaBuf", [&] { return do_reg_mr_dmabuf(comm, data, size, type, offset, fd, mh); });
}
ncclResult_t dereg_mr(void* comm, void* mh) {
  return guarded("deregMr", [&] { return do_dereg_mr(comm, mh); });
}
ncclResult_t isend_v8(void* sc, void* data, int size, int tag, void* mh, void** req) {
  if (size < 0) return Net::get().fail("isend", invalid_argument(fmt::format("size {}", size)));
  return guarded("isend", [&] { return do_isend(sc, data, static_cast<size_t>(size), tag, mh, req); });
}
ncclResult_t isend_v9(void* sc, void* data, size_t size, int tag, void* mh, void** req) {
  return guarded("isend", [&] { return do_isend(sc, data, size, tag, mh, req); });
}
ncclResult_t isend_v10(void* sc, void* data, size_t size, int tag, void* mh, void*, void** req) {
  return isend_v9(sc, data, size, tag, mh, req);
}
ncclResult_t irecv_v8(void* rc, int n, void** data, int* sizes, int* tags, void** mhs, void** req) {
  return guarded("irecv", [&] {
    if (n < 1 || n > kMaxRecvs || sizes == nullptr) {
      return Net::get().fail("irecv", invalid_argument(fmt::format("{} buffers (1..{})", n, kMaxRecvs)));
    }
    size_t wide[kMaxRecvs];
    for (int i = 0; i < n; ++i) {
      if (sizes[i] < 0) return Net::get().fail("irecv", invalid_argument(fmt::format("size {}", sizes[i])));
      wide[i] = static_cast<size_t>(sizes[i]);
    }
    return do_irecv(rc, n, data, wide, tags, mhs, req);
  });
}
ncclResult_t irecv_v9(void* rc, int n, void** data, size_t* sizes, int* tags, void** mhs, void** req) {
  return guarded("irecv", [&] { return do_irecv(rc, n, data, sizes, tags, mhs, req); });
}
ncclResult_t irecv_v10(void* rc, int n, void** data, size_t* sizes, int* tags, void** mhs, void**, void** req) {
  return irecv_v9(rc, n, data, sizes, tags, mhs, req);
}
// Host memory needs no flush: the receive completion already orders the
// data before it, and host memory is all getProperties offers. NCCL's IB transport does the same: ncclIbIflush returns
// at once, posting nothing, unless flushEnabled, which it sets only for GPU
// Direct RDMA or dma-buf memory (src/transport/net_ib.cc, v2.28.3-1).
ncclResult_t iflush(void*, int, void**, int*, void**, void** req) {
  if (req != nullptr) *req = nullptr;
  return ncclSuccess;
}
ncclResult_t test(void* req, int* done, int* sizes) {
  return guarded("test", [&] { return do_test(req, done, sizes); });
}
ncclResult_t close_comm(void* c) {
  return guarded("close", [&] { return do_close(c); });
}
ncclResult_t close_listen(void* c) {
  return guarded("closeListen", [&] { return do_close_listen(c); });
}
ncclResult_t get_device_mr(void*, void*, void** out) {
  if (out != nullptr) *out = nullptr;
  return Net::get().fail("getDeviceMr", failed_precondition("no device offload (NCCL_NET_DEVICE_HOST)"));
}
// NCCL calls irecvConsumed after every completed receive whenever the slot
// is filled, device offload or not (src/transport/net.cc, recvProxyProgress),
// with a request test() has already freed: nothing to do, nothing to touch.
ncclResult_t irecv_consumed(void*, int, void*) { return ncclSuccess; }
// A virtual NIC of one device is that device; merging several is not
// offered. NCCL asks to merge NICs close to each other on its own
// (ncclTopoAutoMerge, src/graph/topo.cc): it takes a refusal as "do not
// merge these", logs it at INFO and goes on with the NICs apart. So that
// refusal is an answer, not an error: logged at INFO, not counted.
ncclResult_t make_vdevice(int* d, ncclNetVDeviceProps_v9_t* props) {
  Net& net = Net::get();
  if (d == nullptr || props == nullptr) return net.fail("makeVDevice", invalid_argument("NULL argument"));
  if (props->ndevs < 1 || props->ndevs > NCCL_NET_MAX_DEVS_PER_NIC) {
    return net.fail("makeVDevice", invalid_argument(fmt::format("{} devices in one virtual NIC (1..{})", props->ndevs,
                                                                NCCL_NET_MAX_DEVS_PER_NIC)));
  }
  if (props->ndevs > 1) {
    net.info(fmt::format("makeVDevice: {} devices in one virtual NIC; only 1 is offered, NCCL keeps them apart",
                         props->ndevs));
    return ncclInvalidArgument;
  }
  if (net.device(props->devs[0]) == nullptr) return ncclInvalidArgument;
  *d = props->devs[0];
  return ncclSuccess;
}

ncclResult_t init_v10(ncclDebugLogger_t log, ncclProfilerCallback_t) { return init(log); }

// v11: a per-communicator context carrying the traffic class.
struct ContextV11 {
  int traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;
};
ncclResult_t init_v11(void** ctx, uint64_t, ncclNetCommConfig_v11_t* cfg, ncclDebugLogger_t log,
                      ncclProfilerCallback_t) {
  if (ctx == nullptr) return Net::get().fail("init", invalid_argument("NULL context"));
  *ctx = nullptr;
  ncclResult_t r = init(log);
  if (r != ncclSuccess) return r;
  auto* c = new ContextV11();
  if (cfg != nullptr) c->traffic_class = cfg->trafficClass;
  *ctx = c;
  return ncclSuccess;
}
ncclResult_t listen_v11(void*, int dev, void* handle, void** lc) { return listen(dev, handle, lc); }
ncclResult_t connect_v11(void* ctx, int dev, void* handle, void** sc, ncclNetDeviceHandle_v11_t** dc) {
  int tc = ctx ? static_cast<ContextV11*>(ctx)->traffic_class : NCCL_NET_TRAFFIC_CLASS_UNDEF;
  return connect_tc(dev, tc, ctx, handle, sc, dc);
}
// NCCL finalizes a communicator's context when it is done with the plugin
// (commFree, src/init.cc, then ncclNetPluginFinalize, src/plugin/net.cc),
// aborted or not: connects it left unfinished go with it (in_progress.h).
ncclResult_t finalize_v11(void* ctx) {
  if (ctx != nullptr) drop_connects(ctx);
  delete static_cast<ContextV11*>(ctx);
  return ncclSuccess;
}
// NCCL's hints on peers and flows per comm; the plan already fixes the flows.
ncclResult_t set_net_attr_v11(void*, ncclNetAttr_v11_t*) { return ncclSuccess; }

}  // namespace
}  // namespace weft::nccl_net

namespace wn = weft::nccl_net;

extern "C" {

WEFT_EXPORT extern const ncclNet_v8_t ncclNetPlugin_v8;
WEFT_EXPORT extern const ncclNet_v9_t ncclNetPlugin_v9;
WEFT_EXPORT extern const ncclNet_v10_t ncclNetPlugin_v10;
WEFT_EXPORT extern const ncclNet_v11_t ncclNetPlugin_v11;
WEFT_EXPORT void weft_nccl_net_counters(weft_nccl_net_counters_t* out);

const ncclNet_v8_t ncclNetPlugin_v8 = {
    "weft",        wn::init,          wn::devices,    wn::props_v8,      wn::listen,      wn::connect_v8,
    wn::accept,    wn::reg_mr,        wn::reg_mr_dmabuf, wn::dereg_mr,   wn::isend_v8,    wn::irecv_v8,
    wn::iflush,    wn::test,          wn::close_comm, wn::close_comm,    wn::close_listen, wn::get_device_mr,
    wn::irecv_consumed};

const ncclNet_v9_t ncclNetPlugin_v9 = {
    "weft",        wn::init,          wn::devices,    wn::props_v9,      wn::listen,      wn::connect_v8,
    wn::accept,    wn::reg_mr,        wn::reg_mr_dmabuf, wn::dereg_mr,   wn::isend_v9,    wn::irecv_v9,
    wn::iflush,    wn::test,          wn::close_comm, wn::close_comm,    wn::close_listen, wn::get_device_mr,
    wn::irecv_consumed, wn::make_vdevice};

const ncclNet_v10_t ncclNetPlugin_v10 = {
    "weft",        wn::init_v10,      wn::devices,    wn::props_v9,      wn::listen,      wn::connect_v10,
    wn::accept,    wn::reg_mr,        wn::reg_mr_dmabuf, wn::dereg_mr,   wn::isend_v10,   wn::irecv_v10,
    wn::iflush,    wn::test,          wn::close_comm, wn::close_comm,    wn::close_listen, wn::get_device_mr,
    wn::irecv_consumed, wn::make_vdevice};

const ncclNet_v11_t ncclNetPlugin_v11 = {
    "weft",        wn::init_v11,      wn::devices,    wn::props_v11,     wn::listen_v11,  wn::connect_v11,
    wn::accept,    wn::reg_mr,        wn::reg_mr_dmabuf, wn::dereg_mr,   wn::isend_v10,   wn::irecv_v10,
    wn::iflush,    wn::test,          wn::close_comm, wn::close_comm,    wn::close_listen, wn::get_device_mr,
    wn::irecv_consumed, wn::make_vdevice, wn::finalize_v11, wn::set_net_attr_v11};

void weft_nccl_net_counters(weft_nccl_net_counters_t* out) {
  if (out == nullptr) return;
  auto& c = wn::Net::get().counters();
  out->planned = c.planned;
  out->unplanned = c.unplanned;
  out->unapplicable = c.unapplicable;
  out->errors = c.errors;
}

}  // extern "C"
