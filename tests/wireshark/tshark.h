// Runs tshark with the project's dissector (tools/wireshark/mrc.lua, MRC_LUA_PATH) and reads its
// `-T fields` output: one row per frame, fields by name, several occurrences (several MRC
// packets in one frame) split on ','.
// Threading: blocking, test thread only.
#pragma once

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "run_cli.h"

namespace mrc::wireshark::testing {

using mrc::mrcctl::testing::find_program;

/// One frame of tshark's `-T fields` output: field name -> its occurrences in the frame.
using Row = std::map<std::string, std::vector<std::string>>;

struct Fields {
  std::vector<Row> rows;
  std::string err;  // tshark's stderr
  int rc = -1;
};

/// `tshark -r pcap -X lua_script:<dissector> <extra> -T fields -e f...`.
inline Fields tshark_fields(const std::string& pcap, const std::vector<std::string>& fields,
                            const std::vector<std::string>& extra = {}, int timeout_ms = 60000) {
  std::vector<std::string> args = {"-n", "-r", pcap, "-X",
                                   std::string("lua_script:") + MRC_LUA_PATH};
  args.insert(args.end(), extra.begin(), extra.end());
  for (const char* a :
       {"-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,"})
    args.push_back(a);
  for (const auto& f : fields) args.insert(args.end(), {"-e", f});
  const auto r = mrc::mrcctl::testing::run_program(find_program("tshark"), args, timeout_ms);
  Fields out;
  out.rc = r.rc;
  out.err = r.err;
  std::stringstream ss(r.out);
  std::string line;
  while (std::getline(ss, line)) {
    Row row;
    size_t start = 0;
    for (size_t i = 0; i < fields.size(); ++i) {
      const size_t tab = line.find('\t', start);
      const std::string cell = line.substr(start, tab == std::string::npos ? tab : tab - start);
      std::vector<std::string> occ;
      std::stringstream cs(cell);
      std::string v;
      while (std::getline(cs, v, ',')) occ.push_back(v);
      row[fields[i]] = occ;
      start = tab == std::string::npos ? line.size() : tab + 1;
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

}  // namespace mrc::wireshark::testing
