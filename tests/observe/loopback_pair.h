// Two UdpDrivers on loopback (2 planes, 8 EVs) with a connected RC QP pair, a WRITE pump,
// and access to their statistics segments and control sockets: the fixture of the publisher
// and mrcctl tests. Threading: the test thread drives it; the drivers run their threads.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

#include "control.h"
#include "mrc/io/udp/udp_driver.h"
#include "mrc/observe/publisher.h"
#include "mrc/observe/segment.h"

namespace mrc::observe::testing {

using namespace engine;
using namespace std::chrono_literals;
using io::UdpDriver;

class LoopbackPair : public ::testing::Test {
 protected:
  struct Host {
    std::unique_ptr<UdpDriver> drv;
    PeerId other = 0;
    CqId cq = 0;
    Qpn qpn = 0;
    uint32_t mr = 0;
  };

  /// A fixture's changes to both hosts' driver configuration (none by default).
  virtual void configure(io::UdpConfig&) {}

  void SetUp() override {
    for (auto& h : hosts_) {
      io::UdpConfig cfg;
      cfg.planes = {io::PlaneConfig{"::1", 0}, io::PlaneConfig{"::1", 0}};
      configure(cfg);
      observe::attach_publisher(cfg);
      auto d = UdpDriver::create(cfg);
      ASSERT_TRUE(d.ok()) << d.error();
      h.drv = std::move(d).value();
      h.cq = *h.drv->with_engine([](Engine& e) { return e.create_cq(1u << 12); });
    }
    for (int i = 0; i < 2; ++i) {
      UdpDriver& r = *hosts_[1 - i].drv;
      hosts_[i].other = hosts_[i].drv->add_peer({r.local_address(0), r.local_address(1)});
    }
    const uint32_t token[2] = {0xabc, 0xdef};
    for (int i = 0; i < 2; ++i) {
      QpInit init;
      init.send_cq = init.recv_cq = hosts_[i].cq;
      init.local_token = token[i];
      hosts_[i].qpn = *hosts_[i].drv->with_engine([&](Engine& e) { return e.create_qp(init); });
    }
    for (uint32_t ev = 0; ev < 8; ++ev)
      paths_.push_back(Path{(ev % 2) << 16 | ev << 8, uint16_t(ev % 2)});
    for (int i = 0; i < 2; ++i) {
      Host& h = hosts_[i];
      h.mr = *h.drv->with_engine([&](Engine& e) {
        return e.register_mr(mem_[i].data(), mem_[i].size(),
                             reinterpret_cast<uint64_t>(mem_[i].data()),
                             access::kLocalWrite | access::kRemoteWrite);
      });
      h.drv->with_engine([&](Engine& e) {
        QpAttr at;
        at.state = QpState::kInit;
        ASSERT_TRUE(e.modify_qp(h.qpn, at, attr::kState).ok());
        at.state = QpState::kRtr;
        at.peer = h.other;
        at.dest_qpn = hosts_[1 - i].qpn;
        at.remote_token = token[1 - i];
        at.paths = paths_;
        ASSERT_TRUE(e.modify_qp(h.qpn, at, attr::kState | attr::kDest | attr::kPaths).ok());
        at.state = QpState::kRts;
        ASSERT_TRUE(e.modify_qp(h.qpn, at, attr::kState).ok());
      });
      h.drv->start();
    }
  }

  void TearDown() override {
    for (auto& h : hosts_)
      if (h.drv) h.drv->stop();
  }

  /// Keeps 4 WRITEs of 256 KiB from host 0 to host 1 in flight for `d`.
  void pump(std::chrono::milliseconds d) {
    Host& a = hosts_[0];
    const auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until) {
      while (in_flight_ < 4) {
        Sge sge{reinterpret_cast<uint64_t>(mem_[0].data()), 256 << 10, a.mr};
        SendWr wr;
        wr.opcode = Opcode::kWrite;
        wr.sg = {&sge, 1};
        wr.remote_addr = reinterpret_cast<uint64_t>(mem_[1].data());
        wr.rkey = hosts_[1].mr;
        ASSERT_TRUE(a.drv->with_engine([&](Engine& e) { return e.post_send(a.qpn, wr); }).ok());
        ++in_flight_;
      }
      Completion c[8];
      const size_t n = a.drv->peek_engine([&](Engine& e) { return e.poll_cq(a.cq, c); });
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(c[i].status, WcStatus::kSuccess);
        --in_flight_;
        ++completed_;
      }
      if (n == 0) std::this_thread::sleep_for(200us);
    }
  }

  /// The snapshot of host i's device (found by its plane 0 port).
  std::optional<Snapshot> snap(int i) {
    const uint16_t port = ntohs(hosts_[i].drv->local_address(0).sin6_port);
    for (Snapshot& s : read_all(::getpid()))
      if (s.device.planes == 2 && s.device.plane[0].port == port) return s;
    return std::nullopt;
  }

  Result<nlohmann::json, mrcctl::ControlError> control(int i, const nlohmann::json& rq,
                                                       int timeout_ms = 2000) {
    auto s = snap(i);
    if (!s) return Err(mrcctl::ControlError{"no segment"});
    return mrcctl::control_request(s->pid, s->device.index, rq, timeout_ms);
  }

  bool has_control() {
    auto s = snap(0);
    return s && s->device.has_control;
  }

  const EvRecord* ev_of(const Snapshot& s, uint32_t ev) {
    for (const auto& e : s.evs)
      if (e.ev == ev) return &e;
    return nullptr;
  }

  Host hosts_[2];
  std::vector<Path> paths_;
  std::vector<uint8_t> mem_[2] = {std::vector<uint8_t>(1 << 20, 7), std::vector<uint8_t>(1 << 20)};
  int in_flight_ = 0;
  uint64_t completed_ = 0;
};

}  // namespace mrc::observe::testing
