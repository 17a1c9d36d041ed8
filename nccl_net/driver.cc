#include "weft/nccl_net/driver.h"

#include <dlfcn.h>

#include <utility>

#include <fmt/format.h>

namespace weft::nccl_net {
namespace {

template <typename T>
const T& as(const void* t) {
  return *static_cast<const T*>(t);
}

template <typename P>
void copy_common(const P& in, Props* out) {
  out->name = in.name ? in.name : "";
  out->ptr_support = in.ptrSupport;
  out->speed = in.speed;
  out->port = in.port;
  out->max_comms = in.maxComms;
  out->max_recvs = in.maxRecvs;
  out->guid = in.guid;
}

}  // namespace

const char* plugin_path() { return WEFT_NCCL_PLUGIN_PATH; }

Result<Driver> Driver::load(int version) {
  Driver d;
  d.version_ = version;
  d.dl_ = dlopen(plugin_path(), RTLD_NOW | RTLD_LOCAL);
  if (d.dl_ == nullptr) return not_found(fmt::format("dlopen({}): {}", plugin_path(), dlerror()));
  const std::string sym = fmt::format("ncclNetPlugin_v{}", version);
  d.table_ = dlsym(d.dl_, sym.c_str());
  if (d.table_ == nullptr) return not_found(fmt::format("dlsym({}): {}", sym, dlerror()));
  d.counters_ = reinterpret_cast<weft_nccl_net_counters_fn>(dlsym(d.dl_, "weft_nccl_net_counters"));
  if (d.counters_ == nullptr) return not_found("dlsym(weft_nccl_net_counters)");
  return d;
}

Driver::Driver(Driver&& o) noexcept
    : version_(o.version_),
      dl_(std::exchange(o.dl_, nullptr)),
      table_(o.table_),
      ctx_(std::exchange(o.ctx_, nullptr)),
      traffic_class_(o.traffic_class_),
      counters_(o.counters_) {}

Driver::~Driver() {
  if (dl_ != nullptr) dlclose(dl_);
}

// Every call dispatches on the version: the tables differ in layout.
#define WEFT_DISPATCH(expr8, expr9, expr10, expr11)                  \
  switch (version_) {                                              \
    case 8: { const auto& t = as<ncclNet_v8_t>(table_); return expr8; }   \
    case 9: { const auto& t = as<ncclNet_v9_t>(table_); return expr9; }   \
    case 10: { const auto& t = as<ncclNet_v10_t>(table_); return expr10; } \
    default: { const auto& t = as<ncclNet_v11_t>(table_); return expr11; } \
  }
#define WEFT_SAME(expr) WEFT_DISPATCH(expr, expr, expr, expr)

const char* Driver::name() const { WEFT_SAME(t.name) }

ncclResult_t Driver::init(ncclDebugLogger_t log, int traffic_class) {
  traffic_class_ = traffic_class;
  ncclNetCommConfig_v11_t cfg{traffic_class};
  WEFT_DISPATCH(t.init(log), t.init(log), t.init(log, nullptr), t.init(&ctx_, 42, &cfg, log, nullptr))
}
ncclResult_t Driver::devices(int* n) { WEFT_SAME(t.devices(n)) }

ncclResult_t Driver::properties(int dev, Props* p) {
  auto v9 = [&](const auto& t) {
    ncclNetProperties_v9_t q{};
    ncclResult_t r = t.getProperties(dev, &q);
    copy_common(q, p);
    p->force_flush = q.forceFlush;
    p->max_p2p_bytes = q.maxP2pBytes;
    return r;
  };
  switch (version_) {
    case 8: {
      ncclNetProperties_v8_t q{};
      ncclResult_t r = as<ncclNet_v8_t>(table_).getProperties(dev, &q);
      copy_common(q, p);
      return r;
    }
    case 9: return v9(as<ncclNet_v9_t>(table_));
    case 10: return v9(as<ncclNet_v10_t>(table_));
    default: {
      ncclNetProperties_v11_t q{};
      ncclResult_t r = as<ncclNet_v11_t>(table_).getProperties(dev, &q);
      copy_common(q, p);
      p->force_flush = q.forceFlush;
      p->max_p2p_bytes = q.maxP2pBytes;
      return r;
    }
  }
}

ncclResult_t Driver::listen(int dev, void* handle, void** lc) {
  WEFT_DISPATCH(t.listen(dev, handle, lc), t.listen(dev, handle, lc), t.listen(dev, handle, lc),
                t.listen(ctx_, dev, handle, lc))
}
ncclResult_t Driver::connect(int dev, void* handle, void** sc) {
  ncclNetDeviceHandle_v8_t* none = nullptr;
  ncclNetCommConfig_v10_t cfg{traffic_class_};
  WEFT_DISPATCH(t.connect(dev, handle, sc, &none), t.connect(dev, handle, sc, &none),
                t.connect(dev, &cfg, handle, sc, &none), t.connect(ctx_, dev, handle, sc, &none))
}
ncclResult_t Driver::accept(void* lc, void** rc) {
  ncclNetDeviceHandle_v8_t* none = nullptr;
  WEFT_SAME(t.accept(lc, rc, &none))
}
ncclResult_t Driver::reg_mr(void* comm, void* data, std::size_t size, int type, void** mh) {
  WEFT_SAME(t.regMr(comm, data, size, type, mh))
}
ncclResult_t Driver::reg_mr_dmabuf(void* comm, void* data, std::size_t size, int type, std::uint64_t offset, int fd,
                                   void** mh) {
  WEFT_SAME(t.regMrDmaBuf(comm, data, size, type, offset, fd, mh))
}
ncclResult_t Driver::dereg_mr(void* comm, void* mh) { WEFT_SAME(t.deregMr(comm, mh)) }

ncclResult_t Driver::isend(void* sc, void* data, std::size_t size, int tag, void* mh, void** req) {
  WEFT_DISPATCH(t.isend(sc, data, static_cast<int>(size), tag, mh, req), t.isend(sc, data, size, tag, mh, req),
                t.isend(sc, data, size, tag, mh, nullptr, req), t.isend(sc, data, size, tag, mh, nullptr, req))
}

ncclResult_t Driver::irecv(void* rc, int n, void** data, std::size_t* sizes, int* tags, void** mhs, void** req) {
  if (version_ == 8) {
    std::vector<int> narrow(sizes, sizes + n);
    return as<ncclNet_v8_t>(table_).irecv(rc, n, data, narrow.data(), tags, mhs, req);
  }
  if (version_ == 9) return as<ncclNet_v9_t>(table_).irecv(rc, n, data, sizes, tags, mhs, req);
  if (version_ == 10) return as<ncclNet_v10_t>(table_).irecv(rc, n, data, sizes, tags, mhs, nullptr, req);
  return as<ncclNet_v11_t>(table_).irecv(rc, n, data, sizes, tags, mhs, nullptr, req);
}
ncclResult_t Driver::iflush(void* rc, int n, void** data, int* sizes, void** mhs, void** req) {
  WEFT_SAME(t.iflush(rc, n, data, sizes, mhs, req))
}
ncclResult_t Driver::test(void* req, int* done, int* sizes) { WEFT_SAME(t.test(req, done, sizes)) }
ncclResult_t Driver::irecv_consumed(void* rc, int n, void* req) {
  WEFT_SAME(t.irecvConsumed ? t.irecvConsumed(rc, n, req) : ncclSuccess)
}
ncclResult_t Driver::make_vdevice(int* d, int ndevs, const int* devs) {
  ncclNetVDeviceProps_v9_t props{};
  props.ndevs = ndevs;
  for (int i = 0; i < ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC; ++i) props.devs[i] = devs[i];
  WEFT_DISPATCH(((void)t, ncclInvalidUsage), t.makeVDevice(d, &props), t.makeVDevice(d, &props),
                t.makeVDevice(d, &props))
}
ncclResult_t Driver::close_send(void* c) { WEFT_SAME(t.closeSend(c)) }
ncclResult_t Driver::close_recv(void* c) { WEFT_SAME(t.closeRecv(c)) }
ncclResult_t Driver::close_listen(void* c) { WEFT_SAME(t.closeListen(c)) }
ncclResult_t Driver::finalize() {
  if (version_ != 11) return ncclSuccess;
  return as<ncclNet_v11_t>(table_).finalize(std::exchange(ctx_, nullptr));
}

weft_nccl_net_counters_t Driver::counters() const {
  weft_nccl_net_counters_t c{};
  counters_(&c);
  return c;
}

}  // namespace weft::nccl_net
