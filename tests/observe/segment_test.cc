// Tests of observe/segment.cc: the segment layout round trip, the seqlock (no torn
// snapshot while a writer runs), version and magic checks, stale-segment removal.
#include "mrc/observe/segment.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace mrc::observe {
namespace {

// Device numbers far above what a process hands out, unique per test.
constexpr uint32_t kDev = 70000;

bool shm_exists(const std::string& name) {
  return std::filesystem::exists(std::string(kShmDir) + name);
}

TEST(SegmentWriter, Create_HeaderDescribesLayout) {
  auto w = SegmentWriter::create(kDev);
  ASSERT_TRUE(w.ok()) << w.error();
  SegmentHeader& h = w->header();
  EXPECT_EQ(h.magic, kMagic);
  EXPECT_EQ(h.version, kLayoutVersion);
  EXPECT_EQ(h.pid, static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(h.start_time, process_start_time(::getpid()).value());
  EXPECT_EQ(h.qp_size, sizeof(QpRecord));
  EXPECT_EQ(h.total_size, geometry(kMaxQps, kMaxEvs, kEventCapacity).total);
  EXPECT_TRUE(shm_exists(segment_name(::getpid(), kDev)));
  const auto mode =
      std::filesystem::status(std::string(kShmDir) + segment_name(::getpid(), kDev)).permissions();
  EXPECT_EQ(mode & std::filesystem::perms::others_read, std::filesystem::perms::others_read);
}

TEST(SegmentWriter, Destroy_RemovesSegment) {
  const std::string name = segment_name(::getpid(), kDev + 1);
  {
    auto w = SegmentWriter::create(kDev + 1);
    ASSERT_TRUE(w.ok());
    EXPECT_TRUE(shm_exists(name));
  }
  EXPECT_FALSE(shm_exists(name));
}

TEST(ReadSegment, RoundTrip_RecordsAndEvents) {
  auto w = SegmentWriter::create(kDev + 2, 8, 32, 4);
  ASSERT_TRUE(w.ok());
  w->begin();
  DeviceRecord& d = w->device();
  std::strcpy(d.name, "mrc9");
  d.index = 9;
  d.planes = 2;
  std::strcpy(d.plane[1].address, "fd00::2");
  d.plane[1].admin_down = 1;
  d.n_peers = 1;
  std::strcpy(d.peer[0].name, "h1");
  d.udp.datagrams_sent = 77;
  d.drops[3] = 5;
  QpRecord* q = w->qps();
  q[0].qpn = 3;
  q[0].ev_first = 0;
  q[0].ev_count = 2;
  q[0].tx_retransmits = 11;
  EvRecord* e = w->evs();
  e[0].ev = 0x10100;
  e[0].lost = 4;
  e[1].ev = 0x10200;
  e[1].state = 1;
  w->header().n_qps = 1;
  w->header().n_evs = 2;
  for (uint32_t i = 0; i < 6; ++i) {  // the ring holds 4: events 2..5 remain
    EventRecord r{};
    r.ev = i;
    w->push_event(r);
  }
  w->commit(12345);

  auto s = read_segment(segment_name(::getpid(), kDev + 2));
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->pid, static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(s->generation, 1u);
  EXPECT_EQ(s->published_ns, 12345);
  EXPECT_STREQ(s->device.name, "mrc9");
  EXPECT_STREQ(s->device.plane[1].address, "fd00::2");
  EXPECT_EQ(s->device.plane[1].admin_down, 1);
  EXPECT_STREQ(s->device.peer[0].name, "h1");
  EXPECT_EQ(s->device.udp.datagrams_sent, 77u);
  EXPECT_EQ(s->device.drops[3], 5u);
  ASSERT_EQ(s->qps.size(), 1u);
  EXPECT_EQ(s->qps[0].qpn, 3u);
  EXPECT_EQ(s->qps[0].tx_retransmits, 11u);
  ASSERT_EQ(s->evs.size(), 2u);
  EXPECT_EQ(s->evs[0].lost, 4u);
  EXPECT_EQ(s->evs[1].state, 1);
  EXPECT_EQ(s->events_written, 6u);
  EXPECT_EQ(s->first_event, 2u);
  ASSERT_EQ(s->events.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(s->events[i].ev, i + 2);
}

TEST(ReadSegment, ClampsRecordReferences) {
  auto w = SegmentWriter::create(kDev + 3, 4, 4, 4);
  ASSERT_TRUE(w.ok());
  w->begin();
  w->qps()[0].ev_first = 3;
  w->qps()[0].ev_count = 1000;  // a writer bug must not make readers walk off the array
  w->header().n_qps = 1;
  w->header().n_evs = 4;
  w->commit(1);
  auto s = read_segment(segment_name(::getpid(), kDev + 3));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->qps[0].ev_first + s->qps[0].ev_count, 4u);
}

TEST(ReadSegment, RefusesOtherVersionAndForeignFiles) {
  auto w = SegmentWriter::create(kDev + 4);
  ASSERT_TRUE(w.ok());
  w->header().version = kLayoutVersion + 1;
  auto s = read_segment(segment_name(::getpid(), kDev + 4));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("layout version"), std::string::npos) << s.error();
  w->header().version = kLayoutVersion;
  w->header().magic = 0x1234;
  s = read_segment(segment_name(::getpid(), kDev + 4));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("magic"), std::string::npos) << s.error();
  w->header().magic = kMagic;
  w->header().total_size = 1ull << 40;  // claims more than the file holds
  EXPECT_FALSE(read_segment(segment_name(::getpid(), kDev + 4)).ok());
  EXPECT_FALSE(read_segment("/mrc-stats.does-not-exist").ok());
}

// An mrcctl newer than the job's libmrc (a long training job outlives an upgrade) reads the
// shorter DeviceRecord that library wrote: what it wrote, the rest zero and marked absent.
TEST(ReadSegment, OlderWritersShorterDeviceRecord_PrefixReadRestAbsent) {
  auto w = SegmentWriter::create(kDev + 5);
  ASSERT_TRUE(w.ok());
  w->begin();
  DeviceRecord& d = w->device();
  std::strcpy(d.name, "mrc5");
  d.rx_datagrams = 41;
  d.malformed_by_error[7] = 42;
  // Bytes past the older record: the older writer's next record, not ours to read.
  std::memset(reinterpret_cast<uint8_t*>(&d) + kDeviceRecordMinSize, 0xab,
              sizeof(DeviceRecord) - kDeviceRecordMinSize);
  w->header().device_size = kDeviceRecordMinSize;
  w->commit(1);
  const std::string name = segment_name(::getpid(), kDev + 5);
  auto s = read_segment(name);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_STREQ(s->device.name, "mrc5");
  EXPECT_EQ(s->device.rx_datagrams, 41u);
  EXPECT_EQ(s->device.malformed_by_error[7], 42u);
  EXPECT_EQ(s->device_size, kDeviceRecordMinSize);
  EXPECT_EQ(s->device.probes_answered, 0u);
  EXPECT_EQ(s->device.app_wakeups, 0u);
  EXPECT_FALSE(s->has(&DeviceRecord::probes_answered));
  EXPECT_FALSE(s->has(&DeviceRecord::app_wakeups));
  EXPECT_TRUE(s->has(&DeviceRecord::tx_bytes));

  // One field more than the oldest record: that field is there, the next is not.
  w->header().device_size = kDeviceRecordMinSize + 8;
  s = read_segment(name);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_TRUE(s->has(&DeviceRecord::probes_answered));
  EXPECT_EQ(s->device.probes_answered, 0xababababababababull);
  EXPECT_FALSE(s->has(&DeviceRecord::probes_rate_limited));

  // A writer from before loop_spins was appended: the field before it is there, it is not.
  w->header().device_size = offsetof(DeviceRecord, loop_spins);
  s = read_segment(name);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_TRUE(s->has(&DeviceRecord::poller_timer_arms));
  EXPECT_FALSE(s->has(&DeviceRecord::loop_spins));

  // Our own size: everything is there.
  w->header().device_size = sizeof(DeviceRecord);
  s = read_segment(name);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_TRUE(s->has(&DeviceRecord::app_wakeups));
  EXPECT_TRUE(s->has(&DeviceRecord::loop_spins));

  // Shorter than any layout 1 record: refused, saying so.
  w->header().device_size = kDeviceRecordMinSize - 8;
  s = read_segment(name);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("device record of"), std::string::npos) << s.error();
}

// A writer rewrites every record with one value per generation; a reader must never see
// two values in one snapshot.
TEST(ReadSegment, Seqlock_NoTornSnapshot) {
  auto w = SegmentWriter::create(kDev + 5, 64, 256, 16);
  ASSERT_TRUE(w.ok());
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (uint64_t k = 1; !stop.load(); ++k) {
      w->begin();
      const uint32_t nq = 1 + k % 64, ne = 1 + k % 256;
      for (uint32_t i = 0; i < nq; ++i) {
        w->qps()[i].tx_data_packets = k;
        w->qps()[i].completions = k;
      }
      for (uint32_t i = 0; i < ne; ++i) {
        w->evs()[i].tx_packets = k;
        w->evs()[i].acked = k;
      }
      w->device().udp.datagrams_sent = k;
      w->header().n_qps = nq;
      w->header().n_evs = ne;
      w->commit(static_cast<int64_t>(k));
      std::this_thread::sleep_for(std::chrono::microseconds(20));  // real writers: every 10 ms
    }
  });
  struct Join {  // the writer stops even when an assertion ends the test early
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } join{stop, writer};
  const std::string name = segment_name(::getpid(), kDev + 5);
  uint64_t snapshots = 0, distinct = 0, last = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(700);
  while (std::chrono::steady_clock::now() < until) {
    auto s = read_segment(name);
    ASSERT_TRUE(s.ok()) << s.error();
    const uint64_t k = s->device.udp.datagrams_sent;
    if (k == 0) continue;  // before the first commit
    ++snapshots;
    distinct += k != last;
    last = k;
    ASSERT_EQ(s->qps.size(), 1 + k % 64);
    ASSERT_EQ(s->evs.size(), 1 + k % 256);
    for (const auto& q : s->qps) ASSERT_TRUE(q.tx_data_packets == k && q.completions == k);
    for (const auto& e : s->evs) ASSERT_TRUE(e.tx_packets == k && e.acked == k);
    ASSERT_EQ(s->published_ns, static_cast<int64_t>(k));
  }
  stop = true;
  writer.join();
  EXPECT_GT(snapshots, 50u);
  EXPECT_GT(distinct, 10u) << "the writer never overlapped the reader";
}

TEST(ReadAll, DeadProcessSegmentIsRemoved) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto w = SegmentWriter::create(kDev + 6);
    std::_Exit(w.ok() ? 0 : 1);  // dies without removing it, as a crash would
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const std::string name = segment_name(child, kDev + 6);
  ASSERT_TRUE(shm_exists(name));
  // ...and its control socket (a plain file stands in for it).
  std::filesystem::create_directories(kControlDir);
  const std::string ctl = std::string(kControlDir) + "/" + std::to_string(child) + ".70006.ctl";
  { std::ofstream(ctl) << ""; }
  for (const Snapshot& s : read_all()) EXPECT_NE(s.pid, static_cast<uint32_t>(child));
  EXPECT_FALSE(shm_exists(name)) << "a reader leaves the stale segment behind";
  EXPECT_FALSE(std::filesystem::exists(ctl)) << "a reader leaves the stale control socket behind";
}

TEST(ReadAll, ReusedPidIsStale) {
  auto w = SegmentWriter::create(kDev + 7);
  ASSERT_TRUE(w.ok());
  w->begin();
  std::strcpy(w->device().name, "mrc70007");
  w->device().index = kDev + 7;
  w->commit(1);
  bool listed = false;
  for (const Snapshot& s : read_all(::getpid())) listed = listed || s.device.index == kDev + 7;
  EXPECT_TRUE(listed);
  // Same pid, another start time: an earlier process's segment.
  w->header().start_time += 1;
  for (const Snapshot& s : read_all(::getpid())) EXPECT_NE(s.device.index, kDev + 7);
  EXPECT_FALSE(shm_exists(segment_name(::getpid(), kDev + 7)));
}

TEST(ProcessStartTime, OwnAndMissing) {
  EXPECT_TRUE(process_start_time(::getpid()).has_value());
  EXPECT_FALSE(process_start_time(0x3fffffff).has_value());
}

}  // namespace
}  // namespace mrc::observe
