// XRC of the software verbs device: XRC domains (ibv_open_xrcd, ibv_close_xrcd) and XRC SRQs
// (ibv_create_srq_ex with IBV_SRQT_XRC, ibv_get_srq_num). XRC QPs are made by qp.cc (make_qp:
// IBV_QPT_XRC_SEND is an RC requester whose WRs name the peer's SRQ, IBV_QPT_XRC_RECV an
// engine QP with QpInit::xrcd). docs/verbs-shim.md "XRC" says how XRC maps onto MRC.
// Threading: as verbs.h (the engine through the driver; the domain table under Device::mu).
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "common/c_enum.h"
#include "mrc/verbs/verbs.h"
#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs {

ibv_xrcd* open_xrcd(ibv_context* c, ibv_xrcd_init_attr* a) {
  const uint32_t need = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  if (!a || (a->comp_mask & need) != need) {
    fail(EINVAL, "ibv_open_xrcd: comp_mask needs IBV_XRCD_INIT_ATTR_FD and _OFLAGS");
    return nullptr;
  }
  if (a->comp_mask & ~need) {
    fail(EOPNOTSUPP, "ibv_open_xrcd: comp_mask 0x%x (FD and OFLAGS are known)",
         a->comp_mask & ~need);
    return nullptr;
  }
  if (a->oflags & ~(O_CREAT | O_EXCL)) {
    fail(EINVAL, "ibv_open_xrcd: oflags 0x%x (O_CREAT and O_EXCL are known)", a->oflags);
    return nullptr;
  }
  std::pair<uint64_t, uint64_t> file{0, 0};
  if (a->fd == -1) {
    if (!(a->oflags & O_CREAT)) {
      fail(EINVAL, "ibv_open_xrcd: fd -1 (a domain of its own) needs O_CREAT");
      return nullptr;
    }
  } else {
    struct stat st {};
    if (::fstat(a->fd, &st) != 0) {
      fail(EBADF, "ibv_open_xrcd: fd %d is not an open file", a->fd);
      return nullptr;
    }
    file = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  }
  Device* dev = device_of(c);
  std::lock_guard lock(dev->mu);
  uint32_t id = 0;
  if (a->fd == -1) {
    id = dev->next_xrcd++;
  } else {
    auto it = dev->xrcd_files.find(file);
    if (it != dev->xrcd_files.end() && (a->oflags & O_EXCL)) {
      fail(EINVAL, "ibv_open_xrcd: O_EXCL, and the file's domain is open");
      return nullptr;
    }
    if (it == dev->xrcd_files.end() && !(a->oflags & O_CREAT)) {
      fail(EINVAL, "ibv_open_xrcd: no domain on the file yet, and no O_CREAT");
      return nullptr;
    }
    if (it == dev->xrcd_files.end())
      it = dev->xrcd_files.emplace(file, Device::XrcdFile{dev->next_xrcd++, 0}).first;
    ++it->second.handles;
    id = it->second.id;
  }
  auto* x = new Xrcd;
  x->xrcd.context = c;
  x->id = id;
  x->file = file;
  return &x->xrcd;
}

int close_xrcd(ibv_xrcd* xrcd) {
  Xrcd* x = xrcd_of(xrcd);
  if (const uint32_t n = x->users.load())
    return fail(EBUSY, "ibv_close_xrcd: %u XRC SRQs and QPs still use it", n);
  if (x->file != std::pair<uint64_t, uint64_t>{0, 0}) {
    Device* dev = device_of(xrcd->context);
    std::lock_guard lock(dev->mu);
    auto it = dev->xrcd_files.find(x->file);
    if (it != dev->xrcd_files.end() && --it->second.handles == 0) dev->xrcd_files.erase(it);
  }
  delete x;
  return 0;
}

ibv_srq* create_srq_ex(ibv_context* c, ibv_srq_init_attr_ex* a) {
  if (!a) {
    fail(EINVAL, "ibv_create_srq_ex: srq_init_attr_ex is NULL");
    return nullptr;
  }
  const uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                         IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
  if (a->comp_mask & ~known) {
    fail(EOPNOTSUPP, "ibv_create_srq_ex: comp_mask 0x%x is not supported by mrc0",
         a->comp_mask & ~known);
    return nullptr;
  }
  const int type = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? raw(a->srq_type) : IBV_SRQT_BASIC;
  if (type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC && type != IBV_SRQT_TM) {
    fail(EOPNOTSUPP, "ibv_create_srq_ex: SRQ type %d is not supported by mrc0 (BASIC, XRC, TM)",
         type);
    return nullptr;
  }
  if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd || a->pd->context != c) {
    fail(EINVAL, "ibv_create_srq_ex: a PD of this context is needed (IBV_SRQ_INIT_ATTR_PD)");
    return nullptr;
  }
  // ibv_srq_init_attr_ex starts as ibv_srq_init_attr does.
  auto* base = reinterpret_cast<ibv_srq_init_attr*>(a);
  if (type == IBV_SRQT_BASIC) return make_srq(a->pd, base, {}, nullptr);
  if (type == IBV_SRQT_TM) return create_tm_srq(c, a);  // tm.cc
  if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !a->xrcd || a->xrcd->context != c ||
      !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !a->cq || a->cq->context != c) {
    fail(EINVAL, "ibv_create_srq_ex: an XRC SRQ needs an XRCD and a CQ of this context");
    return nullptr;
  }
  Xrcd* x = xrcd_of(a->xrcd);
  engine::XrcSrqInit xrc;
  xrc.xrcd = x->id;
  xrc.cq = cq_of(a->cq)->id;
  xrc.pd = a->pd->handle;
  return make_srq(a->pd, base, xrc, x);
}

int get_srq_num(ibv_srq* srq, uint32_t* srq_num) {
  *srq_num = srq_of(srq)->id;
  return 0;
}

}  // namespace mrc::verbs
