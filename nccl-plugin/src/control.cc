#include "control.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "mrc/wire/wire.h"

namespace mrc::nccl {

// Every plane of a host fits a frame: wire::kMaxAddrPlanes is engine::kMaxPlanes (engine.cc).
static_assert(kMaxPlanes == wire::kMaxAddrPlanes, "a control frame lists every plane");
namespace {

struct Writer {
  std::vector<uint8_t>& out;
  template <class T>
  void put(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
};

struct Reader {
  std::span<const uint8_t> in;
  size_t at = 0;
  bool short_read = false;
  template <class T>
  T get() {
    T v = 0;
    if (at + sizeof(T) > in.size()) {
      short_read = true;
      return 0;
    }
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(T{in[at + i]} << (8 * i));
    at += sizeof(T);
    return v;
  }
  void bytes(void* p, size_t n) {
    if (at + n > in.size()) {
      short_read = true;
      return;
    }
    std::memcpy(p, in.data() + at, n);
    at += n;
  }
};

const char* type_name(FrameType t) {
  switch (t) {
    case FrameType::kHello:
      return "HELLO";
    case FrameType::kReply:
      return "REPLY";
    case FrameType::kReady:
      return "READY";
    case FrameType::kBye:
      return "BYE";
  }
  return "?";
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

std::string to_string(const sockaddr_in6& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof buf);
  return "[" + std::string(buf) + "]:" + std::to_string(ntohs(a.sin6_port));
}

std::vector<uint8_t> encode(const Frame& f) {
  std::vector<uint8_t> body;
  Writer w{body};
  switch (f.type) {
    case FrameType::kHello:
    case FrameType::kReply: {
      const Endpoint& e = f.endpoint;
      w.put<uint64_t>(f.listen_id);
      w.put<uint8_t>(static_cast<uint8_t>(e.mode));
      w.put<uint8_t>(static_cast<uint8_t>(e.planes.size()));
      w.put<uint8_t>(static_cast<uint8_t>(e.qpns.size()));
      w.put<uint8_t>(0);
      w.put<uint32_t>(e.fabric_host);
      w.put<uint32_t>(e.token);
      w.put<uint32_t>(e.mtu);
      w.put<uint64_t>(e.eager_addr);
      w.put<uint32_t>(e.eager_rkey);
      w.put<uint32_t>(e.eager_slots);
      w.put<uint32_t>(e.eager_slot_bytes);
      for (uint32_t q : e.qpns) w.put<uint32_t>(q);
      for (const sockaddr_in6& a : e.planes) {
        w.bytes(&a.sin6_addr, 16);
        w.put<uint16_t>(ntohs(a.sin6_port));
        w.put<uint32_t>(a.sin6_scope_id);
      }
      break;
    }
    case FrameType::kReady:
      break;
    case FrameType::kBye:
      w.put<uint8_t>(static_cast<uint8_t>(f.delivered.size()));
      for (uint64_t d : f.delivered) w.put<uint64_t>(d);
      w.put<uint32_t>(f.eager_copied);
      break;
  }
  std::vector<uint8_t> out;
  Writer h{out};
  h.put<uint32_t>(kFrameMagic);
  h.put<uint16_t>(kFrameVersion);
  h.put<uint16_t>(static_cast<uint16_t>(f.type));
  h.put<uint32_t>(static_cast<uint32_t>(body.size()));
  h.bytes(body.data(), body.size());
  return out;
}

Result<size_t, std::string> frame_body_length(std::span<const uint8_t, kFrameHeader> header) {
  Reader r{header};
  const auto magic = r.get<uint32_t>();
  const auto version = r.get<uint16_t>();
  r.get<uint16_t>();
  const auto len = r.get<uint32_t>();
  if (magic != kFrameMagic)
    return Err("control frame: bad magic 0x" + [&] {
      char b[16];
      std::snprintf(b, sizeof b, "%08x", magic);
      return std::string(b);
    }() + " (not an MRC NCCL plugin peer)");
  if (version != kFrameVersion)
    return Err("control frame: peer speaks version " + std::to_string(version) + ", this plugin " +
               std::to_string(kFrameVersion) + " (mixed plugin versions)");
  if (len > kMaxFrameBody)
    return Err("control frame: body of " + std::to_string(len) + " bytes, at most " +
               std::to_string(kMaxFrameBody));
  return size_t{len};
}

Result<Frame, std::string> decode(std::span<const uint8_t> bytes) {
  if (bytes.size() < kFrameHeader)
    return Err("control frame: " + std::to_string(bytes.size()) + " bytes, shorter than a header");
  auto len = frame_body_length(bytes.first<kFrameHeader>());
  if (!len.ok()) return Err(len.error());
  if (bytes.size() != kFrameHeader + *len)
    return Err("control frame: header says " + std::to_string(*len) + " body bytes, got " +
               std::to_string(bytes.size() - kFrameHeader));
  Frame f;
  const uint16_t type = static_cast<uint16_t>(bytes[6] | bytes[7] << 8);
  if (type < 1 || type > 4) return Err("control frame: unknown type " + std::to_string(type));
  f.type = static_cast<FrameType>(type);
  Reader r{bytes.subspan(kFrameHeader)};
  switch (f.type) {
    case FrameType::kHello:
    case FrameType::kReply: {
      Endpoint& e = f.endpoint;
      f.listen_id = r.get<uint64_t>();
      const auto mode = r.get<uint8_t>();
      const auto planes = r.get<uint8_t>();
      const auto qps = r.get<uint8_t>();
      const auto reserved = r.get<uint8_t>();
      e.fabric_host = r.get<uint32_t>();
      e.token = r.get<uint32_t>();
      e.mtu = r.get<uint32_t>();
      e.eager_addr = r.get<uint64_t>();
      e.eager_rkey = r.get<uint32_t>();
      e.eager_slots = r.get<uint32_t>();
      e.eager_slot_bytes = r.get<uint32_t>();
      if (reserved != 0) return Err(std::string(type_name(f.type)) + ": reserved field not zero");
      if (!r.short_read && e.eager_slots > kMaxEagerSlots)
        return Err(std::string(type_name(f.type)) + ": eager ring of " +
                   std::to_string(e.eager_slots) + " slots (at most " +
                   std::to_string(kMaxEagerSlots) + ")");
      if (!r.short_read && e.eager_slots > 0 &&
          (e.eager_addr == 0 || e.eager_slot_bytes < 4 || e.eager_slot_bytes > kMaxEagerSlotBytes))
        return Err(std::string(type_name(f.type)) + ": eager ring at 0x" + [&] {
          char b[24];
          std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(e.eager_addr));
          return std::string(b);
        }() + " with slots of " + std::to_string(e.eager_slot_bytes) + " bytes (4.." +
                   std::to_string(kMaxEagerSlotBytes) + ")");
      if (qps == 0 || qps > kMaxQps)
        return Err(std::string(type_name(f.type)) + ": " + std::to_string(qps) + " QPs (1.." +
                   std::to_string(kMaxQps) + ")");
      for (uint8_t q = 0; q < qps && !r.short_read; ++q) {
        e.qpns.push_back(r.get<uint32_t>());
        if (e.qpns.back() == 0 && !r.short_read)
          return Err(std::string(type_name(f.type)) + ": QPN 0");
      }
      if (mode > static_cast<uint8_t>(io::PathMode::kEcmp))
        return Err(std::string(type_name(f.type)) + ": unknown path mode " + std::to_string(mode));
      e.mode = static_cast<io::PathMode>(mode);
      if (planes == 0 || planes > kMaxPlanes)
        return Err(std::string(type_name(f.type)) + ": " + std::to_string(planes) + " planes (1.." +
                   std::to_string(kMaxPlanes) + ")");
      if (e.mtu < 256 || e.mtu > wire::kMaxPayload || (e.mtu & (e.mtu - 1)))
        return Err(std::string(type_name(f.type)) + ": MTU " + std::to_string(e.mtu) + " (256.." +
                   std::to_string(wire::kMaxPayload) + ", a power of 2)");
      for (uint8_t p = 0; p < planes; ++p) {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        r.bytes(&a.sin6_addr, 16);
        a.sin6_port = htons(r.get<uint16_t>());
        a.sin6_scope_id = r.get<uint32_t>();
        e.planes.push_back(a);
      }
      break;
    }
    case FrameType::kReady:
      break;
    case FrameType::kBye: {
      const auto qps = r.get<uint8_t>();
      if (!r.short_read && (qps == 0 || qps > kMaxQps))
        return Err("BYE: " + std::to_string(qps) + " QPs (1.." + std::to_string(kMaxQps) + ")");
      for (uint8_t q = 0; q < qps && !r.short_read; ++q) f.delivered.push_back(r.get<uint64_t>());
      f.eager_copied = r.get<uint32_t>();
      break;
    }
  }
  if (r.short_read) return Err(std::string(type_name(f.type)) + ": truncated body");
  if (r.at != r.in.size())
    return Err(std::string(type_name(f.type)) + ": " + std::to_string(r.in.size() - r.at) +
               " trailing bytes");
  return f;
}

void Stream::queue(const Frame& f) {
  const auto b = encode(f);
  out_.insert(out_.end(), b.begin(), b.end());
}

Result<bool, std::string> Stream::flush() {
  while (!out_.empty()) {
    const ssize_t n = ::send(fd_.get(), out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      if (errno == EINTR) continue;
      return Err(errno_text("control connection send"));
    }
    out_.erase(out_.begin(), out_.begin() + n);
  }
  return true;
}

Result<std::optional<Frame>, std::string> Stream::read_frame() {
  for (;;) {
    size_t want = kFrameHeader;
    if (in_.size() >= kFrameHeader) {
      auto len = frame_body_length(std::span<const uint8_t>(in_).first<kFrameHeader>());
      if (!len.ok()) return Err(len.error());
      want = kFrameHeader + *len;
    }
    if (in_.size() >= kFrameHeader && in_.size() == want) {
      auto f = decode(in_);
      in_.clear();
      if (!f.ok()) return Err(f.error());
      return std::optional<Frame>(std::move(*f));
    }
    uint8_t buf[kFrameHeader + kMaxFrameBody];
    const ssize_t n = ::recv(fd_.get(), buf, want - in_.size(), MSG_DONTWAIT);
    if (n == 0) return Err(std::string("control connection closed by the peer"));
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return std::optional<Frame>();
      if (errno == EINTR) continue;
      return Err(errno_text("control connection"));
    }
    in_.insert(in_.end(), buf, buf + n);
  }
}

Result<UniqueFd, std::string> start_connect(const sockaddr_in6& to) {
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return Err(errno_text("control socket"));
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to) < 0 &&
      errno != EINPROGRESS)
    return Err(errno_text(("connect to " + to_string(to)).c_str()));
  return fd;
}

Result<bool, std::string> connect_finished(int fd, const sockaddr_in6& to) {
  pollfd p{fd, POLLOUT, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return Err("connect to " + to_string(to) + ": " + std::strerror(err));
  return true;
}

Result<std::pair<UniqueFd, sockaddr_in6>, std::string> listen_on(sockaddr_in6 at) {
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return Err(errno_text("control socket"));
  const int zero = 0;  // an IPv4 control address (IPv4-mapped) binds only on a dual-stack socket
  if (IN6_IS_ADDR_V4MAPPED(&at.sin6_addr))
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&at), sizeof at) < 0)
    return Err(errno_text(("bind control listener to " + to_string(at)).c_str()));
  if (::listen(fd.get(), 256) < 0) return Err(errno_text("listen"));
  socklen_t len = sizeof at;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&at), &len);
  return std::pair{std::move(fd), at};
}

}  // namespace mrc::nccl
