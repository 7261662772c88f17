// stream_copy: a memcpy for payload bytes landing in memory the copying thread will not read
// again (registered memory that an application or a NIC-side consumer reads later).
// Threading: pure function; its stores are visible to any thread that synchronizes with the
// caller after it returns (it ends with a store fence).
#pragma once

#include <cstddef>

namespace mrc {

/// Copies below this many bytes use memcpy: a short copy's destination line is likely
/// written again soon (the next packet's head) and a cached copy costs little.
inline constexpr size_t kStreamCopyMin = 1024;

/// Copies n bytes from src to dst (no overlap), as memcpy does. From kStreamCopyMin bytes
/// on x86-64 the aligned body goes out with non-temporal stores (SSE2 movntdq): the
/// destination's lines are not read first (a cached store of a cold line reads it from memory
/// before writing it: twice the memory traffic) and do not evict the copier's working set
/// (its receive buffers). Then an sfence, since non-temporal stores are weakly ordered: the
/// bytes are globally visible before any later store of the caller (a completion, a lock's
/// release). Elsewhere, and below kStreamCopyMin, it is memcpy. Matches
/// engine::PayloadCopy (EngineConfig::copy).
void stream_copy(void* dst, const void* src, size_t n);

}  // namespace mrc
