// Live-statistics segments: shm files, seqlock, stale removal (segment.h).
// Threading: see segment.h.
#include "mrc/observe/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace mrc::observe {

std::optional<uint64_t> process_start_time(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!f || !std::getline(f, line)) return std::nullopt;
  // comm (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return std::nullopt;
  }
  try {
    return std::stoull(field);
  } catch (...) {
    return std::nullopt;
  }
}

std::string segment_name(pid_t pid, uint32_t device) {
  return "/" + std::string(kShmPrefix) + std::to_string(pid) + "." + std::to_string(device);
}

// ---- writer ---------------------------------------------------------------------------------

Result<SegmentWriter, std::string> SegmentWriter::create(uint32_t device, uint32_t max_qps,
                                                         uint32_t max_evs, uint32_t events) {
  SegmentWriter w;
  w.name_ = segment_name(::getpid(), device);
  const Geometry g = geometry(max_qps, max_evs, events == 0 ? 1 : events);
  ::shm_unlink(w.name_.c_str());  // a leftover of an earlier process with our pid
  const int fd = ::shm_open(w.name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0) return Err("stats segment " + w.name_ + ": shm_open: " + std::strerror(errno));
  ::fchmod(fd, 0644);  // whatever the umask: readers need no privilege
  if (::ftruncate(fd, static_cast<off_t>(g.total)) != 0) {
    const std::string e = std::strerror(errno);
    ::close(fd);
    ::shm_unlink(w.name_.c_str());
    return Err("stats segment " + w.name_ + ": ftruncate: " + e);
  }
  void* p = ::mmap(nullptr, g.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(w.name_.c_str());
    return Err("stats segment " + w.name_ + ": mmap: " + std::strerror(errno));
  }
  w.base_ = static_cast<uint8_t*>(p);
  w.size_ = g.total;
  SegmentHeader& h = w.header();  // the file is zero-filled
  h.version = kLayoutVersion;
  h.header_size = sizeof(SegmentHeader);
  h.device_size = sizeof(DeviceRecord);
  h.qp_size = sizeof(QpRecord);
  h.ev_size = sizeof(EvRecord);
  h.event_size = sizeof(EventRecord);
  h.max_qps = max_qps;
  h.max_evs = max_evs;
  h.event_capacity = events == 0 ? 1 : events;
  h.pid = static_cast<uint32_t>(::getpid());
  h.start_time = process_start_time(::getpid()).value_or(0);
  h.total_size = g.total;
  h.device_off = g.device_off;
  h.qps_off = g.qps_off;
  h.evs_off = g.evs_off;
  h.events_off = g.events_off;
  h.seq.store(0, std::memory_order_relaxed);
  // The magic last: a reader that sees it sees a complete header.
  std::atomic_thread_fence(std::memory_order_release);
  h.magic = kMagic;
  return w;
}

SegmentWriter::SegmentWriter(SegmentWriter&& o) noexcept
    : base_(o.base_), size_(o.size_), name_(std::move(o.name_)) {
  o.base_ = nullptr;
  o.size_ = 0;
}

SegmentWriter& SegmentWriter::operator=(SegmentWriter&& o) noexcept {
  if (this != &o) {
    this->~SegmentWriter();
    new (this) SegmentWriter(std::move(o));
  }
  return *this;
}

SegmentWriter::~SegmentWriter() {
  if (base_ == nullptr) return;
  ::munmap(base_, size_);
  ::shm_unlink(name_.c_str());
  base_ = nullptr;
}

void SegmentWriter::begin() {
  SegmentHeader& h = header();
  const uint64_t s = h.seq.load(std::memory_order_relaxed);
  h.seq.store(s | 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // odd before any record changes
}

void SegmentWriter::commit(int64_t now) {
  SegmentHeader& h = header();
  ++h.generation;
  h.published_ns = now;
  const uint64_t s = h.seq.load(std::memory_order_relaxed);
  h.seq.store((s | 1) + 1, std::memory_order_release);  // records before the even value
}

void SegmentWriter::push_event(const EventRecord& e) {
  SegmentHeader& h = header();
  auto* ring = reinterpret_cast<EventRecord*>(base_ + h.events_off);
  ring[h.events_written % h.event_capacity] = e;
  ++h.events_written;
}

// ---- reader ---------------------------------------------------------------------------------

namespace {

struct Mapping {
  const uint8_t* base = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (base) ::munmap(const_cast<uint8_t*>(base), size);
  }
};

// The seqlock read: copies records the writer may be changing and keeps the copy only if
// `seq` did not move. A reader in the writer's own process (tests) races with it by design;
// TSan is told not to instrument this side.
__attribute__((no_sanitize("thread"))) Result<Snapshot, std::string> copy_out(
    const std::string& name, const uint8_t* base, size_t size) {
  if (size < sizeof(SegmentHeader)) return Err(name + ": too small for a stats segment");
  const auto* h = reinterpret_cast<const SegmentHeader*>(base);
  if (h->magic != kMagic) return Err(name + ": not a libmrc stats segment (bad magic)");
  std::atomic_thread_fence(std::memory_order_acquire);
  if (h->version != kLayoutVersion)
    return Err(name + ": layout version " + std::to_string(h->version) + ", this reader knows " +
               std::to_string(kLayoutVersion));
  // The geometry is read once: the mapping is the writer's (another user's process, maybe)
  // and may change under us; every offset below comes from these checked copies.
  const uint64_t device_off = h->device_off, qps_off = h->qps_off, evs_off = h->evs_off,
                 events_off = h->events_off;
  const uint32_t device_size = h->device_size, qp_size = h->qp_size, ev_size = h->ev_size,
                 event_size = h->event_size, max_qps = h->max_qps, max_evs = h->max_evs,
                 cap32 = h->event_capacity;
  auto fits = [size](uint64_t off, uint64_t count, uint64_t stride) {
    return off <= size && count * stride <= size - off;  // count, stride < 2^32: no overflow
  };
  // Strides may grow within a version (records only gain fields at their end); an older
  // writer's DeviceRecord may be shorter than ours (layout.h, kDeviceRecordMinSize).
  if (device_size < kDeviceRecordMinSize)
    return Err(name + ": device record of " + std::to_string(device_size) +
               " bytes, shorter than layout " + std::to_string(kLayoutVersion) + "'s first (" +
               std::to_string(kDeviceRecordMinSize) + ")");
  const size_t device_bytes = std::min<size_t>(device_size, sizeof(DeviceRecord));
  if (h->header_size < sizeof(SegmentHeader) ||
      qp_size < sizeof(QpRecord) || ev_size < sizeof(EvRecord) ||
      event_size < sizeof(EventRecord) || cap32 == 0 || h->total_size > size ||
      !fits(device_off, 1, device_size) || !fits(qps_off, max_qps, qp_size) ||
      !fits(evs_off, max_evs, ev_size) || !fits(events_off, cap32, event_size))
    return Err(name + ": inconsistent header (sizes do not fit the segment)");

  Snapshot s;
  s.name = name;
  for (int attempt = 0; attempt < 2000; ++attempt) {
    const uint64_t s1 = h->seq.load(std::memory_order_acquire);
    if (s1 & 1) {
      if (attempt > 50) std::this_thread::sleep_for(std::chrono::microseconds(50));
      continue;
    }
    s.pid = h->pid;
    s.start_time = h->start_time;
    s.generation = h->generation;
    s.published_ns = h->published_ns;
    s.qps_truncated = h->qps_truncated;
    s.evs_truncated = h->evs_truncated;
    const uint32_t nq = std::min(h->n_qps, max_qps);
    const uint32_t ne = std::min(h->n_evs, max_evs);
    s.device = DeviceRecord{};
    std::memcpy(&s.device, base + device_off, device_bytes);
    s.device_size = static_cast<uint32_t>(device_bytes);
    s.qps.resize(nq);
    for (uint32_t i = 0; i < nq; ++i)
      std::memcpy(&s.qps[i], base + qps_off + uint64_t{i} * qp_size, sizeof(QpRecord));
    s.evs.resize(ne);
    for (uint32_t i = 0; i < ne; ++i)
      std::memcpy(&s.evs[i], base + evs_off + uint64_t{i} * ev_size, sizeof(EvRecord));
    s.events_written = h->events_written;
    const uint64_t cap = cap32;
    s.first_event = s.events_written > cap ? s.events_written - cap : 0;
    s.events.resize(s.events_written - s.first_event);
    for (uint64_t i = s.first_event; i < s.events_written; ++i)
      std::memcpy(&s.events[i - s.first_event], base + events_off + (i % cap) * event_size,
                  sizeof(EventRecord));
    std::atomic_thread_fence(std::memory_order_acquire);
    if (h->seq.load(std::memory_order_relaxed) == s1) {
      // Records reference each other: keep only what is self-consistent.
      for (QpRecord& q : s.qps) {
        if (q.ev_first > ne) q.ev_first = ne;
        if (q.ev_count > ne - q.ev_first) q.ev_count = ne - q.ev_first;
      }
      s.device.planes = std::min(s.device.planes, kMaxPlanes);
      s.device.n_peers = std::min(s.device.n_peers, kMaxPeers);
      s.device.name[sizeof s.device.name - 1] = 0;
      s.device.netns[sizeof s.device.netns - 1] = 0;
      for (auto& p : s.device.plane) p.address[sizeof p.address - 1] = 0;
      for (auto& p : s.device.peer) p.name[sizeof p.name - 1] = 0;
      return s;
    }
  }
  return Err(name + ": the writer kept it busy (no consistent snapshot)");
}

bool pid_gone(unsigned long pid) {
  return pid != 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// Control sockets (<pid>.<device>.ctl) and mrcctl reply sockets (mrcctl.<pid>.<n>.sock) of
// processes that are gone.
void remove_dead_sockets() {
  DIR* d = ::opendir(kControlDir);
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    unsigned long pid = 0, a = 0;
    char tail[8] = {};
    const bool ctl =
        std::sscanf(n.c_str(), "%lu.%lu.%3s", &pid, &a, tail) == 3 && std::string(tail) == "ctl";
    const bool reply = !ctl && std::sscanf(n.c_str(), "mrcctl.%lu.%lu.%4s", &pid, &a, tail) == 3 &&
                       std::string(tail) == "sock";
    if ((ctl || reply) && pid_gone(pid)) ::unlink((std::string(kControlDir) + "/" + n).c_str());
  }
  ::closedir(d);
}

}  // namespace

Result<Snapshot, std::string> read_segment(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return Err(name + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    return Err(name + ": empty");
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return Err(name + ": mmap: " + std::strerror(errno));
  Mapping m{static_cast<const uint8_t*>(p), static_cast<size_t>(st.st_size)};
  return copy_out(name, m.base, m.size);
}

bool alive(const Snapshot& s) {
  if (s.pid == 0) return false;
  if (::kill(static_cast<pid_t>(s.pid), 0) != 0 && errno == ESRCH) return false;
  // Only a start time we could read and that differs proves a reused pid: anything less
  // keeps the segment (removing a live process's statistics would be worse).
  const auto st = process_start_time(static_cast<pid_t>(s.pid));
  return !st || s.start_time == 0 || *st == s.start_time;
}

std::vector<Snapshot> read_all(pid_t only_pid) {
  std::vector<Snapshot> out;
  DIR* d = ::opendir(kShmDir);
  if (!d) return out;
  const std::string prefix = kShmPrefix;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind(prefix, 0) != 0) continue;
    // <pid>.<device>
    unsigned long pid = 0, dev = 0;
    char tail = 0;
    if (std::sscanf(n.c_str() + prefix.size(), "%lu.%lu%c", &pid, &dev, &tail) != 2) continue;
    if (only_pid != 0 && pid != static_cast<unsigned long>(only_pid)) continue;
    names.push_back("/" + n);
  }
  ::closedir(d);
  for (const std::string& n : names) {
    auto s = read_segment(n);
    if (!s.ok()) {
      // A segment of a dead process is removed even if it is damaged.
      unsigned long pid = 0;
      std::sscanf(n.c_str() + 1 + prefix.size(), "%lu", &pid);
      if (pid_gone(pid)) ::shm_unlink(n.c_str());
      continue;
    }
    if (!alive(*s)) {
      ::shm_unlink(n.c_str());  // stale; fails quietly without permission
      continue;
    }
    out.push_back(std::move(s).value());
  }
  remove_dead_sockets();
  std::sort(out.begin(), out.end(), [](const Snapshot& a, const Snapshot& b) {
    return a.pid != b.pid ? a.pid < b.pid : a.device.index < b.device.index;
  });
  return out;
}

}  // namespace mrc::observe
