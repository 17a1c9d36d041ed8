// The NCCL net-plugin ABI, versions 8 to 11, as weft's own C declarations.
//
// NCCL dlopen()s libnccl-net-<NCCL_NET_PLUGIN>.so and dlsym()s the tables
// ncclNetPlugin_v11 .. ncclNetPlugin_v8 (newest first); a table is a struct
// of function pointers, so only the layout matters. The layouts below were
// written from the example plugin headers NCCL publishes
// (NVIDIA/nccl, ext-net/example/nccl/, later plugins/net/example/nccl/):
//   v8  net_v8.h, net_device.h  at tag v2.20.3-1 (first release with v8)
//   v9  net_v9.h                at tag v2.24.3-1
//   v10 net_v10.h, net.h        at tag v2.26.2-1
//   v11 net_v11.h, net.h        at tag v2.28.3-1
// and err.h / common.h of the same tags for ncclResult_t and the logger.
// Every size and offset asserted below is for LP64 (x86-64, aarch64 Linux),
// computed from those declarations with the System V psABI's alignment rules;
// the asserts make the compiler check our declarations against them.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// err.h (all four tags): the values NCCL checks a plugin's return against.
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
} ncclResult_t;

// common.h (v2.24.3-1 on): log levels and subsystem bits of the logger NCCL hands to init.
typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5,
} ncclDebugLogLevel;
enum { NCCL_NET = 16 };
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);
// net.h / common.h (v2.26.2-1 on): the profiler callback v10 and v11 init receive.
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* phandle, int64_t pluginId,
                                               void* extData);

// net.h: the opaque handle listen() fills and connect() reads is at most 128 bytes.
#define NCCL_NET_HANDLE_MAXSIZE 128
// net.h: pointer kinds in ptrSupport and regMr's type.
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
// net.h (v2.20.3-1 on): requests NCCL keeps in flight per comm.
#define NCCL_NET_MAX_REQUESTS 32
// net_v9.h (v9), net.h (v11): physical devices one virtual NIC may merge.
#define NCCL_NET_MAX_DEVS_PER_NIC 4
// net_v10.h / net_v11.h: "no traffic class asked for".
#define NCCL_NET_TRAFFIC_CLASS_UNDEF (-1)

// net_device.h: device offload kinds; weft offers host networking only.
typedef enum { NCCL_NET_DEVICE_HOST = 0, NCCL_NET_DEVICE_UNPACK = 1 } ncclNetDeviceType;
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0

// net_device.h: one layout shared by v7..v11 (typedef'd per version there).
typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v11_t;

// ---- v8 (net_v8.h, v2.20.3-1) ----
typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;  // Mbit/s
  int port;
  float latency;  // microseconds
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

// ---- v9 (net_v9.h, v2.24.3-1): size_t sizes, forceFlush, virtual NICs, max transfer sizes ----
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_v9_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v9_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v9_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v9_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclNet_v9_t;

// ---- v10 (net_v10.h, v2.26.2-1): profiler callback, traffic class at connect, profiler handles ----
typedef ncclNetVDeviceProps_v9_t ncclNetVDeviceProps_v10_t;  // same members, renamed
typedef struct {
  int trafficClass;
} ncclNetCommConfig_v10_t;
typedef ncclNetProperties_v9_t ncclNetProperties_v10_t;  // same members in the same order

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v10_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v10_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v10_t* props);
} ncclNet_v10_t;

// ---- v11 (net_v11.h, v2.28.3-1): a per-communicator context from init, finalize, setNetAttr ----
typedef ncclNetVDeviceProps_v9_t ncclNetVDeviceProps_v11_t;
typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v11_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v11_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
} ncclNetProperties_v11_t;

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
  ncclNetCommAttr_v11_t sendCommAttr;
  ncclNetCommAttr_v11_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} ncclNetAttr_v11_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config, ncclDebugLogger_t logFunction,
                       ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v11_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v11_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v11_t* netAttr);
} ncclNet_v11_t;

#ifdef __cplusplus
}  // extern "C"

// The layouts, checked. Pointers and size_t are 8 bytes, int/float/enum 4;
// a struct is padded to its largest member's alignment (System V AMD64 psABI 3.1.2).
#if defined(__LP64__)
#define WEFT_NCCL_OFFSET(T, m, v) static_assert(offsetof(T, m) == (v), #T "::" #m " is not at " #v)
static_assert(sizeof(ncclResult_t) == 4);
static_assert(sizeof(ncclNetDeviceHandle_v8_t) == 32);
WEFT_NCCL_OFFSET(ncclNetDeviceHandle_v8_t, handle, 8);
WEFT_NCCL_OFFSET(ncclNetDeviceHandle_v8_t, size, 16);
WEFT_NCCL_OFFSET(ncclNetDeviceHandle_v8_t, needsProxyProgress, 24);

// v8 properties: name 0, pciPath 8, guid 16, then 10 four-byte members from 24 to 64.
static_assert(sizeof(ncclNetProperties_v8_t) == 64);
WEFT_NCCL_OFFSET(ncclNetProperties_v8_t, guid, 16);
WEFT_NCCL_OFFSET(ncclNetProperties_v8_t, ptrSupport, 24);
WEFT_NCCL_OFFSET(ncclNetProperties_v8_t, regIsGlobal, 28);
WEFT_NCCL_OFFSET(ncclNetProperties_v8_t, speed, 32);
WEFT_NCCL_OFFSET(ncclNetProperties_v8_t, port, 36);
WEFT_NCCL_OFFSET(ncclNetProperties_v8_t, latency, 40);
WEFT_NCCL_OFFSET(ncclNetProperties_v8_t, maxComms, 44);
WEFT_NCCL_OFFSET(ncclNetProperties_v8_t, maxRecvs, 48);
WEFT_NCCL_OFFSET(ncclNetProperties_v8_t, netDeviceType, 52);
WEFT_NCCL_OFFSET(ncclNetProperties_v8_t, netDeviceVersion, 56);

// v9/v10 properties: forceFlush at 32 shifts the rest by 4; vProps (20 bytes)
// at 64; maxP2pBytes padded up to 88; maxCollBytes 96; size 104.
static_assert(sizeof(ncclNetVDeviceProps_v9_t) == 20);
static_assert(sizeof(ncclNetProperties_v9_t) == 104);
WEFT_NCCL_OFFSET(ncclNetProperties_v9_t, forceFlush, 32);
WEFT_NCCL_OFFSET(ncclNetProperties_v9_t, speed, 36);
WEFT_NCCL_OFFSET(ncclNetProperties_v9_t, latency, 44);
WEFT_NCCL_OFFSET(ncclNetProperties_v9_t, maxRecvs, 52);
WEFT_NCCL_OFFSET(ncclNetProperties_v9_t, netDeviceVersion, 60);
WEFT_NCCL_OFFSET(ncclNetProperties_v9_t, vProps, 64);
WEFT_NCCL_OFFSET(ncclNetProperties_v9_t, maxP2pBytes, 88);
WEFT_NCCL_OFFSET(ncclNetProperties_v9_t, maxCollBytes, 96);

// v11 properties: v9's plus maxMultiRequestSize at 104, padded to 112.
static_assert(sizeof(ncclNetProperties_v11_t) == 112);
WEFT_NCCL_OFFSET(ncclNetProperties_v11_t, vProps, 64);
WEFT_NCCL_OFFSET(ncclNetProperties_v11_t, maxCollBytes, 96);
WEFT_NCCL_OFFSET(ncclNetProperties_v11_t, maxMultiRequestSize, 104);
static_assert(sizeof(ncclNetCommConfig_v11_t) == 4);
static_assert(sizeof(ncclNetAttr_v11_t) == 44);
WEFT_NCCL_OFFSET(ncclNetAttr_v11_t, recvCommAttr, 16);
WEFT_NCCL_OFFSET(ncclNetAttr_v11_t, op, 32);
WEFT_NCCL_OFFSET(ncclNetAttr_v11_t, proto, 40);

// The tables: one name pointer then the function pointers, 8 bytes each.
// v8: 18 functions; v9 and v10: 19 (makeVDevice); v11: 21 (finalize, setNetAttr).
static_assert(sizeof(ncclNet_v8_t) == 152);
static_assert(sizeof(ncclNet_v9_t) == 160);
static_assert(sizeof(ncclNet_v10_t) == 160);
static_assert(sizeof(ncclNet_v11_t) == 176);
WEFT_NCCL_OFFSET(ncclNet_v8_t, listen, 32);
WEFT_NCCL_OFFSET(ncclNet_v8_t, regMr, 56);
WEFT_NCCL_OFFSET(ncclNet_v8_t, isend, 80);
WEFT_NCCL_OFFSET(ncclNet_v8_t, test, 104);
WEFT_NCCL_OFFSET(ncclNet_v8_t, closeListen, 128);
WEFT_NCCL_OFFSET(ncclNet_v8_t, irecvConsumed, 144);
WEFT_NCCL_OFFSET(ncclNet_v9_t, makeVDevice, 152);
WEFT_NCCL_OFFSET(ncclNet_v10_t, connect, 40);
WEFT_NCCL_OFFSET(ncclNet_v10_t, makeVDevice, 152);
WEFT_NCCL_OFFSET(ncclNet_v11_t, listen, 32);
WEFT_NCCL_OFFSET(ncclNet_v11_t, makeVDevice, 152);
WEFT_NCCL_OFFSET(ncclNet_v11_t, finalize, 160);
WEFT_NCCL_OFFSET(ncclNet_v11_t, setNetAttr, 168);
#undef WEFT_NCCL_OFFSET
#endif  // __LP64__
#endif  // __cplusplus
