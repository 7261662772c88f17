// The exported tables ncclNetPlugin_v6 .. ncclNetPlugin_v12: thin adapters over net.h, one
// per ABI version (argument types differ; the work does not). The one place where errors
// become ncclResult_t (with a WARN line naming the call and the cause).
// Threading: as net.h.
//
// makeVDevice is NULL in every table: one MRC device already carries all of a NIC's planes,
// and NCCL uses physical devices when a plugin offers no virtual ones. iflush is never called
// for host memory; it completes at once. getDeviceMr and irecvConsumed have nothing to do for
// host memory and a HOST device type.
#include <cstring>

#include "net.h"

namespace {

using namespace mrc::nccl;
using mrc::Err;

mrcNcclResult report(const char* call, const NetStatus& s) {
  if (s.ok()) return mrcNcclSuccess;
  log(mrcNcclLogWarn, std::string(call) + ": " + s.error().what);
  return static_cast<mrcNcclResult>(s.error().code);
}

mrcNcclResult init_abi(mrcNcclLogger logger, int abi) {
  auto st = init(logger);
  if (st.ok()) log(mrcNcclLogInfo, "using ncclNetPlugin_v" + std::to_string(abi));
  return report("init", st);
}

mrcNcclResult devices(int* n) {
  *n = device_count();
  return mrcNcclSuccess;
}

template <class P>
mrcNcclResult get_properties(int dev, P* out) {
  auto p = properties(dev);
  if (!p.ok()) return report("getProperties", NetStatus(Err(p.error())));
  std::memset(out, 0, sizeof *out);
  out->name = const_cast<char*>(p->name);
  out->pciPath = nullptr;  // a virtual NIC
  out->guid = p->guid;
  out->ptrSupport = MRC_NCCL_PTR_HOST;
  out->speed = p->speed_mbps;
  out->port = 0;
  out->latency = p->latency_us;
  out->maxComms = p->max_comms;
  out->maxRecvs = p->max_recvs;
  if constexpr (requires { out->netDeviceType; }) {
    out->netDeviceType = mrcNcclNetDeviceHost;
    out->netDeviceVersion = 0;
  }
  if constexpr (requires { out->vProps; }) {
    out->vProps.ndevs = 1;
    out->vProps.devs[0] = dev;
    out->maxP2pBytes = p->max_p2p_bytes;
    out->maxCollBytes = p->max_coll_bytes;
  }
  if constexpr (requires { out->maxMultiRequestSize; }) out->maxMultiRequestSize = 1;
  if constexpr (requires { out->railId; }) {
    out->railId = MRC_NCCL_ID_UNDEF;
    out->planeId = MRC_NCCL_ID_UNDEF;
  }
  return mrcNcclSuccess;
}

mrcNcclResult listen_dev(int dev, void* handle, void** comm) {
  return report("listen", listen(dev, handle, reinterpret_cast<ListenComm**>(comm)));
}
mrcNcclResult listen_ctx(void*, int dev, void* handle, void** comm) {
  return listen_dev(dev, handle, comm);
}

mrcNcclResult connect_v6(int dev, void* handle, void** comm) {
  return report("connect", connect(dev, handle, reinterpret_cast<Comm**>(comm)));
}
mrcNcclResult connect_v7(int dev, void* handle, void** comm, mrcNcclNetDeviceHandle** dev_comm) {
  if (dev_comm) *dev_comm = nullptr;
  return connect_v6(dev, handle, comm);
}
mrcNcclResult connect_v10(int dev, mrcNcclCommConfig*, void* handle, void** comm,
                          mrcNcclNetDeviceHandle** dev_comm) {
  return connect_v7(dev, handle, comm, dev_comm);
}
mrcNcclResult connect_v11(void*, int dev, void* handle, void** comm,
                          mrcNcclNetDeviceHandle** dev_comm) {
  return connect_v7(dev, handle, comm, dev_comm);
}

mrcNcclResult accept_v6(void* l, void** comm) {
  return report("accept", accept(static_cast<ListenComm*>(l), reinterpret_cast<Comm**>(comm)));
}
mrcNcclResult accept_v7(void* l, void** comm, mrcNcclNetDeviceHandle** dev_comm) {
  if (dev_comm) *dev_comm = nullptr;
  return accept_v6(l, comm);
}

mrcNcclResult reg_mr_sz(void* comm, void* data, size_t size, int type, void** mh) {
  return report("regMr", reg_mr(static_cast<Comm*>(comm), data, size, type,
                                reinterpret_cast<MemHandle**>(mh)));
}
mrcNcclResult reg_mr_int(void* comm, void* data, int size, int type, void** mh) {
  if (size < 0)
    return report("regMr", NetStatus(Err(Failure{Code::kInvalidArgument, "negative size"})));
  return reg_mr_sz(comm, data, static_cast<size_t>(size), type, mh);
}
mrcNcclResult reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t, int,
                            void** mh) {
  return reg_mr_sz(comm, data, size, type, mh);  // host memory only, whatever the fd
}
mrcNcclResult dereg(void* comm, void* mh) {
  return report("deregMr", dereg_mr(static_cast<Comm*>(comm), static_cast<MemHandle*>(mh)));
}

mrcNcclResult isend_sz(void* comm, void* data, size_t size, int tag, void* mh, void** req) {
  return report("isend", isend(static_cast<Comm*>(comm), data, size, tag,
                               static_cast<MemHandle*>(mh), reinterpret_cast<Request**>(req)));
}
mrcNcclResult isend_int(void* comm, void* data, int size, int tag, void* mh, void** req) {
  if (size < 0)
    return report("isend", NetStatus(Err(Failure{Code::kInvalidArgument, "negative size"})));
  return isend_sz(comm, data, static_cast<size_t>(size), tag, mh, req);
}
mrcNcclResult isend_v10(void* comm, void* data, size_t size, int tag, void* mh, void*, void** req) {
  return isend_sz(comm, data, size, tag, mh, req);
}

mrcNcclResult irecv_sz(void* comm, int n, void** data, size_t* sizes, int* tags, void** mh,
                       void** req) {
  return report("irecv",
                irecv(static_cast<Comm*>(comm), n, data, sizes, tags,
                      reinterpret_cast<MemHandle**>(mh), reinterpret_cast<Request**>(req)));
}
mrcNcclResult irecv_int(void* comm, int n, void** data, int* sizes, int* tags, void** mh,
                        void** req) {
  if (n < 1 || n > kMaxRecvs)
    return report("irecv",
                  NetStatus(Err(Failure{Code::kInvalidArgument, std::to_string(n) + " buffers"})));
  size_t s[kMaxRecvs];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0)
      return report("irecv", NetStatus(Err(Failure{Code::kInvalidArgument, "negative size"})));
    s[i] = static_cast<size_t>(sizes[i]);
  }
  return irecv_sz(comm, n, data, s, tags, mh, req);
}
mrcNcclResult irecv_v10(void* comm, int n, void** data, size_t* sizes, int* tags, void** mh, void**,
                        void** req) {
  return irecv_sz(comm, n, data, sizes, tags, mh, req);
}

mrcNcclResult iflush(void*, int, void**, int*, void**, void** req) {
  *req = nullptr;  // host memory: nothing to flush
  return mrcNcclSuccess;
}
mrcNcclResult test_req(void* req, int* done, int* sizes) {
  return report("test", test(static_cast<Request*>(req), done, sizes));
}
mrcNcclResult close_s(void* c) { return report("closeSend", close_send(static_cast<Comm*>(c))); }
mrcNcclResult close_r(void* c) { return report("closeRecv", close_recv(static_cast<Comm*>(c))); }
mrcNcclResult close_l(void* l) {
  return report("closeListen", close_listen(static_cast<ListenComm*>(l)));
}
mrcNcclResult get_device_mr(void*, void*, void** dptr) {
  *dptr = nullptr;
  return mrcNcclSuccess;
}
mrcNcclResult irecv_consumed(void*, int, void*) { return mrcNcclSuccess; }

// v11+: a context per communicator; every init is matched by a finalize.
struct Ctx {
  uint64_t comm_id;
  int traffic_class;
};
template <int V>
mrcNcclResult init_ctx(void** ctx, uint64_t comm_id, mrcNcclCommConfig* cfg, mrcNcclLogger logger,
                       mrcNcclProfilerCallback) {
  *ctx = nullptr;
  if (auto r = init_abi(logger, V); r != mrcNcclSuccess) return r;
  *ctx = new Ctx{comm_id, cfg ? cfg->trafficClass : -1};
  return mrcNcclSuccess;
}
mrcNcclResult finalize_ctx(void* ctx) {
  delete static_cast<Ctx*>(ctx);
  finalize();
  return mrcNcclSuccess;
}
mrcNcclResult set_net_attr(void*, mrcNcclNetAttr*) { return mrcNcclSuccess; }

}  // namespace

extern "C" {

__attribute__((visibility("default")))
mrcNcclNet_v6 ncclNetPlugin_v6 = {kPluginName,   [](mrcNcclLogger l) { return init_abi(l, 6); },
                                  devices,       get_properties<mrcNcclProps_v6>,
                                  listen_dev,    connect_v6,
                                  accept_v6,     reg_mr_int,
                                  reg_mr_dmabuf, dereg,
                                  isend_int,     irecv_int,
                                  iflush,        test_req,
                                  close_s,       close_r,
                                  close_l};

__attribute__((visibility("default")))
mrcNcclNet_v7 ncclNetPlugin_v7 = {kPluginName,   [](mrcNcclLogger l) { return init_abi(l, 7); },
                                  devices,       get_properties<mrcNcclProps_v7>,
                                  listen_dev,    connect_v7,
                                  accept_v7,     reg_mr_int,
                                  reg_mr_dmabuf, dereg,
                                  isend_int,     irecv_int,
                                  iflush,        test_req,
                                  close_s,       close_r,
                                  close_l,       get_device_mr,
                                  irecv_consumed};

__attribute__((visibility("default")))
mrcNcclNet_v8 ncclNetPlugin_v8 = {kPluginName,   [](mrcNcclLogger l) { return init_abi(l, 8); },
                                  devices,       get_properties<mrcNcclProps_v8>,
                                  listen_dev,    connect_v7,
                                  accept_v7,     reg_mr_sz,
                                  reg_mr_dmabuf, dereg,
                                  isend_int,     irecv_int,
                                  iflush,        test_req,
                                  close_s,       close_r,
                                  close_l,       get_device_mr,
                                  irecv_consumed};

__attribute__((visibility("default")))
mrcNcclNet_v9 ncclNetPlugin_v9 = {kPluginName,    [](mrcNcclLogger l) { return init_abi(l, 9); },
                                  devices,        get_properties<mrcNcclProps_v9>,
                                  listen_dev,     connect_v7,
                                  accept_v7,      reg_mr_sz,
                                  reg_mr_dmabuf,  dereg,
                                  isend_sz,       irecv_sz,
                                  iflush,         test_req,
                                  close_s,        close_r,
                                  close_l,        get_device_mr,
                                  irecv_consumed, nullptr};

__attribute__((visibility("default"))) mrcNcclNet_v10 ncclNetPlugin_v10 = {
    kPluginName,    [](mrcNcclLogger l, mrcNcclProfilerCallback) { return init_abi(l, 10); },
    devices,        get_properties<mrcNcclProps_v9>,
    listen_dev,     connect_v10,
    accept_v7,      reg_mr_sz,
    reg_mr_dmabuf,  dereg,
    isend_v10,      irecv_v10,
    iflush,         test_req,
    close_s,        close_r,
    close_l,        get_device_mr,
    irecv_consumed, nullptr};

__attribute__((visibility("default"))) mrcNcclNet_v11 ncclNetPlugin_v11 = {
    kPluginName,   init_ctx<11>,  devices,        get_properties<mrcNcclProps_v11>,
    listen_ctx,    connect_v11,   accept_v7,      reg_mr_sz,
    reg_mr_dmabuf, dereg,         isend_v10,      irecv_v10,
    iflush,        test_req,      close_s,        close_r,
    close_l,       get_device_mr, irecv_consumed, nullptr,
    finalize_ctx,  set_net_attr};

__attribute__((visibility("default"))) mrcNcclNet_v12 ncclNetPlugin_v12 = {
    kPluginName,   init_ctx<12>,  devices,        get_properties<mrcNcclProps_v12>,
    listen_ctx,    connect_v11,   accept_v7,      reg_mr_sz,
    reg_mr_dmabuf, dereg,         isend_v10,      irecv_v10,
    iflush,        test_req,      close_s,        close_r,
    close_l,       get_device_mr, irecv_consumed, nullptr,
    finalize_ctx,  set_net_attr};

}  // extern "C"
