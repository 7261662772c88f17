// Writing and reading live-statistics segments (layout.h): the shared-memory file, the
// seqlock, stale-segment removal. Threading: a SegmentWriter belongs to one thread at a time
// (its device's progress loop); readers are independent values, any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mrc/common/result.h"
#include "mrc/observe/layout.h"

namespace mrc::observe {

/// Start time of a process (field 22 of /proc/<pid>/stat); nullopt if there is none.
std::optional<uint64_t> process_start_time(pid_t pid);

/// "/mrc-stats.<pid>.<device>": the name for shm_open.
std::string segment_name(pid_t pid, uint32_t device);

/// The writer's end of one segment. Records are written in place between begin() and
/// commit(); readers retry while a write is under way.
class SegmentWriter {
 public:
  /// Creates (replacing any leftover of the same name) and maps the segment, header filled.
  static Result<SegmentWriter, std::string> create(uint32_t device, uint32_t max_qps = kMaxQps,
                                                   uint32_t max_evs = kMaxEvs,
                                                   uint32_t events = kEventCapacity);
  SegmentWriter(SegmentWriter&& o) noexcept;
  SegmentWriter& operator=(SegmentWriter&& o) noexcept;
  ~SegmentWriter();  // unmaps and removes the segment

  SegmentHeader& header() { return *reinterpret_cast<SegmentHeader*>(base_); }
  DeviceRecord& device() { return *reinterpret_cast<DeviceRecord*>(base_ + header().device_off); }
  QpRecord* qps() { return reinterpret_cast<QpRecord*>(base_ + header().qps_off); }
  EvRecord* evs() { return reinterpret_cast<EvRecord*>(base_ + header().evs_off); }
  /// Appends to the event ring (call between begin and commit).
  void push_event(const EventRecord& e);

  void begin();              // seq becomes odd
  void commit(int64_t now);  // generation++, published_ns, seq even again
  const std::string& name() const { return name_; }

 private:
  SegmentWriter() = default;
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  std::string name_;
};

/// A consistent copy of one segment.
struct Snapshot {
  std::string name;  // shm name ("/mrc-stats.123.0")
  uint32_t pid = 0;
  uint64_t start_time = 0;
  uint64_t generation = 0;
  int64_t published_ns = 0;
  uint32_t qps_truncated = 0, evs_truncated = 0;
  DeviceRecord device{};
  /// Bytes of `device` the writer had: sizeof(DeviceRecord), or fewer for an older libmrc
  /// (the rest is zero and was never counted: see has()).
  uint32_t device_size = sizeof(DeviceRecord);
  std::vector<QpRecord> qps;
  std::vector<EvRecord> evs;
  uint64_t events_written = 0;
  std::vector<EventRecord> events;  // the ring's content, oldest first
  uint64_t first_event = 0;         // sequence number of events[0]

  /// True when the writer's DeviceRecord holds the counter `f` (false: an older libmrc that
  /// never counted it).
  bool has(const uint64_t DeviceRecord::*f) const {
    const auto* base = reinterpret_cast<const char*>(&device);
    return static_cast<size_t>(reinterpret_cast<const char*>(&(device.*f)) - base) +
               sizeof(uint64_t) <=
           device_size;
  }
};

/// Reads the segment `name` (as segment_name gives it). Errors: no such segment, not a
/// libmrc segment or another layout version, a writer that never lets go (retries run out).
Result<Snapshot, std::string> read_segment(const std::string& name);

/// Every live segment under /dev/shm, sorted by pid and device. Segments of processes that
/// are gone are removed (when permitted) and left out, and so are their control sockets
/// under /run/mrc; unreadable segments are left out.
/// `only_pid` != 0: that process's only.
std::vector<Snapshot> read_all(pid_t only_pid = 0);

/// True when the process that wrote `s` still runs (same pid and start time).
bool alive(const Snapshot& s);

}  // namespace mrc::observe
