-- Wireshark dissector for the MRC wire format (docs/wire-format.md; the encoder and decoder it
-- mirrors are libmrc/include/mrc/wire/wire.h and libmrc/src/wire/wire.cc). Use: docs/wireshark.md.
--
--   tshark -X lua_script:mrc.lua -r run.pcap            (or copy into ~/.local/lib/wireshark/plugins)
--
-- Every packet kind and field; hdr_crc and payload_crc (CRC32C) checked; trimmed packets and
-- bad CRCs flagged as expert info; several MRC packets in one UDP payload (a GSO or GRO
-- aggregate caught before segmentation) decoded one after the other.
-- Preferences (Edit > Preferences > Protocols > MRC, or tshark -o mrc.NAME:VALUE):
--   mrc.port    UDP port (default 4791, the project's default)
--   mrc.fabric  fabric file written by mrc-fabric (/run/mrc-fabric/<prefix>/fabric.json) or any
--               fabric file (short or explicit form, srv6/include/srv6/config.h): the IPv6
--               destination is then shown as plane / spine / host.
-- Threading: Wireshark calls it from one thread.

local mrc = Proto("mrc", "MRC (Multipath Reliable Connection)")

local DEFAULT_PORT = 4791
local COMMON = 32
local MAX_PAYLOAD = 8192  -- wire::kMaxPayload (8192 on jumbo links)
local ACK_TRAILER = 68   -- wire::kAckTrailerSize: an ACK riding on a data packet, after its payload

local bit = bit32 or bit  -- Lua 5.2's bit32; Wireshark's BitOp otherwise
local band, bor, bxor, rshift, lshift = bit.band, bit.bor, bit.bxor, bit.rshift, bit.lshift

-- ---- Kinds and sizes (wire.h Kind, header_size) ------------------------------------------

local KIND = {
  [1] = "WRITE", [2] = "WRITE_IMM", [3] = "SEND", [4] = "SEND_IMM", [5] = "READ_REQ",
  [6] = "READ_RESP", [7] = "CMP_SWAP", [8] = "FETCH_ADD", [9] = "UD_SEND", [10] = "ATOMIC_WRITE", [16] = "ACK", [17] = "NACK", [32] = "PROBE", [33] = "PROBE_REPLY",
  [34] = "ADDR_QUERY", [35] = "ADDR_REPLY", [36] = "PORT_STATUS", [37] = "PORT_STATUS_ACK",
}
local function is_data(k) return k >= 1 and k <= 10 end  -- 9: UD_SEND (GRH | data), 10: ATOMIC_WRITE
local function is_atomic(k) return k == 7 or k == 8 end
local ATOMIC_REQ_LEN = 16  -- wire.h kAtomicReqLen: compare_add (8) | swap (8)
local HEADER = { [16] = 96, [17] = 56, [32] = 32, [33] = 48, [34] = 48, [35] = 368, [36] = 48, [37] = 48 }
local function header_size(k)
  if is_data(k) then return 72 end
  return HEADER[k]
end

local NACK_REASON = {
  [0x01] = "TRIMMED", [0x02] = "TRIMMED_LAST_HOP", [0x06] = "NO_BITMAP",
  [0x07] = "NO_PKT_BUFFER", [0x0A] = "NO_RESOURCE", [0x0B] = "PSN_OUT_OF_WINDOW",
  [0x20] = "REMOTE_ACCESS", [0x21] = "REMOTE_INVALID", [0x22] = "REMOTE_OPERATION",
}

-- ---- Fields ----------------------------------------------------------------------------

local base = base
local F = {
  version = ProtoField.uint8("mrc.version", "Version", base.DEC),
  kind = ProtoField.uint8("mrc.kind", "Kind", base.DEC, KIND),
  flags = ProtoField.uint8("mrc.flags", "Flags", base.HEX),
  f_first = ProtoField.bool("mrc.flags.first", "First", 8, nil, 0x01),
  f_last = ProtoField.bool("mrc.flags.last", "Last", 8, nil, 0x02),
  f_ackreq = ProtoField.bool("mrc.flags.ack_req", "ACK request", 8, nil, 0x04),
  f_pcrc = ProtoField.bool("mrc.flags.payload_crc", "Payload CRC", 8, nil, 0x08),
  f_retx = ProtoField.bool("mrc.flags.retransmit", "Retransmit", 8, nil, 0x10),
  f_sol = ProtoField.bool("mrc.flags.solicited", "Solicited", 8, nil, 0x20),
  f_imm = ProtoField.bool("mrc.flags.imm", "Immediate (UD_SEND)", 8, nil, 0x40),
  f_inv = ProtoField.bool("mrc.flags.invalidate", "Invalidate rkey (SEND)", 8, nil, 0x80),
  net_flags = ProtoField.uint8("mrc.net_flags", "Network flags", base.HEX),
  nf_trim = ProtoField.bool("mrc.net_flags.trimmed", "Trimmed", 8, nil, 0x01),
  nf_trim_lh = ProtoField.bool("mrc.net_flags.trimmed_last_hop", "Trimmed at last hop", 8, nil, 0x02),
  nf_unassigned = ProtoField.uint8("mrc.net_flags.unassigned", "Unassigned", base.HEX, nil, 0xFC),
  dst_qpn = ProtoField.uint32("mrc.dst_qpn", "Destination QPN", base.DEC),
  token = ProtoField.uint32("mrc.token", "Token", base.HEX),
  ev = ProtoField.uint32("mrc.ev", "EV (entropy value)", base.HEX),
  ev_plane = ProtoField.uint32("mrc.ev.plane", "Plane", base.DEC, nil, 0xFFFF0000),
  ev_spine = ProtoField.uint32("mrc.ev.spine", "Spine", base.DEC, nil, 0x0000FF00),
  ev_salt = ProtoField.uint32("mrc.ev.salt", "Salt", base.DEC, nil, 0x000000FF),
  psn = ProtoField.uint32("mrc.psn", "PSN", base.DEC),
  hdr_crc = ProtoField.uint32("mrc.hdr_crc", "Header CRC32C", base.HEX),
  hdr_crc_ok = ProtoField.bool("mrc.hdr_crc.ok", "Header CRC good"),
  ts = ProtoField.uint64("mrc.ts", "Timestamp (ns)", base.DEC),
  retransmit = ProtoField.bool("mrc.retransmit", "Retransmission"),
  trimmed = ProtoField.bool("mrc.trimmed", "Trimmed"),
  error = ProtoField.string("mrc.error", "Decode error"),
  -- data extension
  addr = ProtoField.uint64("mrc.data.addr", "Remote address", base.HEX),
  rkey = ProtoField.uint32("mrc.data.rkey", "Remote key", base.HEX),
  msn = ProtoField.uint32("mrc.data.msn", "MSN", base.DEC),
  offset = ProtoField.uint32("mrc.data.offset", "Offset", base.DEC),
  msg_len = ProtoField.uint32("mrc.data.msg_len", "Message length", base.DEC),
  imm = ProtoField.uint32("mrc.data.imm", "Immediate", base.HEX),
  payload_len = ProtoField.uint16("mrc.data.payload_len", "Payload length", base.DEC),
  xrc_srqn = ProtoField.uint16("mrc.data.xrc_srqn", "XRC SRQ number, on data to an XRC target QP (same bytes as ports_down)", base.DEC),
  reserved = ProtoField.bytes("mrc.reserved", "Reserved"),
  payload_crc = ProtoField.uint32("mrc.data.payload_crc", "Payload CRC32C", base.HEX),
  payload_crc_ok = ProtoField.bool("mrc.data.payload_crc.ok", "Payload CRC good"),
  src_qpn = ProtoField.uint32("mrc.src_qpn", "Source QPN", base.DEC),
  payload = ProtoField.bytes("mrc.payload", "Payload"),
  compare_add = ProtoField.uint64("mrc.atomic.compare_add", "Compare / add", base.HEX),
  swap = ProtoField.uint64("mrc.atomic.swap", "Swap", base.HEX),
  -- ACK
  cum_psn = ProtoField.uint32("mrc.cum_psn", "Cumulative PSN", base.DEC),
  sack_base = ProtoField.uint32("mrc.ack.sack_base", "SACK base", base.DEC),
  echo_ev = ProtoField.uint32("mrc.echo_ev", "Echoed EV", base.HEX),
  echo_psn = ProtoField.uint32("mrc.ack.echo_psn", "Echoed PSN", base.DEC),
  echo_ts = ProtoField.uint64("mrc.echo_ts", "Echoed timestamp (ns)", base.DEC),
  ack_delay = ProtoField.uint32("mrc.ack.ack_delay_ns", "ACK delay (ns)", base.DEC),
  ack_flags = ProtoField.uint8("mrc.ack.flags", "ACK flags", base.HEX),
  ecn_echo = ProtoField.bool("mrc.ecn_echo", "ECN echo", 8, nil, 0x01),
  rides = ProtoField.bool("mrc.ack.rides", "Reads ACK trailers", 8, nil, 0x02),
  ack_trailer = ProtoField.bytes("mrc.ack_trailer", "ACK trailer (an ACK riding on this packet)"),
  ack_trailer_crc = ProtoField.uint32("mrc.ack_trailer.crc", "ACK trailer CRC32C", base.HEX),
  ack_trailer_crc_ok = ProtoField.bool("mrc.ack_trailer.crc.ok", "ACK trailer CRC32C good"),
  ports_down = ProtoField.uint16("mrc.ports_down", "Sender's ports with no link (bit p: plane p)", base.HEX),
  sack = ProtoField.uint64("mrc.ack.sack", "SACK word", base.HEX),
  sack_psns = ProtoField.string("mrc.ack.sack_psns", "SACKed PSNs"),
  sack_count = ProtoField.uint32("mrc.ack.sack_count", "SACKed PSN count", base.DEC),
  -- NACK
  nack_psn = ProtoField.uint32("mrc.nack.psn", "NACKed PSN", base.DEC),
  reason = ProtoField.uint8("mrc.nack.reason", "Reason", base.HEX, NACK_REASON),
  rnr_timer = ProtoField.uint8("mrc.nack.rnr_timer", "RNR timer (0x80: stated | IB code 0..31)", base.HEX),
  rnr_wait = ProtoField.double("mrc.nack.rnr_wait_ms", "RNR wait (ms)"),
  -- PROBE_REPLY
  probe_flags = ProtoField.uint8("mrc.probe_reply.flags", "Probe flags", base.HEX),
  svc_ns = ProtoField.uint24("mrc.probe_reply.svc_ns", "Answerer service time (ns)", base.DEC),
  -- ADDR_QUERY / ADDR_REPLY
  target_qpn = ProtoField.uint32("mrc.addr.target_qpn", "Target QPN", base.DEC),
  planes = ProtoField.uint8("mrc.addr.planes", "Planes", base.DEC),
  entry = ProtoField.bytes("mrc.addr.entry", "Plane entry"),
  entry_addr = ProtoField.ipv6("mrc.addr.address", "Address"),
  entry_port = ProtoField.uint16("mrc.addr.port", "Port", base.DEC),
  -- PORT_STATUS / PORT_STATUS_ACK
  ports_up = ProtoField.uint32("mrc.port_status.ports_up", "Planes up", base.HEX),
  -- where the packet goes in the fabric (fabric preference)
  path_plane = ProtoField.uint32("mrc.path.plane", "Plane", base.DEC),
  path_spine = ProtoField.string("mrc.path.spine", "Spine"),
  path_t0 = ProtoField.string("mrc.path.t0", "Destination T0"),
  path_host = ProtoField.string("mrc.path.host", "Destination host"),
  path_src_host = ProtoField.string("mrc.path.src_host", "Source host"),
  path_note = ProtoField.string("mrc.path.note", "Note"),
}
local fields = {}
for _, f in pairs(F) do fields[#fields + 1] = f end
mrc.fields = fields

local E = {
  trimmed = ProtoExpert.new("mrc.expert.trimmed", "Trimmed data packet (a switch cut the payload)",
                            expert.group.SEQUENCE, expert.severity.WARN),
  bad_hdr_crc = ProtoExpert.new("mrc.expert.bad_hdr_crc", "Bad header CRC32C",
                                expert.group.CHECKSUM, expert.severity.ERROR),
  bad_payload_crc = ProtoExpert.new("mrc.expert.bad_payload_crc", "Bad payload CRC32C",
                                    expert.group.CHECKSUM, expert.severity.ERROR),
  malformed = ProtoExpert.new("mrc.expert.malformed", "Malformed MRC packet",
                              expert.group.MALFORMED, expert.severity.ERROR),
  retransmit = ProtoExpert.new("mrc.expert.retransmit", "Retransmission",
                               expert.group.SEQUENCE, expert.severity.NOTE),
  nack = ProtoExpert.new("mrc.expert.nack", "NACK", expert.group.SEQUENCE, expert.severity.NOTE),
}
mrc.experts = { E.trimmed, E.bad_hdr_crc, E.bad_payload_crc, E.malformed, E.retransmit, E.nack }

mrc.prefs.port = Pref.uint("UDP port", DEFAULT_PORT, "UDP port MRC runs on (MRC_PORT)")
mrc.prefs.fabric = Pref.string("Fabric file", "",
  "Fabric file (mrc-fabric writes /run/mrc-fabric/<prefix>/fabric.json): shows the IPv6 " ..
  "destination as plane / spine / host")
mrc.prefs.check_crc = Pref.bool("Check CRCs", true, "Verify hdr_crc and payload_crc (CRC32C)")

-- ---- CRC32C (Castagnoli, reflected 0x82F63B78) ------------------------------------------

local CRC_TABLE = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if band(c, 1) ~= 0 then c = bxor(rshift(c, 1), 0x82F63B78) else c = rshift(c, 1) end
  end
  CRC_TABLE[i] = c
end

-- CRC32C of string s; bytes at the 1-based positions in `zero` are taken as 0; `seed` continues
-- a CRC (as mrc::crc32c's first argument: an ACK trailer's is seeded with its hdr_crc).
local function crc32c(s, zero, seed)
  local crc = bxor(seed or 0, 0xFFFFFFFF)
  local byte = string.byte
  for i = 1, #s do
    local b = byte(s, i)
    if zero and zero[i] then b = 0 end
    crc = bxor(rshift(crc, 8), CRC_TABLE[band(bxor(crc, b), 0xFF)])
  end
  return bxor(crc, 0xFFFFFFFF)
end
-- net_flags (byte 3) and hdr_crc (bytes 20..23), 0-based, are outside hdr_crc.
local HDR_ZERO = { [4] = true, [21] = true, [22] = true, [23] = true, [24] = true }

-- ---- A tiny JSON reader (the fabric file) -----------------------------------------------

local function json_decode(text)
  local pos = 1
  local function fail(what) error(string.format("fabric file: %s at byte %d", what, pos), 0) end
  local function ws() pos = text:find("[^ \t\r\n]", pos) or #text + 1 end
  local value
  local function str()
    local out, i = {}, pos + 1
    while true do
      local c = text:sub(i, i)
      if c == "" then fail("unterminated string") end
      if c == '"' then pos = i + 1; return table.concat(out) end
      if c == "\\" then
        local n = text:sub(i + 1, i + 1)
        local map = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }
        if n == "u" then
          out[#out + 1] = string.char(tonumber(text:sub(i + 2, i + 5), 16) % 256); i = i + 6
        else
          out[#out + 1] = map[n] or n; i = i + 2
        end
      else
        out[#out + 1] = c; i = i + 1
      end
    end
  end
  value = function()
    ws()
    local c = text:sub(pos, pos)
    if c == "{" then
      local t = {}
      pos = pos + 1; ws()
      if text:sub(pos, pos) == "}" then pos = pos + 1; return t end
      while true do
        ws()
        if text:sub(pos, pos) ~= '"' then fail("expected a key") end
        local k = str(); ws()
        if text:sub(pos, pos) ~= ":" then fail("expected ':'") end
        pos = pos + 1
        t[k] = value(); ws()
        local d = text:sub(pos, pos); pos = pos + 1
        if d == "}" then return t end
        if d ~= "," then fail("expected ',' or '}'") end
      end
    elseif c == "[" then
      local t = {}
      pos = pos + 1; ws()
      if text:sub(pos, pos) == "]" then pos = pos + 1; return t end
      while true do
        t[#t + 1] = value(); ws()
        local d = text:sub(pos, pos); pos = pos + 1
        if d == "]" then return t end
        if d ~= "," then fail("expected ',' or ']'") end
      end
    elseif c == '"' then
      return str()
    elseif text:sub(pos, pos + 3) == "true" then pos = pos + 4; return true
    elseif text:sub(pos, pos + 4) == "false" then pos = pos + 5; return false
    elseif text:sub(pos, pos + 3) == "null" then pos = pos + 4; return nil
    else
      local num = text:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
      if not num or num == "" then fail("unexpected character '" .. c .. "'") end
      pos = pos + #num
      return tonumber(num)
    end
  end
  local v = value()
  ws()
  if pos <= #text then fail("trailing characters") end
  return v
end

-- ---- The fabric (srv6/include/srv6/fabric.h, config.h) ----------------------------------

-- "fcbb:bbbb::" -> 16-byte Lua string, or nil.
local function parse_ipv6(s)
  if type(s) ~= "string" then return nil end
  local head, tail = s:match("^(.-)::(.*)$")
  local function groups(part)
    local g = {}
    if part == "" then return g end
    for x in (part .. ":"):gmatch("([^:]*):") do
      if not x:match("^%x%x?%x?%x?$") then return nil end
      g[#g + 1] = tonumber(x, 16)
    end
    return g
  end
  local all
  if head then
    local a, b = groups(head), groups(tail)
    if not a or not b or #a + #b > 7 then return nil end
    all = {}
    for _, x in ipairs(a) do all[#all + 1] = x end
    for _ = 1, 8 - #a - #b do all[#all + 1] = 0 end
    for _, x in ipairs(b) do all[#all + 1] = x end
  else
    all = groups(s)
    if not all or #all ~= 8 then return nil end
  end
  local out = {}
  for _, x in ipairs(all) do out[#out + 1] = string.char(rshift(x, 8), band(x, 0xFF)) end
  return table.concat(out)
end

local function num_of(v)
  if type(v) == "number" then return v end
  if type(v) == "string" then return tonumber(v:match("^0[xX](%x+)$") or v, v:match("^0[xX]") and 16 or 10) end
  return nil
end

-- usid bytes (N/8) as a big-endian string
local function usid_bytes(u, nbytes)
  local out = {}
  for i = nbytes - 1, 0, -1 do out[#out + 1] = string.char(band(rshift(u, 8 * i), 0xFF)) end
  return table.concat(out)
end

-- Builds { planes = { {block=str, lb=bytes, nb=bytes, t0={[usid]=label}, t1={[usid]=label}} },
--          host = { [addr16] = {name=, plane=} } } from either form. Errors name the field.
local function load_fabric(path)
  local f, err = io.open(path, "r")
  if not f then error("fabric file " .. path .. ": " .. tostring(err), 0) end
  local j = json_decode(f:read("*a"))
  f:close()
  local fab = { planes = {}, host = {} }
  if type(j) ~= "table" then error("fabric file: not a JSON object", 0) end
  if type(j.planes) == "number" then
    -- Short form: the generated plan, block /32, 16-bit uSIDs.
    local H, P, S, K = j.hosts, j.planes, j.spines, j.hosts_per_t0
    if type(H) ~= "number" or type(S) ~= "number" or type(K) ~= "number" then
      error("fabric file: short form needs hosts, planes, spines and hosts_per_t0", 0)
    end
    local blk = j.block or "fcbb:bbbb::/32"
    local baddr = parse_ipv6(blk:match("^([^/]+)/32$"))
    if not baddr then error("fabric file: /block: not a /32 prefix: " .. tostring(blk), 0) end
    local block = baddr:sub(1, 4)
    local T = math.ceil(H / K)
    for p = 0, P - 1 do
      local pl = { block = block, lb = 4, nb = 2, t0 = {}, t1 = {} }
      for t = 0, T - 1 do pl.t0[1 + p * (T + S) + t] = string.format("t0p%d-%d", p, t) end
      for s = 0, S - 1 do pl.t1[1 + p * (T + S) + T + s] = string.format("t1p%d-%d", p, s) end
      fab.planes[p] = pl
    end
    for h = 0, H - 1 do
      local name = (type(j.names) == "table" and j.names[h + 1]) or ("h" .. h)
      for p = 0, P - 1 do
        local t0u = 1 + p * (T + S) + math.floor(h / K)
        local a = block .. usid_bytes(0xF000 + h % K, 2) .. usid_bytes(t0u, 2)
        fab.host[a .. string.rep("\0", 16 - #a)] = { name = name, plane = p }
      end
    end
  elseif type(j.planes) == "table" then
    -- Explicit form.
    for p, pj in ipairs(j.planes) do
      local where = "/planes/" .. (p - 1)
      local addr, len = tostring(pj.block):match("^([^/]+)/(%d+)$")
      local baddr = parse_ipv6(addr)
      len = tonumber(len)
      local bits = pj.usid_bits or 16
      if not baddr or len % 8 ~= 0 or bits % 8 ~= 0 then
        error("fabric file: " .. where .. "/block or /usid_bits: not byte-aligned lengths", 0)
      end
      local pl = { block = baddr:sub(1, len / 8), lb = len / 8, nb = bits / 8, t0 = {}, t1 = {} }
      for tier, key in pairs({ t0 = "t0", t1 = "t1" }) do
        for i, sw in ipairs(pj[key] or {}) do
          local u = num_of(sw.usid)
          if not u then error("fabric file: " .. where .. "/" .. key .. "/" .. (i - 1) .. "/usid: not a number", 0) end
          pl[tier][u] = sw.name or string.format("%sp%d-%d", key, p - 1, i - 1)
        end
      end
      fab.planes[p - 1] = pl
    end
    for h, hj in ipairs(j.hosts or {}) do
      for p, a in ipairs(hj.addresses or {}) do
        local raw = parse_ipv6(a)
        if not raw then error("fabric file: /hosts/" .. (h - 1) .. "/addresses/" .. (p - 1) .. ": not an IPv6 address", 0) end
        fab.host[raw] = { name = hj.name or ("h" .. (h - 1)), plane = p - 1 }
      end
    end
  else
    error("fabric file: /planes: a number (short form) or an array (explicit form)", 0)
  end
  return fab
end

-- Follows the uSIDs of destination `a` (16-byte string) through plane switches' shifts until
-- it is a host port address. Returns plane, spine label or nil, T0 label or nil, host entry,
-- delivered (true when `a` already was the host's address) ; nil when no plane explains it.
local function locate(fab, a)
  for p, pl in pairs(fab.planes) do
    if a:sub(1, pl.lb) == pl.block then
      local cur, spine, t0 = a, nil, nil
      for step = 0, 8 do
        local h = fab.host[cur]
        if h and h.plane == p then return p, spine, t0, h, step == 0 end
        local ub = cur:sub(pl.lb + 1, pl.lb + pl.nb)
        local u = 0
        for i = 1, #ub do u = u * 256 + ub:byte(i) end
        if pl.t1[u] and not spine then spine = pl.t1[u]
        elseif pl.t0[u] then t0 = pl.t0[u]
        else break end
        cur = pl.block .. cur:sub(pl.lb + pl.nb + 1) .. string.rep("\0", pl.nb)
      end
    end
  end
  return nil
end

local fabric = nil        -- loaded fabric, or nil
local fabric_error = nil  -- why the fabric file could not be read
local fabric_path = nil

local function reload_fabric()
  local path = mrc.prefs.fabric
  if path == fabric_path then return end
  fabric_path, fabric, fabric_error = path, nil, nil
  if path == nil or path == "" then return end
  local ok, res = pcall(load_fabric, path)
  if ok then fabric = res else fabric_error = res end
end

-- ---- Dissection --------------------------------------------------------------------------

local ipv6_src_f = Field.new("ipv6.src")
local ipv6_dst_f = Field.new("ipv6.dst")

local function last(...)
  local t = { ... }
  return t[#t]
end

local function add_path(tree)
  reload_fabric()
  if not fabric then
    if fabric_error then tree:add(F.path_note, fabric_error) end
    return
  end
  local dst, src = last(ipv6_dst_f()), last(ipv6_src_f())
  if not dst then return end
  local t = tree:add(mrc, "Fabric path")
  local p, spine, t0, host, delivered = locate(fabric, dst.range:raw())
  if src then
    local s = fabric.host[src.range:raw()]
    if s then t:add(F.path_src_host, s.name) end
  end
  if not p then
    t:add(F.path_note, "destination is no path of the fabric file")
    return
  end
  t:add(F.path_plane, p)
  t:add(F.path_host, host.name)
  if spine then t:add(F.path_spine, spine) end
  if t0 then t:add(F.path_t0, t0) end
  if delivered then
    t:add(F.path_note, "captured after the fabric delivered it: the destination is the host's " ..
          "port address, its uSID path (spine) already shifted out; the EV says which spine " ..
          "the sender chose")
  end
  t:append_text(string.format(": plane %d, %s, %s", p, spine and ("spine " .. spine) or
                              (delivered and "spine not in the address" or "direct"),
                              "host " .. host.name))
end

local function u32(tvb, o) return tvb(o, 4):uint() end

-- True when the bytes at `o` start a plausible MRC packet: version 1, known kind, whole header,
-- good header CRC. Used to tell back-to-back packets (GSO) from trailing garbage.
local function starts_packet(tvb, o)
  local n = tvb:len() - o
  if n < COMMON or tvb(o, 1):uint() ~= 1 then return false end
  local hs = header_size(tvb(o + 1, 1):uint())
  if not hs or n < hs then return false end
  return crc32c(tvb:raw(o, hs), HDR_ZERO) == u32(tvb, o + 20)
end

local function add_flags(tree, tvb, o)
  local ft = tree:add(F.flags, tvb(o + 2, 1))
  for _, f in ipairs({ F.f_first, F.f_last, F.f_ackreq, F.f_pcrc, F.f_retx, F.f_sol, F.f_imm, F.f_inv }) do
    ft:add(f, tvb(o + 2, 1))
  end
  local nt = tree:add(F.net_flags, tvb(o + 3, 1))
  for _, f in ipairs({ F.nf_trim, F.nf_trim_lh, F.nf_unassigned }) do nt:add(f, tvb(o + 3, 1)) end
end

local function add_ev(tree, field, r)
  local t = tree:add(field, r)
  t:add(F.ev_plane, r)
  t:add(F.ev_spine, r)
  t:add(F.ev_salt, r)
end

-- The SACK bitmap as PSN ranges ("1000-1003, 1007"), PSN sack_base + i for set bit i.
local function sack_ranges(tvb, o, base_psn)
  local set, out, count = {}, {}, 0
  for w = 0, 3 do
    for byte = 0, 7 do
      local b = tvb(o + 8 * w + 7 - byte, 1):uint()  -- big-endian word: bit 0 in its last byte
      for k = 0, 7 do
        if band(b, lshift(1, k)) ~= 0 then set[#set + 1] = 64 * w + 8 * byte + k; count = count + 1 end
      end
    end
  end
  local i = 1
  while i <= #set do
    local j = i
    while j < #set and set[j + 1] == set[j] + 1 do j = j + 1 end
    local a, b = (base_psn + set[i]) % 4294967296, (base_psn + set[j]) % 4294967296
    out[#out + 1] = (i == j) and tostring(a) or (a .. "-" .. b)
    i = j + 1
  end
  return table.concat(out, ", "), count
end

-- The ACK extension's fields (an ACK packet's, or an ACK trailer's) at offset x.
local function add_ack(tree, tvb, x)
  tree:add(F.cum_psn, tvb(x, 4))
  tree:add(F.sack_base, tvb(x + 4, 4))
  add_ev(tree, F.echo_ev, tvb(x + 8, 4))
  tree:add(F.echo_psn, tvb(x + 12, 4))
  tree:add(F.echo_ts, tvb(x + 16, 8))
  tree:add(F.ack_delay, tvb(x + 24, 4))
  local af = tree:add(F.ack_flags, tvb(x + 28, 1))
  af:add(F.ecn_echo, tvb(x + 28, 1))
  af:add(F.rides, tvb(x + 28, 1))
  tree:add(F.reserved, tvb(x + 29, 1))
  tree:add(F.ports_down, tvb(x + 30, 2))
  for w = 0, 3 do tree:add(F.sack, tvb(x + 32 + 8 * w, 8)):append_text(string.format(" (PSNs +%d..+%d)", 64 * w, 64 * w + 63)) end
  local ranges, count = sack_ranges(tvb, x + 32, u32(tvb, x + 4))
  tree:add(F.sack_count, count):set_generated()
  if count > 0 then tree:add(F.sack_psns, ranges):set_generated() end
end

-- True when the ACK_TRAILER bytes at `t` are an ACK trailer of the data packet at `o` (its CRC,
-- seeded with the packet's hdr_crc, holds).
local function trailer_ok(tvb, o, t)
  return crc32c(tvb:raw(t, ACK_TRAILER - 4), nil, u32(tvb, o + 20)) == u32(tvb, t + ACK_TRAILER - 4)
end

-- Dissects one MRC packet at offset o of tvb; returns the bytes it took, and a summary.
local function dissect_one(tvb, pinfo, root, o)
  local n = tvb:len() - o
  local tree = root:add(mrc, tvb(o))
  local function bad(expert_field, msg, r)
    tree:add(F.error, msg):set_generated()
    tree:add_proto_expert_info(expert_field, msg)
    return tvb:len() - o, "malformed: " .. msg
  end
  if n < COMMON then return bad(E.malformed, "too short: " .. n .. " bytes, the common header is 32") end
  local version, kind = tvb(o, 1):uint(), tvb(o + 1, 1):uint()
  local kname = KIND[kind] or string.format("kind %d", kind)
  tree:add(F.version, tvb(o, 1))
  tree:add(F.kind, tvb(o + 1, 1))
  if version ~= 1 then return bad(E.malformed, "bad version " .. version .. " (1 expected)") end
  local hs = header_size(kind)
  if not hs then return bad(E.malformed, "unknown kind " .. kind) end
  if n < hs then return bad(E.malformed, string.format("too short: %d bytes, a %s header is %d", n, kname, hs)) end
  tree:set_len(hs)
  tree:append_text(", " .. kname)
  add_flags(tree, tvb, o)
  tree:add(F.dst_qpn, tvb(o + 4, 4))
  tree:add(F.token, tvb(o + 8, 4))
  add_ev(tree, F.ev, tvb(o + 12, 4))
  tree:add(F.psn, tvb(o + 16, 4))
  local crc_item = tree:add(F.hdr_crc, tvb(o + 20, 4))
  tree:add(F.ts, tvb(o + 24, 8))
  local flags, net_flags = tvb(o + 2, 1):uint(), tvb(o + 3, 1):uint()
  local psn = u32(tvb, o + 16)
  local summary = string.format("%s psn %d", kname, psn)

  if mrc.prefs.check_crc then
    local want = crc32c(tvb:raw(o, hs), HDR_ZERO)
    local ok = want == u32(tvb, o + 20)
    crc_item:add(F.hdr_crc_ok, ok):set_generated()
    if not ok then
      crc_item:append_text(string.format(" [incorrect, should be 0x%08x]", want))
      return bad(E.bad_hdr_crc, string.format("bad header CRC32C: 0x%08x, computed 0x%08x", u32(tvb, o + 20), want))
    end
  end

  local used = hs
  local x = o + COMMON
  if is_data(kind) then
    tree:add(F.addr, tvb(x, 8))
    tree:add(F.rkey, tvb(x + 8, 4))
    tree:add(F.msn, tvb(x + 12, 4))
    tree:add(F.offset, tvb(x + 16, 4))
    tree:add(F.msg_len, tvb(x + 20, 4))
    tree:add(F.imm, tvb(x + 24, 4))
    tree:add(F.payload_len, tvb(x + 28, 2))
    -- One field, two meanings, told apart by the receiving QP: the sender's ports with no
    -- link, or on data to an XRC target QP the XRC SRQ it names. Both shown.
    tree:add(F.ports_down, tvb(x + 30, 2))
    tree:add(F.xrc_srqn, tvb(x + 30, 2))
    local pcrc_item = tree:add(F.payload_crc, tvb(x + 32, 4))
    tree:add(F.src_qpn, tvb(x + 36, 4))
    local plen = tvb(x + 28, 2):uint()
    if plen > MAX_PAYLOAD then return bad(E.malformed, "payload_len " .. plen .. " above " .. MAX_PAYLOAD) end
    local have = n - hs
    local trailer = false  -- an ACK riding after the payload (wire.h kAckTrailerSize)
    if have > plen then
      local t = o + hs + plen
      if have == plen + ACK_TRAILER then
        if not trailer_ok(tvb, o, t) then
          return bad(E.bad_payload_crc, "bad ACK trailer CRC32C")
        end
        trailer = true
      elseif have > plen + ACK_TRAILER and trailer_ok(tvb, o, t) and starts_packet(tvb, t + ACK_TRAILER) then
        trailer = true
      elseif not starts_packet(tvb, t) then
        -- More bytes than this packet carried: the next packet of an aggregate, or garbage.
        return bad(E.malformed, string.format("payload %d bytes longer than payload_len %d", have, plen))
      end
      have = plen
    end
    used = hs + have + (trailer and ACK_TRAILER or 0)
    local trimmed = have < plen or band(net_flags, 0x03) ~= 0
    if trimmed then
      tree:add(F.trimmed, true):set_generated()
      tree:add_proto_expert_info(E.trimmed, string.format("trimmed: %d of %d payload bytes arrived", have, plen))
      summary = summary .. " TRIMMED"
    elseif plen > 0 then
      tree:add(F.payload, tvb(o + hs, plen))
      if is_atomic(kind) and plen == ATOMIC_REQ_LEN then
        tree:add(F.compare_add, tvb(o + hs, 8))
        tree:add(F.swap, tvb(o + hs + 8, 8))
      end
      if band(flags, 0x08) ~= 0 and mrc.prefs.check_crc then
        local want = crc32c(tvb:raw(o + hs, plen))
        local ok = want == u32(tvb, x + 32)
        pcrc_item:add(F.payload_crc_ok, ok):set_generated()
        if not ok then
          return bad(E.bad_payload_crc, string.format("bad payload CRC32C: 0x%08x, computed 0x%08x", u32(tvb, x + 32), want))
        end
      end
    end
    if trailer then
      local t = o + hs + plen
      local at = tree:add(F.ack_trailer, tvb(t, ACK_TRAILER))
      add_ack(at, tvb, t)
      at:add(F.ack_trailer_crc, tvb(t + ACK_TRAILER - 4, 4))
      at:add(F.ack_trailer_crc_ok, true):set_generated()
    end
    tree:set_len(used)
    summary = summary .. string.format(" len %d", plen)
    if trailer then summary = summary .. string.format(" +ACK cum %d", u32(tvb, o + hs + plen)) end
  else
    if n > hs and not starts_packet(tvb, o + hs) then
      return bad(E.malformed, string.format("%d bytes after a %s header of %d", n - hs, kname, hs))
    end
    if kind == 16 then
      add_ack(tree, tvb, x)
      summary = string.format("ACK cum %d", u32(tvb, x))
    elseif kind == 17 then
      tree:add(F.cum_psn, tvb(x, 4))
      tree:add(F.nack_psn, tvb(x + 4, 4))
      add_ev(tree, F.echo_ev, tvb(x + 8, 4))
      tree:add(F.reason, tvb(x + 12, 1))
      local rnr = tvb(x + 13, 1):uint()
      tree:add(F.rnr_timer, tvb(x + 13, 1))
      if rnr >= 0x80 then  -- IB's RNR NAK timer table, in ms (code 0 is the longest)
        local ms = { [0] = 655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32, 0.48,
                     0.64, 0.96, 1.28, 1.92, 2.56, 3.84, 5.12, 7.68, 10.24, 15.36, 20.48, 30.72,
                     40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52 }
        tree:add(F.rnr_wait, ms[rnr % 32]):set_generated()
      end
      tree:add(F.reserved, tvb(x + 14, 2))
      tree:add(F.echo_ts, tvb(x + 16, 8))
      local reason = tvb(x + 12, 1):uint()
      local rname = NACK_REASON[reason] or string.format("0x%02x", reason)
      tree:add_proto_expert_info(E.nack, "NACK " .. rname .. " of PSN " .. u32(tvb, x + 4))
      summary = string.format("NACK %s psn %d", rname, u32(tvb, x + 4))
    elseif kind == 33 then
      add_ev(tree, F.echo_ev, tvb(x, 4))
      local pf = tree:add(F.probe_flags, tvb(x + 4, 1))
      pf:add(F.ecn_echo, tvb(x + 4, 1))
      tree:add(F.svc_ns, tvb(x + 5, 3))
      tree:add(F.echo_ts, tvb(x + 8, 8))
    elseif kind == 34 or kind == 35 then
      tree:add(F.target_qpn, tvb(x, 4))
      tree:add(F.src_qpn, tvb(x + 4, 4))
      tree:add(F.planes, tvb(x + 8, 1))
      tree:add(F.reserved, tvb(x + 9, 7))
      local planes = tvb(x + 8, 1):uint()
      if kind == 34 and planes ~= 0 then return bad(E.malformed, "ADDR_QUERY with planes " .. planes .. " (0 expected)") end
      if kind == 35 then
        if planes > 16 then return bad(E.malformed, "ADDR_REPLY with planes " .. planes .. " (at most 16)") end
        for i = 0, 15 do
          local e = x + 16 + 20 * i
          local et = tree:add(F.entry, tvb(e, 20))
          et:set_text(string.format("Plane %d%s", i, i < planes and "" or " (unused)"))
          et:add(F.entry_addr, tvb(e, 16))
          et:add(F.entry_port, tvb(e + 16, 2))
          et:add(F.reserved, tvb(e + 18, 2))
        end
      end
      summary = string.format("%s target qpn %d", kname, u32(tvb, x))
    elseif kind == 36 or kind == 37 then
      tree:add(F.target_qpn, tvb(x, 4))
      tree:add(F.src_qpn, tvb(x + 4, 4))
      tree:add(F.ports_up, tvb(x + 8, 4))
      tree:add(F.reserved, tvb(x + 12, 4))
      summary = string.format("%s target qpn %d planes up 0x%x", kname, u32(tvb, x), u32(tvb, x + 8))
    end
  end
  if band(flags, 0x10) ~= 0 then
    tree:add(F.retransmit, true):set_generated()
    tree:add_proto_expert_info(E.retransmit)
  end
  return used, summary
end

function mrc.dissector(tvb, pinfo, root)
  if tvb:len() == 0 then return 0 end
  pinfo.cols.protocol = "MRC"
  local o, parts = 0, {}
  while o < tvb:len() do
    local used, summary = dissect_one(tvb, pinfo, root, o)
    parts[#parts + 1] = summary
    o = o + used
  end
  if #parts > 3 then
    pinfo.cols.info = string.format("%d MRC packets: %s, ..., %s", #parts, parts[1], parts[#parts])
  else
    pinfo.cols.info = table.concat(parts, "; ")
  end
  add_path(root)
  return tvb:len()
end

local registered_port = nil
local function register_port()
  local udp = DissectorTable.get("udp.port")
  if registered_port then udp:remove(registered_port, mrc) end
  registered_port = mrc.prefs.port
  udp:add(registered_port, mrc)
end

function mrc.prefs_changed()
  if mrc.prefs.port ~= registered_port then register_port() end
  reload_fabric()
end

register_port()
