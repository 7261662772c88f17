// Loads libnccl-net-mrc the way NCCL does (dlopen, the newest ncclNetPlugin_vN it exports from
// v12 down to v6, init with a logger) and offers one calling convention over every ABI version: for the conformance
// tests (tests/nccl) and the send/recv benchmark (perf/). Threading: one caller per Api.
#pragma once

#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nccl_net_abi.h"

namespace mrc::nccl::harness {

inline double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// WARN lines the plugin logged in this process (the logger NCCL would pass).
inline std::vector<std::string>& warnings() {
  static std::vector<std::string> w;
  return w;
}
inline void logger(mrcNcclLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (level == mrcNcclLogWarn) warnings().push_back(buf);
  if (std::getenv("MRC_TEST_VERBOSE")) std::fprintf(stderr, "[%d] %s\n", ::getpid(), buf);
}

/// One calling convention over every ABI version (sizes as size_t; v11+ contexts hidden).
struct Api {
  int version = 0;
  void* ctx = nullptr;
  std::function<int()> init, finalize;
  std::function<int(int*)> devices;
  std::function<int(int, void*, void**)> listen, connect;
  std::function<int(void*, void**)> accept;
  std::function<int(void*, void*, size_t, int, void**)> reg_mr;
  std::function<int(void*, void*)> dereg_mr;
  std::function<int(void*, void*, size_t, int, void*, void**)> isend;
  std::function<int(void*, int, void**, size_t*, int*, void**, void**)> irecv;
  std::function<int(void*, int*, int*)> test;
  std::function<int(void*)> close_send, close_recv, close_listen;
};

template <int V, class T>
Api make_api(T* t) {
  Api a;
  a.version = V;
  if constexpr (V >= 11) {
    auto ctx = std::make_shared<void*>(nullptr);
    a.init = [t, ctx] { return static_cast<int>(t->init(ctx.get(), 1, nullptr, logger, nullptr)); };
    a.finalize = [t, ctx] { return static_cast<int>(t->finalize(*ctx)); };
    a.listen = [t, ctx](int d, void* h, void** l) {
      return static_cast<int>(t->listen(*ctx, d, h, l));
    };
    a.connect = [t, ctx](int d, void* h, void** s) {
      mrcNcclNetDeviceHandle* dh = nullptr;
      return static_cast<int>(t->connect(*ctx, d, h, s, &dh));
    };
  } else {
    if constexpr (V >= 10)
      a.init = [t] { return static_cast<int>(t->init(logger, nullptr)); };
    else
      a.init = [t] { return static_cast<int>(t->init(logger)); };
    a.finalize = [] { return 0; };
    a.listen = [t](int d, void* h, void** l) { return static_cast<int>(t->listen(d, h, l)); };
    if constexpr (V >= 10) {
      a.connect = [t](int d, void* h, void** s) {
        mrcNcclNetDeviceHandle* dh = nullptr;
        mrcNcclCommConfig cfg{-1};
        return static_cast<int>(t->connect(d, &cfg, h, s, &dh));
      };
    } else if constexpr (V >= 7) {
      a.connect = [t](int d, void* h, void** s) {
        mrcNcclNetDeviceHandle* dh = nullptr;
        return static_cast<int>(t->connect(d, h, s, &dh));
      };
    } else {
      a.connect = [t](int d, void* h, void** s) { return static_cast<int>(t->connect(d, h, s)); };
    }
  }
  a.devices = [t](int* n) { return static_cast<int>(t->devices(n)); };
  if constexpr (V >= 7) {
    a.accept = [t](void* l, void** r) {
      mrcNcclNetDeviceHandle* dh = nullptr;
      return static_cast<int>(t->accept(l, r, &dh));
    };
  } else {
    a.accept = [t](void* l, void** r) { return static_cast<int>(t->accept(l, r)); };
  }
  if constexpr (V >= 8) {
    a.reg_mr = [t](void* c, void* d, size_t n, int ty, void** m) {
      return static_cast<int>(t->regMr(c, d, n, ty, m));
    };
  } else {
    a.reg_mr = [t](void* c, void* d, size_t n, int ty, void** m) {
      return static_cast<int>(t->regMr(c, d, static_cast<int>(n), ty, m));
    };
  }
  a.dereg_mr = [t](void* c, void* m) { return static_cast<int>(t->deregMr(c, m)); };
  if constexpr (V >= 10) {
    a.isend = [t](void* c, void* d, size_t n, int tag, void* m, void** r) {
      return static_cast<int>(t->isend(c, d, n, tag, m, nullptr, r));
    };
    a.irecv = [t](void* c, int n, void** d, size_t* s, int* tags, void** m, void** r) {
      void* ph[8] = {};
      return static_cast<int>(t->irecv(c, n, d, s, tags, m, ph, r));
    };
  } else if constexpr (V >= 9) {
    a.isend = [t](void* c, void* d, size_t n, int tag, void* m, void** r) {
      return static_cast<int>(t->isend(c, d, n, tag, m, r));
    };
    a.irecv = [t](void* c, int n, void** d, size_t* s, int* tags, void** m, void** r) {
      return static_cast<int>(t->irecv(c, n, d, s, tags, m, r));
    };
  } else {
    a.isend = [t](void* c, void* d, size_t n, int tag, void* m, void** r) {
      return static_cast<int>(t->isend(c, d, static_cast<int>(n), tag, m, r));
    };
    a.irecv = [t](void* c, int n, void** d, size_t* s, int* tags, void** m, void** r) {
      int is[8];
      for (int i = 0; i < n && i < 8; ++i) is[i] = static_cast<int>(s[i]);
      return static_cast<int>(t->irecv(c, n, d, is, tags, m, r));
    };
  }
  a.test = [t](void* r, int* done, int* sizes) {
    return static_cast<int>(t->test(r, done, sizes));
  };
  a.close_send = [t](void* c) { return static_cast<int>(t->closeSend(c)); };
  a.close_recv = [t](void* c) { return static_cast<int>(t->closeRecv(c)); };
  a.close_listen = [t](void* c) { return static_cast<int>(t->closeListen(c)); };
  return a;
}

/// The ABI versions NCCL knows, newest first when it looks for a plugin's table.
constexpr int kNewestAbi = 12;
constexpr int kOldestAbi = 6;

/// An Api for a table the plugin does not export: every call fails with ncclInternalError
/// instead of calling through a null pointer; version 0.
inline Api missing_api() {
  constexpr int kFail = mrcNcclInternalError;
  Api a;
  a.init = a.finalize = [] { return kFail; };
  a.devices = [](int* n) {
    *n = 0;
    return kFail;
  };
  a.listen = a.connect = [](int, void*, void**) { return kFail; };
  a.accept = [](void*, void**) { return kFail; };
  a.reg_mr = [](void*, void*, size_t, int, void**) { return kFail; };
  a.dereg_mr = [](void*, void*) { return kFail; };
  a.isend = [](void*, void*, size_t, int, void*, void**) { return kFail; };
  a.irecv = [](void*, int, void**, size_t*, int*, void**, void**) { return kFail; };
  a.test = [](void*, int*, int*) { return kFail; };
  a.close_send = a.close_recv = a.close_listen = [](void*) { return kFail; };
  return a;
}

/// The plugin, dlopened as NCCL does (RTLD_NOW | RTLD_LOCAL).
struct Plugin {
#ifdef MRC_NCCL_PLUGIN_PATH
  static std::string default_path() { return MRC_NCCL_PLUGIN_PATH; }
#else
  static std::string default_path() { return "libnccl-net-mrc.so"; }
#endif
  void* lib = nullptr;
  std::string error;  // dlopen's error, or why no table was found
  explicit Plugin(const std::string& path = default_path()) {
    lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) error = ::dlerror();
  }
  ~Plugin() {
    if (lib) ::dlclose(lib);
  }
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;
  void* sym(int version) const {
    return lib ? ::dlsym(lib, ("ncclNetPlugin_v" + std::to_string(version)).c_str()) : nullptr;
  }
  /// The table of exactly `version`; missing_api() (version 0, `error` set) when the plugin
  /// does not export it.
  Api api(int version) {
    void* s = sym(version);
    if (!s) {
      error = lib ? "the plugin does not export ncclNetPlugin_v" + std::to_string(version) : error;
      return missing_api();
    }
    switch (version) {
      case 6:
        return make_api<6>(static_cast<mrcNcclNet_v6*>(s));
      case 7:
        return make_api<7>(static_cast<mrcNcclNet_v7*>(s));
      case 8:
        return make_api<8>(static_cast<mrcNcclNet_v8*>(s));
      case 9:
        return make_api<9>(static_cast<mrcNcclNet_v9*>(s));
      case 10:
        return make_api<10>(static_cast<mrcNcclNet_v10*>(s));
      case 11:
        return make_api<11>(static_cast<mrcNcclNet_v11*>(s));
      case 12:
        return make_api<12>(static_cast<mrcNcclNet_v12*>(s));
      default:
        error = "no ABI version " + std::to_string(version) + " (known: " +
                std::to_string(kOldestAbi) + ".." + std::to_string(kNewestAbi) + ")";
        return missing_api();
    }
  }
  /// As NCCL picks a plugin's table: the newest ncclNetPlugin_vN exported, looked up from
  /// kNewestAbi down to kOldestAbi. Its `version` says which; missing_api() with `error`
  /// naming the range when the plugin exports none of them.
  Api newest() {
    for (int v = kNewestAbi; v >= kOldestAbi; --v)
      if (sym(v)) return api(v);
    if (lib)
      error = "the plugin exports none of ncclNetPlugin_v" + std::to_string(kNewestAbi) +
              " .. _v" + std::to_string(kOldestAbi);
    return missing_api();
  }
};

// ---- Polling helpers: each returns "" on success, else what went wrong ----------------

using Handle = std::array<uint8_t, MRC_NCCL_NET_HANDLE_MAXSIZE>;

inline std::string wait_connect(Api& a, Handle h, void** comm, double timeout_s = 20) {
  const double end = now_s() + timeout_s;
  *comm = nullptr;
  while (!*comm) {
    if (int r = a.connect(0, h.data(), comm)) return "connect returned " + std::to_string(r);
    if (now_s() > end) return "connect: not ready after " + std::to_string(timeout_s) + " s";
  }
  return "";
}

inline std::string wait_accept(Api& a, void* listen, void** comm, double timeout_s = 20) {
  const double end = now_s() + timeout_s;
  *comm = nullptr;
  while (!*comm) {
    if (int r = a.accept(listen, comm)) return "accept returned " + std::to_string(r);
    if (now_s() > end) return "accept: not ready after " + std::to_string(timeout_s) + " s";
  }
  return "";
}

/// Polls test() until done; its result code (0 done, else the error), or -1 on timeout.
inline int wait_test(Api& a, void* req, int* sizes, double timeout_s = 60) {
  const double end = now_s() + timeout_s;
  for (;;) {
    int done = 0;
    if (int r = a.test(req, &done, sizes)) return r;
    if (done) return 0;
    if (now_s() > end) return -1;
  }
}

}  // namespace mrc::nccl::harness
