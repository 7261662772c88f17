// UD QPs and address handles of the software verbs device: ibv_create_ah (GRH addressing
// only: RoCE), ibv_init_ah_from_wc / ibv_create_ah_from_wc, the UD modify_qp transitions, and
// a UD WR's destination for post_send and ibv_wr_set_ud_addr (engine QpInit::ud).
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "common/c_enum.h"
#include "mrc/verbs/verbs.h"
#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs {

namespace {
std::optional<uint32_t> gid_index(const Device* dev, const ibv_gid& g) {
  for (uint32_t i = 0; i < dev->gids.size(); ++i)
    if (std::memcmp(dev->gids[i].gid.raw, g.raw, 16) == 0) return i;
  return std::nullopt;
}
}  // namespace

ibv_ah* create_ah(ibv_pd* pd, ibv_ah_attr* a) {
  Device* dev = device_of(pd->context);
  if (a->port_num != 1) {
    fail(EINVAL, "ibv_create_ah: port %u (mrc0 has port 1)", a->port_num);
    return nullptr;
  }
  if (!a->is_global) {  // RoCE: an AH names its peer by GID (verbs: EINVAL without a GRH)
    fail(EINVAL, "ibv_create_ah: mrc0's port is Ethernet (RoCE): the AH needs a GRH (is_global)");
    return nullptr;
  }
  if (check_sgid_index(dev, a->grh.sgid_index, "ibv_create_ah")) return nullptr;
  auto* ah = new Ah;
  if (is_mcast_gid(a->grh.dgid)) {  // a group: its members are found at each SEND (mcast.cc)
    McastMember self = mcast_self(dev);
    ah->mcast = true;
    ah->peer = self.peer;
    ah->paths = std::move(self.paths);
  } else {
    std::lock_guard lock(dev->mu);
    uint32_t host = 0;
    auto peer = peer_for(dev, *a, &host);
    if (!peer) {
      delete ah;
      fail(EINVAL, "ibv_create_ah: %s", peer.error().c_str());
      return nullptr;
    }
    ah->peer = *peer;
    ah->paths = dev->driver->spray_paths(host);
  }
  // The engine diverts a datagram off a path whose plane or EV its shared path health holds
  // (a port down, the peer's word, what RC QPs to the peer learned): onto these paths.
  dev->driver->with_engine([&](engine::Engine& e) { e.set_ud_paths(ah->peer, ah->paths); });
  ah->attr = *a;
  ah->sgid = dev->gids[a->grh.sgid_index].gid;
  ah->ah.context = pd->context;
  ah->ah.pd = pd;
  static std::atomic<uint32_t> handles{1};
  ah->ah.handle = handles++;
  ++pd_of(pd)->users;
  return &ah->ah;
}

int destroy_ah(ibv_ah* ah) {
  --pd_of(ah->pd)->users;
  delete ah_of(ah);
  return 0;
}

int init_ah_from_wc(ibv_context* c, uint8_t port, const ibv_wc* wc, const ibv_grh* grh,
                    ibv_ah_attr* a) {
  Device* dev = device_of(c);
  if (port != 1) return fail(EINVAL, "ibv_init_ah_from_wc: port %u (mrc0 has port 1)", port);
  if (!(wc->wc_flags & IBV_WC_GRH) || !grh)
    return fail(EINVAL, "ibv_init_ah_from_wc: the completion has no GRH (not a UD receive)");
  // The GRH's destination is the GID the sender addressed us by: it becomes our sgid_index.
  const auto index = gid_index(dev, grh->dgid);
  if (!index) return fail(EINVAL, "ibv_init_ah_from_wc: the GRH's dgid is none of mrc0's GIDs");
  *a = ibv_ah_attr{};
  const uint32_t vtf = ntohl(grh->version_tclass_flow);
  a->is_global = 1;
  a->grh.dgid = grh->sgid;
  a->grh.sgid_index = static_cast<uint8_t>(*index);
  a->grh.flow_label = vtf & 0xfffff;
  a->grh.traffic_class = static_cast<uint8_t>(vtf >> 20);
  a->grh.hop_limit = 0xff;
  a->dlid = wc->slid;
  a->sl = wc->sl;
  a->src_path_bits = wc->dlid_path_bits;
  a->port_num = port;
  return 0;
}

ibv_ah* create_ah_from_wc(ibv_pd* pd, const ibv_wc* wc, const ibv_grh* grh, uint8_t port) {
  ibv_ah_attr a;
  if (init_ah_from_wc(pd->context, port, wc, grh, &a)) return nullptr;
  return create_ah(pd, &a);
}

int ud_dest(const char* verb, ibv_qp* qp, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey,
            uint32_t len, engine::UdDest* d) {
  if (!ah || ah->context != qp->context || ah->pd != qp->pd) {
    log_error("%s: QP %u: a UD WR needs an address handle of the QP's PD", verb, qp->qp_num);
    return EINVAL;
  }
  Ah* h = ah_of(ah);
  if (h->mcast && remote_qpn != engine::kMulticastQpn) {
    log_error("%s: QP %u: a SEND to a multicast group names QPN 0xFFFFFF, not 0x%x", verb,
              qp->qp_num, remote_qpn);
    return EINVAL;
  }
  d->peer = h->peer;
  d->path = h->paths[h->next.fetch_add(1, std::memory_order_relaxed) % h->paths.size()];
  d->qpn = remote_qpn;
  // verbs: a WR Q_Key with the top bit set means "the QP's own Q_Key"
  d->qkey = (remote_qkey & 0x80000000u) ? qp_of(qp)->attr.qkey : remote_qkey;
  const ibv_global_route& g = h->attr.grh;
  d->traffic_class = g.traffic_class;
  // The GRH as a RoCE v2 receiver reads it: an IPv6 header (ibv_grh), paylen the message.
  ibv_grh grh{};
  grh.version_tclass_flow =
      htonl(6u << 28 | uint32_t{g.traffic_class} << 20 | (g.flow_label & 0xfffff));
  grh.paylen = htons(static_cast<uint16_t>(len));
  grh.next_hdr = 0x11;  // UDP, as RoCE v2
  grh.hop_limit = g.hop_limit ? g.hop_limit : 64;
  grh.sgid = h->sgid;
  grh.dgid = g.dgid;
  static_assert(sizeof grh == std::tuple_size_v<decltype(d->grh)>);
  std::memcpy(d->grh.data(), &grh, sizeof grh);
  return 0;
}

// The ibv_qp_attr fields a UD QP takes.
constexpr int kUdAttrMask =
    IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_SQ_PSN;

int modify_ud_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  Qp* q = qp_of(qp);
  Device* dev = q->ctx->dev;
  const uint32_t qpn = qp->qp_num;
  if (mask & ~kUdAttrMask)
    return fail(EINVAL,
                "ibv_modify_qp: UD QP %u: attribute mask 0x%x: a UD QP takes the state, "
                "pkey_index, port, qkey and sq_psn",
                qpn, mask & ~kUdAttrMask);
  if ((mask & IBV_QP_PORT) && a->port_num != 1)
    return fail(EINVAL, "ibv_modify_qp: UD QP %u: port %u (mrc0 has port 1)", qpn, a->port_num);
  if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
    return fail(EINVAL, "ibv_modify_qp: UD QP %u: pkey_index %u (mrc0 has pkey 0)", qpn,
                a->pkey_index);
  engine::QpAttr e;
  uint32_t m = 0;
  if (mask & IBV_QP_STATE) {
    if (raw(a->qp_state) == IBV_QPS_SQE || raw(a->qp_state) < IBV_QPS_RESET ||
        raw(a->qp_state) > IBV_QPS_ERR)
      return fail(EINVAL, "ibv_modify_qp: UD QP %u: state %d is not supported", qpn,
                  raw(a->qp_state));
    e.state = to_engine(a->qp_state);
    m |= engine::attr::kState;
    // verbs: RESET -> INIT sets the Q_Key (with the port and pkey index)
    if (qp->state == IBV_QPS_RESET && a->qp_state == IBV_QPS_INIT && !(mask & IBV_QP_QKEY))
      return fail(EINVAL, "ibv_modify_qp: UD QP %u: INIT needs IBV_QP_QKEY", qpn);
  }
  if (mask & IBV_QP_QKEY) {
    e.qkey = a->qkey;
    m |= engine::attr::kQkey;
  }
  e.mtu = dev->cfg.mtu < 4096 ? dev->cfg.mtu : 4096;  // UD messages: at most the port's MTU
  m |= engine::attr::kMtu;
  auto r = dev->driver->with_engine([&](engine::Engine& en) -> Status<engine::ModifyRefusal> {
    if (auto ok = en.check_modify_qp(qpn, e, m); !ok) return ok;
    (void)en.modify_qp(qpn, e, m);  // checked just above, under the same lock
    return {};
  });
  if (!r)
    return fail(EINVAL, "ibv_modify_qp: UD QP %u (%s -> %s): %s: %s", qpn,
                engine::to_string(to_engine(qp->state)),
                (mask & IBV_QP_STATE) ? engine::to_string(e.state) : "same", r.error().field,
                engine::to_string(r.error().error));
  if (mask & IBV_QP_STATE) qp->state = q->attr.qp_state = a->qp_state;
  if (mask & IBV_QP_QKEY) q->attr.qkey = a->qkey;
  if (mask & IBV_QP_SQ_PSN) q->attr.sq_psn = a->sq_psn;
  if (mask & IBV_QP_PKEY_INDEX) q->attr.pkey_index = a->pkey_index;
  if (mask & IBV_QP_PORT) q->attr.port_num = a->port_num;
  return 0;
}

}  // namespace mrc::verbs
