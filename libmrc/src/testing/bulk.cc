#include "mrc/testing/bulk.h"

#include <cstring>
#include <random>

namespace mrc::sim {

using namespace engine;

BulkWrite::BulkWrite(Testbed& tb, PeerId src, PeerId dst, const Testbed::QpPair& qp,
                     const Config& cfg)
    : tb_(tb), src_(src), dst_(dst), qp_(qp), cfg_(cfg) {
  src_mem_.resize(16u << 20 < 4ull * cfg.msg_bytes ? 4ull * cfg.msg_bytes : 16u << 20);
  std::mt19937_64 rng(cfg.seed);
  for (size_t i = 0; i + 8 <= src_mem_.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(&src_mem_[i], &v, 8);
  }
  dst_mem_.assign(2ull * cfg.outstanding * cfg.msg_bytes, 0);
  skey_ = tb.register_mr(src, src_mem_);
  dkey_ = tb.register_mr(dst, dst_mem_);
}

uint64_t BulkWrite::src_offset(uint64_t k) const {
  return (k * 40961) % (src_mem_.size() - cfg_.msg_bytes);
}

void BulkWrite::pump() {
  Completion c[64];
  while (size_t n = tb_.engine(src_).poll_cq(tb_.cq(src_), c)) {
    for (size_t i = 0; i < n; ++i, ++done_) {
      const uint64_t k = c[i].wr_id;
      if (c[i].status != WcStatus::kSuccess) {
        if (errors_++ == 0) first_error_ = to_string(c[i].status);
      } else if (std::memcmp(&dst_mem_[slot(k)], &src_mem_[src_offset(k)], cfg_.msg_bytes) != 0) {
        ++mismatches_;
      } else {
        ++verified_;
      }
    }
  }
  const uint64_t before = posted_;
  while (posting_ && posted_ - done_ < cfg_.outstanding) {
    const uint64_t k = posted_;
    Sge s{reinterpret_cast<uint64_t>(&src_mem_[src_offset(k)]), cfg_.msg_bytes, skey_};
    SendWr wr;
    wr.wr_id = k;
    wr.sg = {&s, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(&dst_mem_[slot(k)]);
    wr.rkey = dkey_;
    if (!tb_.engine(src_).post_send(qp_.a, wr).ok()) {
      if (errors_++ == 0) first_error_ = "post_send refused";
      posting_ = false;
    } else {
      ++posted_;
    }
  }
  if (posted_ != before) tb_.net().wake(src_);
}

bool BulkWrite::cqe_ready() const { return tb_.engine(src_).cq_depth(tb_.cq(src_)) > 0; }

void BulkWrite::run_until(Time t, Duration step) {
  BulkWrite* self = this;
  run_streams(tb_.net(), {&self, 1}, t, step);
}

void run_streams(SimNet& net, std::span<BulkWrite* const> streams, Time t, Duration step) {
  while (net.now() < t) {
    for (BulkWrite* s : streams) s->pump();
    net.run_until(std::min(t, net.now() + step));
  }
  for (BulkWrite* s : streams) s->pump();
}

}  // namespace mrc::sim
