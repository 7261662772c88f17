/* The NCCL net plugin ABI (ext-net), versions 6 to 12, declared for libnccl-net-mrc.
 * Threading: declarations only.
 *
 * Declared from NCCL 2.30's net_v6.h .. net_v12.h (docs/nccl-plugin.md, "ABI"):
 * every struct below has the field order, types and x86-64 layout NCCL uses; the static
 * asserts at the end pin sizes and offsets. NCCL dlopens libnccl-net-<NCCL_NET_PLUGIN>.so,
 * looks up `ncclNetPlugin_v12` down to `ncclNetPlugin_v6` and takes the first it finds.
 *
 * Names carry an `mrcNccl` prefix so this header can never clash with NCCL's own. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ncclResult_t. InProgress (7) and Timeout (8) exist in NCCL core; plugins never return them. */
typedef enum {
  mrcNcclSuccess = 0,
  mrcNcclUnhandledCudaError = 1,
  mrcNcclSystemError = 2,
  mrcNcclInternalError = 3,
  mrcNcclInvalidArgument = 4,
  mrcNcclInvalidUsage = 5,
  mrcNcclRemoteError = 6
} mrcNcclResult;

/* ncclDebugLogLevel and the subsystem flags the plugin logs under. */
typedef enum {
  mrcNcclLogNone = 0,
  mrcNcclLogVersion = 1,
  mrcNcclLogWarn = 2,
  mrcNcclLogInfo = 3,
  mrcNcclLogAbort = 4,
  mrcNcclLogTrace = 5
} mrcNcclLogLevel;
#define MRC_NCCL_LOG_INIT 0x1UL
#define MRC_NCCL_LOG_NET 0x10UL
#define MRC_NCCL_LOG_ENV 0x80UL

typedef void (*mrcNcclLogger)(mrcNcclLogLevel level, unsigned long flags, const char* file,
                              int line, const char* fmt, ...);
/* v10+: profiler callback; the plugin does not emit profiler events. */
typedef mrcNcclResult (*mrcNcclProfilerCallback)(void** eHandle, int type, void* pHandle,
                                                 int64_t pluginId, void* extData);

#define MRC_NCCL_NET_HANDLE_MAXSIZE 128
#define MRC_NCCL_PTR_HOST 0x1
#define MRC_NCCL_PTR_CUDA 0x2
#define MRC_NCCL_PTR_DMABUF 0x4
#define MRC_NCCL_NET_MAX_REQUESTS 32                /* requests in flight per comm */
#define MRC_NCCL_MAX_NET_SIZE (1024L * 1024 * 1024) /* largest single transfer */
#define MRC_NCCL_MAX_COLLNET_SIZE (512L * 1024 * 1024)
#define MRC_NCCL_ID_UNDEF (-1) /* v12 railId / planeId: not set */

/* ncclNetDeviceType: only HOST is offered (no device-side networking). */
typedef enum {
  mrcNcclNetDeviceHost = 0,
  mrcNcclNetDeviceUnpack = 1,
  mrcNcclNetDeviceGinProxy = 2,
  mrcNcclNetDeviceGinGdaki = 3
} mrcNcclNetDeviceType;

/* ncclNetDeviceHandle_v7_t, reused unchanged by v8..v12 (32 bytes). */
typedef struct {
  mrcNcclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} mrcNcclNetDeviceHandle;

/* ---- Properties, one struct per layout ------------------------------------------------ */

typedef struct {  /* v6, 48 bytes */
  char* name;     /* for logs */
  char* pciPath;  /* NULL: a virtual NIC */
  uint64_t guid;  /* NICs with the same guid are one port */
  int ptrSupport; /* MRC_NCCL_PTR_* bits */
  int speed;      /* Mbit/s */
  int port;
  float latency; /* microseconds */
  int maxComms;  /* channels per NIC */
  int maxRecvs;  /* receives grouped in one irecv */
} mrcNcclProps_v6;

typedef struct { /* v7, 56 bytes: v6 + device offload type */
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  mrcNcclNetDeviceType netDeviceType;
  int netDeviceVersion;
} mrcNcclProps_v7;

typedef struct { /* v8, 64 bytes: regIsGlobal after ptrSupport */
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  mrcNcclNetDeviceType netDeviceType;
  int netDeviceVersion;
} mrcNcclProps_v8;

typedef struct { /* virtual device (v9..v11: up to 4 physical devices) */
  int ndevs;
  int devs[4];
} mrcNcclVDeviceProps_v9;

typedef struct { /* v9 and v10, 104 bytes */
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
  mrcNcclNetDeviceType netDeviceType;
  int netDeviceVersion;
  mrcNcclVDeviceProps_v9 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} mrcNcclProps_v9;

typedef struct { /* v11, 112 bytes: v10 + maxMultiRequestSize */
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
  mrcNcclNetDeviceType netDeviceType;
  int netDeviceVersion;
  mrcNcclVDeviceProps_v9 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
} mrcNcclProps_v11;

typedef struct { /* v12 virtual device: up to 8 physical devices */
  int ndevs;
  int devs[8];
} mrcNcclVDeviceProps_v12;

typedef struct { /* v12, 128 bytes */
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
  mrcNcclNetDeviceType netDeviceType;
  int netDeviceVersion;
  mrcNcclVDeviceProps_v12 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;  /* MRC_NCCL_ID_UNDEF */
  int16_t planeId; /* MRC_NCCL_ID_UNDEF: all planes sit behind the one device */
} mrcNcclProps_v12;

/* v10+: per-connection config (v10: at connect; v11+: at init). */
typedef struct {
  int trafficClass; /* -1: undefined */
} mrcNcclCommConfig;

/* v11+: hints about the communicator's traffic. */
typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} mrcNcclCommAttr;
typedef struct {
  mrcNcclCommAttr sendCommAttr;
  mrcNcclCommAttr recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} mrcNcclNetAttr;

/* ---- Function tables ------------------------------------------------------------------- */

typedef struct {
  const char* name;
  mrcNcclResult (*init)(mrcNcclLogger logFunction);
  mrcNcclResult (*devices)(int* ndev);
  mrcNcclResult (*getProperties)(int dev, mrcNcclProps_v6* props);
  mrcNcclResult (*listen)(int dev, void* handle, void** listenComm);
  mrcNcclResult (*connect)(int dev, void* handle, void** sendComm);
  mrcNcclResult (*accept)(void* listenComm, void** recvComm);
  mrcNcclResult (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  mrcNcclResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle);
  mrcNcclResult (*deregMr)(void* comm, void* mhandle);
  mrcNcclResult (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle,
                         void** request);
  mrcNcclResult (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                         void** request);
  mrcNcclResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                          void** request);
  mrcNcclResult (*test)(void* request, int* done, int* sizes);
  mrcNcclResult (*closeSend)(void* sendComm);
  mrcNcclResult (*closeRecv)(void* recvComm);
  mrcNcclResult (*closeListen)(void* listenComm);
} mrcNcclNet_v6;

typedef struct {
  const char* name;
  mrcNcclResult (*init)(mrcNcclLogger logFunction);
  mrcNcclResult (*devices)(int* ndev);
  mrcNcclResult (*getProperties)(int dev, mrcNcclProps_v7* props);
  mrcNcclResult (*listen)(int dev, void* handle, void** listenComm);
  mrcNcclResult (*connect)(int dev, void* handle, void** sendComm,
                           mrcNcclNetDeviceHandle** sendDevComm);
  mrcNcclResult (*accept)(void* listenComm, void** recvComm, mrcNcclNetDeviceHandle** recvDevComm);
  mrcNcclResult (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  mrcNcclResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle);
  mrcNcclResult (*deregMr)(void* comm, void* mhandle);
  mrcNcclResult (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle,
                         void** request);
  mrcNcclResult (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                         void** request);
  mrcNcclResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                          void** request);
  mrcNcclResult (*test)(void* request, int* done, int* sizes);
  mrcNcclResult (*closeSend)(void* sendComm);
  mrcNcclResult (*closeRecv)(void* recvComm);
  mrcNcclResult (*closeListen)(void* listenComm);
  mrcNcclResult (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  mrcNcclResult (*irecvConsumed)(void* recvComm, int n, void* request);
} mrcNcclNet_v7;

typedef struct { /* v8: regMr takes size_t */
  const char* name;
  mrcNcclResult (*init)(mrcNcclLogger logFunction);
  mrcNcclResult (*devices)(int* ndev);
  mrcNcclResult (*getProperties)(int dev, mrcNcclProps_v8* props);
  mrcNcclResult (*listen)(int dev, void* handle, void** listenComm);
  mrcNcclResult (*connect)(int dev, void* handle, void** sendComm,
                           mrcNcclNetDeviceHandle** sendDevComm);
  mrcNcclResult (*accept)(void* listenComm, void** recvComm, mrcNcclNetDeviceHandle** recvDevComm);
  mrcNcclResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  mrcNcclResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle);
  mrcNcclResult (*deregMr)(void* comm, void* mhandle);
  mrcNcclResult (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle,
                         void** request);
  mrcNcclResult (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                         void** request);
  mrcNcclResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                          void** request);
  mrcNcclResult (*test)(void* request, int* done, int* sizes);
  mrcNcclResult (*closeSend)(void* sendComm);
  mrcNcclResult (*closeRecv)(void* recvComm);
  mrcNcclResult (*closeListen)(void* listenComm);
  mrcNcclResult (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  mrcNcclResult (*irecvConsumed)(void* recvComm, int n, void* request);
} mrcNcclNet_v8;

typedef struct { /* v9: send/receive sizes become size_t; makeVDevice */
  const char* name;
  mrcNcclResult (*init)(mrcNcclLogger logFunction);
  mrcNcclResult (*devices)(int* ndev);
  mrcNcclResult (*getProperties)(int dev, mrcNcclProps_v9* props);
  mrcNcclResult (*listen)(int dev, void* handle, void** listenComm);
  mrcNcclResult (*connect)(int dev, void* handle, void** sendComm,
                           mrcNcclNetDeviceHandle** sendDevComm);
  mrcNcclResult (*accept)(void* listenComm, void** recvComm, mrcNcclNetDeviceHandle** recvDevComm);
  mrcNcclResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  mrcNcclResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle);
  mrcNcclResult (*deregMr)(void* comm, void* mhandle);
  mrcNcclResult (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                         void** request);
  mrcNcclResult (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                         void** mhandles, void** request);
  mrcNcclResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                          void** request);
  mrcNcclResult (*test)(void* request, int* done, int* sizes);
  mrcNcclResult (*closeSend)(void* sendComm);
  mrcNcclResult (*closeRecv)(void* recvComm);
  mrcNcclResult (*closeListen)(void* listenComm);
  mrcNcclResult (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  mrcNcclResult (*irecvConsumed)(void* recvComm, int n, void* request);
  mrcNcclResult (*makeVDevice)(int* d, mrcNcclVDeviceProps_v9* props);
} mrcNcclNet_v9;

typedef struct { /* v10: profiler callback at init, config at connect, phandles */
  const char* name;
  mrcNcclResult (*init)(mrcNcclLogger logFunction, mrcNcclProfilerCallback profFunction);
  mrcNcclResult (*devices)(int* ndev);
  mrcNcclResult (*getProperties)(int dev, mrcNcclProps_v9* props);
  mrcNcclResult (*listen)(int dev, void* handle, void** listenComm);
  mrcNcclResult (*connect)(int dev, mrcNcclCommConfig* config, void* handle, void** sendComm,
                           mrcNcclNetDeviceHandle** sendDevComm);
  mrcNcclResult (*accept)(void* listenComm, void** recvComm, mrcNcclNetDeviceHandle** recvDevComm);
  mrcNcclResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  mrcNcclResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle);
  mrcNcclResult (*deregMr)(void* comm, void* mhandle);
  mrcNcclResult (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                         void* phandle, void** request);
  mrcNcclResult (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                         void** mhandles, void** phandles, void** request);
  mrcNcclResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                          void** request);
  mrcNcclResult (*test)(void* request, int* done, int* sizes);
  mrcNcclResult (*closeSend)(void* sendComm);
  mrcNcclResult (*closeRecv)(void* recvComm);
  mrcNcclResult (*closeListen)(void* listenComm);
  mrcNcclResult (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  mrcNcclResult (*irecvConsumed)(void* recvComm, int n, void* request);
  mrcNcclResult (*makeVDevice)(int* d, mrcNcclVDeviceProps_v9* props);
} mrcNcclNet_v10;

typedef struct { /* v11: a context per communicator (init/finalize), setNetAttr */
  const char* name;
  mrcNcclResult (*init)(void** ctx, uint64_t commId, mrcNcclCommConfig* config,
                        mrcNcclLogger logFunction, mrcNcclProfilerCallback profFunction);
  mrcNcclResult (*devices)(int* ndev);
  mrcNcclResult (*getProperties)(int dev, mrcNcclProps_v11* props);
  mrcNcclResult (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  mrcNcclResult (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                           mrcNcclNetDeviceHandle** sendDevComm);
  mrcNcclResult (*accept)(void* listenComm, void** recvComm, mrcNcclNetDeviceHandle** recvDevComm);
  mrcNcclResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  mrcNcclResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle);
  mrcNcclResult (*deregMr)(void* comm, void* mhandle);
  mrcNcclResult (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                         void* phandle, void** request);
  mrcNcclResult (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                         void** mhandles, void** phandles, void** request);
  mrcNcclResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                          void** request);
  mrcNcclResult (*test)(void* request, int* done, int* sizes);
  mrcNcclResult (*closeSend)(void* sendComm);
  mrcNcclResult (*closeRecv)(void* recvComm);
  mrcNcclResult (*closeListen)(void* listenComm);
  mrcNcclResult (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  mrcNcclResult (*irecvConsumed)(void* recvComm, int n, void* request);
  mrcNcclResult (*makeVDevice)(int* d, mrcNcclVDeviceProps_v9* props);
  mrcNcclResult (*finalize)(void* ctx);
  mrcNcclResult (*setNetAttr)(void* ctx, mrcNcclNetAttr* netAttr);
} mrcNcclNet_v11;

typedef struct { /* v12: v11's functions with the v12 properties and virtual device */
  const char* name;
  mrcNcclResult (*init)(void** ctx, uint64_t commId, mrcNcclCommConfig* config,
                        mrcNcclLogger logFunction, mrcNcclProfilerCallback profFunction);
  mrcNcclResult (*devices)(int* ndev);
  mrcNcclResult (*getProperties)(int dev, mrcNcclProps_v12* props);
  mrcNcclResult (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  mrcNcclResult (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                           mrcNcclNetDeviceHandle** sendDevComm);
  mrcNcclResult (*accept)(void* listenComm, void** recvComm, mrcNcclNetDeviceHandle** recvDevComm);
  mrcNcclResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  mrcNcclResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle);
  mrcNcclResult (*deregMr)(void* comm, void* mhandle);
  mrcNcclResult (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                         void* phandle, void** request);
  mrcNcclResult (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                         void** mhandles, void** phandles, void** request);
  mrcNcclResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                          void** request);
  mrcNcclResult (*test)(void* request, int* done, int* sizes);
  mrcNcclResult (*closeSend)(void* sendComm);
  mrcNcclResult (*closeRecv)(void* recvComm);
  mrcNcclResult (*closeListen)(void* listenComm);
  mrcNcclResult (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  mrcNcclResult (*irecvConsumed)(void* recvComm, int n, void* request);
  mrcNcclResult (*makeVDevice)(int* d, mrcNcclVDeviceProps_v12* props);
  mrcNcclResult (*finalize)(void* ctx);
  mrcNcclResult (*setNetAttr)(void* ctx, mrcNcclNetAttr* netAttr);
} mrcNcclNet_v12;

#ifdef __cplusplus
} /* extern "C" */

#include <cstddef>
#define MRC_NCCL_AT(T, f, off) static_assert(offsetof(T, f) == (off), #T "." #f " offset")
static_assert(sizeof(mrcNcclNetDeviceHandle) == 32);
static_assert(sizeof(mrcNcclProps_v6) == 48);
MRC_NCCL_AT(mrcNcclProps_v6, speed, 28);
MRC_NCCL_AT(mrcNcclProps_v6, maxRecvs, 44);
static_assert(sizeof(mrcNcclProps_v7) == 56);
MRC_NCCL_AT(mrcNcclProps_v7, netDeviceType, 48);
static_assert(sizeof(mrcNcclProps_v8) == 64);
MRC_NCCL_AT(mrcNcclProps_v8, regIsGlobal, 28);
MRC_NCCL_AT(mrcNcclProps_v8, netDeviceVersion, 56);
static_assert(sizeof(mrcNcclProps_v9) == 104);
MRC_NCCL_AT(mrcNcclProps_v9, forceFlush, 32);
MRC_NCCL_AT(mrcNcclProps_v9, speed, 36);
MRC_NCCL_AT(mrcNcclProps_v9, vProps, 64);
MRC_NCCL_AT(mrcNcclProps_v9, maxP2pBytes, 88);
MRC_NCCL_AT(mrcNcclProps_v9, maxCollBytes, 96);
static_assert(sizeof(mrcNcclProps_v11) == 112);
MRC_NCCL_AT(mrcNcclProps_v11, maxMultiRequestSize, 104);
static_assert(sizeof(mrcNcclProps_v12) == 128);
MRC_NCCL_AT(mrcNcclProps_v12, maxP2pBytes, 104);
MRC_NCCL_AT(mrcNcclProps_v12, maxMultiRequestSize, 120);
MRC_NCCL_AT(mrcNcclProps_v12, railId, 124);
MRC_NCCL_AT(mrcNcclProps_v12, planeId, 126);
static_assert(sizeof(mrcNcclNet_v6) == 17 * sizeof(void*));
static_assert(sizeof(mrcNcclNet_v7) == 19 * sizeof(void*));
static_assert(sizeof(mrcNcclNet_v9) == 20 * sizeof(void*));
static_assert(sizeof(mrcNcclNet_v11) == 22 * sizeof(void*));
static_assert(sizeof(mrcNcclNet_v12) == 22 * sizeof(void*));
#undef MRC_NCCL_AT
#endif
