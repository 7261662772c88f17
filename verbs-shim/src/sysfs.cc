// The shim's answer to programs that read mrc0's sysfs entries (UCX, rdma-core's tests, NCCL's
// IB transport): it interposes the libc calls that take a path (open, fopen, stat and its
// variants, statx, access, getxattr and listxattr, opendir, readlink, realpath) and sends paths
// that name mrc0's tree to a private copy of it (mrc/verbs/sysfs.h), written at the first
// such call into /dev/shm/mrc-sysfs.<pid>.XXXXXX and removed at exit. Every other path goes to libc
// unchanged, as do relative paths (a program that chdirs into /sys is not served). Threading: any
// thread; the copy is made once per process (a forked child makes its own) under a mutex.
//
// The names are the ones glibc 2.36 programs import (stat, fstatat, statx are functions there;
// __xstat and friends are what programs built against older glibc call).
#undef _FORTIFY_SOURCE
#include "mrc/verbs/sysfs.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>


namespace v = mrc::verbs;

namespace {

template <class F>
F* next(const char* name) {
  return reinterpret_cast<F*>(::dlsym(RTLD_NEXT, name));
}
#define NEXT(fn)                                \
  ([] {                                         \
    static auto* f = next<decltype(::fn)>(#fn); \
    return f;                                   \
  }())

// The process's copy of the tree; made by the first call that names it.
struct Copy {
  std::mutex mu;
  pid_t pid = 0;     // the process that made root (a forked child makes its own)
  std::string root;  // empty: not made, or the device or the copy failed (paths left alone)
  bool failed = false;
};
Copy& copy() {
  static Copy* c = new Copy;  // never freed: interposed calls may come during exit
  return *c;
}

int remove_one(const char* p, const struct stat*, int, FTW*) { return ::remove(p); }

void remove_tree(const std::string& root) {
  ::nftw(root.c_str(), remove_one, 8, FTW_DEPTH | FTW_PHYS);
}

void remove_at_exit() {
  Copy& c = copy();
  std::lock_guard lock(c.mu);
  if (!c.root.empty() && c.pid == ::getpid()) remove_tree(c.root);
  c.root.clear();
}

// Copies left by processes that died without exiting (killed): removed by the next one.
void remove_stale(const char* dir) {
  DIR* d = ::opendir(dir);
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    int pid = 0;
    if (std::sscanf(e->d_name, "mrc-sysfs.%d.", &pid) != 1 || pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    remove_tree(std::string(dir) + "/" + e->d_name);
  }
  ::closedir(d);
}

// The copy's root for this process, made on first use; empty if there is none.
void log_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char* fmt, ...) {  // as the verbs device logs: one line, named
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "mrc-verbs: %s\n", line);
}

std::string root_for() {
  Copy& c = copy();
  std::lock_guard lock(c.mu);
  const pid_t pid = ::getpid();
  if (c.pid != pid) {
    c.pid = pid;
    c.root.clear();
    c.failed = false;
  }
  if (!c.root.empty() || c.failed) return c.root;
  const char* base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  remove_stale(base);
  std::string tmpl = std::string(base) + "/mrc-sysfs." + std::to_string(pid) + ".XXXXXX";
  if (!::mkdtemp(tmpl.data())) {
    log_error("mrc0's sysfs tree: mkdtemp %s: %s", tmpl.c_str(), std::strerror(errno));
    c.failed = true;
    return {};
  }
  if (const int err = v::write_sysfs_tree(tmpl, v::open_device_tree())) {
    log_error("mrc0's sysfs tree: writing %s: %s", tmpl.c_str(), std::strerror(err));
    remove_tree(tmpl);
    c.failed = true;
    return {};
  }
  static bool registered = (std::atexit(remove_at_exit), true);
  (void)registered;
  c.root = tmpl;
  return c.root;
}

bool may_name_tree(const char* p) {
  return p && (std::strncmp(p, "/sys/class/infiniband", 21) == 0 ||
               std::strncmp(p, "/sys/devices/virtual/mrc", 24) == 0 ||
               std::strncmp(p, "/dev/infiniband/", 16) == 0);
}

// `p`, or where the tree's copy holds it (in `buf`).
const char* redirect(const char* p, std::string& buf) {
  if (!may_name_tree(p)) return p;  // before anything else: most calls stop here
  std::string name, uverbs;
  if (!v::open_device_names(&name, &uverbs)) return p;
  const std::string root = root_for();
  if (root.empty()) return p;
  buf = v::sysfs_redirect(p, root, name, uverbs);
  return buf.empty() ? p : buf.c_str();
}

mode_t mode_arg(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

}  // namespace

extern "C" {

int open(const char* p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t m = mode_arg(flags, ap);
  va_end(ap);
  std::string b;
  return NEXT(open)(redirect(p, b), flags, m);
}

int open64(const char* p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t m = mode_arg(flags, ap);
  va_end(ap);
  std::string b;
  return NEXT(open64)(redirect(p, b), flags, m);
}

int openat(int dirfd, const char* p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t m = mode_arg(flags, ap);
  va_end(ap);
  std::string b;
  return NEXT(openat)(dirfd, redirect(p, b), flags, m);
}

int openat64(int dirfd, const char* p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t m = mode_arg(flags, ap);
  va_end(ap);
  std::string b;
  return NEXT(openat64)(dirfd, redirect(p, b), flags, m);
}

// The _FORTIFY_SOURCE entry points (no mode: O_CREAT is refused there).
int __open_2(const char* p, int flags) { return open(p, flags); }
int __open64_2(const char* p, int flags) { return open64(p, flags); }
int __openat_2(int dirfd, const char* p, int flags) { return openat(dirfd, p, flags); }
int __openat64_2(int dirfd, const char* p, int flags) { return openat64(dirfd, p, flags); }

FILE* fopen(const char* p, const char* mode) {
  std::string b;
  return NEXT(fopen)(redirect(p, b), mode);
}

FILE* fopen64(const char* p, const char* mode) {
  std::string b;
  return NEXT(fopen64)(redirect(p, b), mode);
}

int stat(const char* p, struct stat* s) noexcept {
  std::string b;
  return NEXT(stat)(redirect(p, b), s);
}

int stat64(const char* p, struct stat64* s) noexcept {
  std::string b;
  return NEXT(stat64)(redirect(p, b), s);
}

int lstat(const char* p, struct stat* s) noexcept {
  std::string b;
  return NEXT(lstat)(redirect(p, b), s);
}

int lstat64(const char* p, struct stat64* s) noexcept {
  std::string b;
  return NEXT(lstat64)(redirect(p, b), s);
}

int fstatat(int dirfd, const char* p, struct stat* s, int flags) noexcept {
  std::string b;
  return NEXT(fstatat)(dirfd, redirect(p, b), s, flags);
}

int fstatat64(int dirfd, const char* p, struct stat64* s, int flags) noexcept {
  std::string b;
  return NEXT(fstatat64)(dirfd, redirect(p, b), s, flags);
}

// glibc < 2.33 programs' names (x86-64: one struct stat layout, whatever `ver` says).
int __xstat(int, const char* p, struct stat* s) noexcept { return stat(p, s); }
int __xstat64(int, const char* p, struct stat64* s) noexcept { return stat64(p, s); }
int __lxstat(int, const char* p, struct stat* s) noexcept { return lstat(p, s); }
int __lxstat64(int, const char* p, struct stat64* s) noexcept { return lstat64(p, s); }
int __fxstatat(int, int dirfd, const char* p, struct stat* s, int flags) noexcept {
  return fstatat(dirfd, p, s, flags);
}
int __fxstatat64(int, int dirfd, const char* p, struct stat64* s, int flags) noexcept {
  return fstatat64(dirfd, p, s, flags);
}

int statx(int dirfd, const char* p, int flags, unsigned mask, struct statx* s) noexcept {
  std::string b;
  return NEXT(statx)(dirfd, redirect(p, b), flags, mask, s);
}

int access(const char* p, int mode) noexcept {
  std::string b;
  return NEXT(access)(redirect(p, b), mode);
}

int faccessat(int dirfd, const char* p, int mode, int flags) noexcept {
  std::string b;
  return NEXT(faccessat)(dirfd, redirect(p, b), mode, flags);
}

// ls -l asks every entry for its security label.
ssize_t getxattr(const char* p, const char* name, void* v, size_t n) noexcept {
  std::string b;
  return NEXT(getxattr)(redirect(p, b), name, v, n);
}

ssize_t lgetxattr(const char* p, const char* name, void* v, size_t n) noexcept {
  std::string b;
  return NEXT(lgetxattr)(redirect(p, b), name, v, n);
}

ssize_t listxattr(const char* p, char* list, size_t n) noexcept {
  std::string b;
  return NEXT(listxattr)(redirect(p, b), list, n);
}

ssize_t llistxattr(const char* p, char* list, size_t n) noexcept {
  std::string b;
  return NEXT(llistxattr)(redirect(p, b), list, n);
}

DIR* opendir(const char* p) {
  std::string b;
  return NEXT(opendir)(redirect(p, b));
}

ssize_t readlink(const char* p, char* out, size_t n) noexcept {
  std::string b;
  return NEXT(readlink)(redirect(p, b), out, n);
}

ssize_t readlinkat(int dirfd, const char* p, char* out, size_t n) noexcept {
  std::string b;
  return NEXT(readlinkat)(dirfd, redirect(p, b), out, n);
}

ssize_t __readlink_chk(const char* p, char* out, size_t n, size_t) noexcept {
  return readlink(p, out, n);
}

ssize_t __readlinkat_chk(int dirfd, const char* p, char* out, size_t n, size_t) noexcept {
  return readlinkat(dirfd, p, out, n);
}

// The copy's resolved path, said under /sys again (and the device node as its own name).
char* realpath(const char* p, char* out) noexcept {
  std::string b;
  const char* r = redirect(p, b);
  if (r == p) return NEXT(realpath)(p, out);
  char* got = NEXT(realpath)(r, nullptr);
  if (!got) return nullptr;
  std::string root;
  {
    std::lock_guard lock(copy().mu);
    root = copy().root;
  }
  const std::string back = v::sysfs_unredirect(got, root, p);
  std::free(got);
  if (back.size() >= PATH_MAX) {
    errno = ENAMETOOLONG;
    return nullptr;
  }
  if (!out && !(out = static_cast<char*>(std::malloc(PATH_MAX)))) return nullptr;
  std::memcpy(out, back.c_str(), back.size() + 1);
  return out;
}

char* __realpath_chk(const char* p, char* out, size_t) noexcept { return realpath(p, out); }

char* canonicalize_file_name(const char* p) noexcept { return realpath(p, nullptr); }

}  // extern "C"
