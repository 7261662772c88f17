#include "mrc/testing/testbed.h"

#include <cstdio>
#include <cstdlib>

#include "mrc/io/sim/fabric.h"

namespace mrc::sim {

namespace {
template <typename T>
T must(Result<T, engine::Error> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "testbed: %s failed: %s\n", what, engine::to_string(r.error()));
    std::abort();
  }
  return std::move(r).value();
}
void must(Status<engine::Error> s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "testbed: %s failed: %s\n", what, engine::to_string(s.error()));
    std::abort();
  }
}
}  // namespace

// An engine as a node that tells the Testbed's on_input hook about every input.
class Testbed::HookedNode final : public Node {
 public:
  HookedNode(Testbed& tb, engine::Engine& e, PeerId id) : tb_(tb), e_(e), id_(id) {}
  void on_datagram(Time now, const engine::RxInfo& rx, std::span<const uint8_t> bytes) override {
    e_.on_datagram(now, rx, bytes);
    if (tb_.on_input_) tb_.on_input_(id_);
  }
  void on_timeout(Time now) override {
    e_.on_timeout(now);
    if (tb_.on_input_) tb_.on_input_(id_);
  }
  std::optional<engine::Transmit> poll_transmit(Time now, std::span<uint8_t> buf) override {
    return e_.poll_transmit(now, buf);
  }
  Time next_deadline() const override { return e_.next_deadline(); }

 private:
  Testbed& tb_;
  engine::Engine& e_;
  PeerId id_;
};

Testbed::Testbed(const SimConfig& net_cfg, const engine::EngineConfig& eng_cfg)
    : net_(net_cfg), eng_cfg_(eng_cfg) {}

Testbed::~Testbed() = default;

PeerId Testbed::add_host() {
  auto h = std::make_unique<Host>();
  h->eng = std::make_unique<engine::Engine>(eng_cfg_);
  h->node = std::make_unique<HookedNode>(*this, *h->eng, static_cast<PeerId>(hosts_.size()));
  h->cq = must(h->eng->create_cq(1u << 20), "create_cq");
  const PeerId id = net_.add_host(h->node.get());
  hosts_.push_back(std::move(h));
  return id;
}

Testbed::QpPair Testbed::connect(PeerId a, PeerId b, std::span<const engine::Path> paths,
                                 const engine::QpAttr& attr, uint32_t max_wr) {
  return connect(a, b, paths, paths, attr, max_wr);
}

Testbed::QpPair Testbed::connect(PeerId a, PeerId b, std::span<const engine::Path> a_paths,
                                 std::span<const engine::Path> b_paths, const engine::QpAttr& attr,
                                 uint32_t max_wr) {
  using namespace engine;
  const std::span<const Path> end_paths[2] = {a_paths, b_paths};
  QpPair pair;
  const PeerId ends[2] = {a, b};
  Qpn qpn[2];
  uint32_t token[2];
  for (int i = 0; i < 2; ++i) {
    QpInit init;
    init.send_cq = init.recv_cq = hosts_[ends[i]]->cq;
    init.max_send_wr = init.max_recv_wr = max_wr;
    init.local_token = token[i] = next_token_++ * 2654435761u;
    qpn[i] = must(engine(ends[i]).create_qp(init), "create_qp");
  }
  for (int i = 0; i < 2; ++i) {
    Engine& e = engine(ends[i]);
    QpAttr at = attr;
    at.state = QpState::kInit;
    must(e.modify_qp(qpn[i], at, attr::kState | (attr.cc ? attr::kCc : 0u)), "modify_qp INIT");
    at.state = QpState::kRtr;
    at.peer = ends[1 - i];
    at.dest_qpn = qpn[1 - i];
    at.remote_token = token[1 - i];
    at.rq_psn = 0x10000 * (1 + i);
    at.paths.assign(end_paths[i].begin(), end_paths[i].end());
    must(e.modify_qp(qpn[i], at,
                     attr::kState | attr::kDest | attr::kPathPolicy | attr::kPaths | attr::kRqPsn |
                         attr::kMtu),
         "modify_qp RTR");
    at.state = QpState::kRts;
    at.sq_psn = 0x10000 * (2 - i);
    must(e.modify_qp(qpn[i], at,
                     attr::kState | attr::kSqPsn | attr::kTimeout | attr::kRetry | attr::kRnrRetry |
                         attr::kMpr),
         "modify_qp RTS");
  }
  pair.a = qpn[0];
  pair.b = qpn[1];
  return pair;
}

uint32_t Testbed::register_mr(PeerId h, std::span<uint8_t> mem) {
  using namespace engine;
  return must(
      engine(h).register_mr(mem.data(), mem.size(), reinterpret_cast<uint64_t>(mem.data()),
                            access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead),
      "register_mr");
}

void Testbed::report_ports(Fabric& fab) {
  fab.set_on_port([this](PeerId h, uint16_t plane, bool up) {
    (void)engine(h).set_port_up(net_.now(), plane, up);
    net_.wake(h);
  });
}

}  // namespace mrc::sim
