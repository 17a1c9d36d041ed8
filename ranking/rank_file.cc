#include "weft/ranking/rank_file.h"

#include <charconv>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "weft/common/file_util.h"
#include "weft/common/json.h"

namespace weft::ranking {

Status check_host_only(const topo::Fabric& f, const RankOrder& o, RankFormat fmt);  // below: every host-only format

namespace {

using json = nlohmann::json;

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(line);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

std::optional<long> to_long(std::string_view s) {
  long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// host -> its NICs in the order later ranks claim them (host-only formats).
class HostCursor {
 public:
  explicit HostCursor(const topo::Fabric& f) : f_(f) {}
  Result<int> next(std::string_view host, size_t line) {
    auto h = f_.find_host(host);
    if (!h) return not_found(fmt::format("line {}: host '{}' is not in the topology", line, host));
    size_t& k = used_[*h];
    if (k >= f_.hosts[*h].nics.size()) {
      return invalid_argument(fmt::format("line {}: host '{}' has {} NIC(s) but gets more ranks", line, host,
                                          f_.hosts[*h].nics.size()));
    }
    return f_.hosts[*h].nics[k++];
  }

 private:
  const topo::Fabric& f_;
  std::map<int, size_t> used_;
};

Result<int> nic_by_index(const topo::Fabric& f, std::string_view host, long index, size_t line) {
  auto h = f.find_host(host);
  if (!h) return not_found(fmt::format("line {}: host '{}' is not in the topology", line, host));
  if (index < 0 || index >= static_cast<long>(f.hosts[*h].nics.size())) {
    return invalid_argument(fmt::format("line {}: host '{}' has no NIC {}", line, host, index));
  }
  return f.hosts[*h].nics[static_cast<size_t>(index)];
}

// Ranks given by number (openmpi, hccl) must be exactly 0..n-1.
Result<RankOrder> order_from_ranks(const std::map<long, int>& by_rank, std::string_view what) {
  RankOrder o;
  for (const auto& [r, nic] : by_rank) {
    if (r != o.size()) return invalid_argument(fmt::format("{} {} is missing", what, o.size()));
    o.nics.push_back(nic);
  }
  return o;
}

// ---- writers ----------------------------------------------------------------

std::string write_openmpi(const topo::Fabric& f, const RankOrder& o) {
  std::string out = "# Open MPI rankfile written by weft: mpirun --rankfile FILE\n";
  for (int r = 0; r < o.size(); ++r) {
    const auto& nic = f.nics[o.nics[r]];
    out += fmt::format("rank {}={} slot={}\n", r, f.hosts[nic.host].name, nic.index_on_host);
  }
  return out;
}

// Hydra merges a hostfile line into the node before it only when the host
// is the same (HYDU_add_to_node_list, MPICH src/pm/hydra/lib/utils); a
// host's second block of ranks becomes another node, whose first process
// is again local rank 0: it would drive the device the first block's did.
Result<std::string> write_mpich(const topo::Fabric& f, const RankOrder& o) {
  std::string out = "# MPICH/Hydra hostfile written by weft: mpiexec -f FILE\n";
  std::set<int> done;
  for (int r = 0; r < o.size();) {
    int host = f.nics[o.nics[r]].host;
    if (!done.insert(host).second) {
      return invalid_argument(fmt::format(
          "mpich cannot express this order: host '{}' gets two separate blocks of ranks (again at rank {}), and "
          "Hydra starts each block as a node of its own whose first rank is local rank 0; use --format {}",
          f.hosts[host].name, r, check_host_only(f, o, RankFormat::kSlurm) ? "slurm, hccl or csv" : "hccl or csv"));
    }
    int count = 0;
    while (r < o.size() && f.nics[o.nics[r]].host == host) ++r, ++count;
    out += fmt::format("{}:{}\n", f.hosts[host].name, count);
  }
  return out;
}

std::string write_slurm(const topo::Fabric& f, const RankOrder& o) {
  // Slurm reads one hostname per line; it does not document comments, so none.
  std::string out;
  for (int n : o.nics) out += f.hosts[f.nics[n].host].name + "\n";
  return out;
}

std::string write_csv(const topo::Fabric& f, const RankOrder& o) {
  std::string out = "rank,host,nic,switch\n";
  for (int r = 0; r < o.size(); ++r) {
    const auto& nic = f.nics[o.nics[r]];
    out += fmt::format("{},{},{},{}\n", r, f.hosts[nic.host].name, nic.name, f.switches[f.nic_switch(o.nics[r])].name);
  }
  return out;
}

// The accelerator a NIC serves: HCCL's device_id is the device's physical id,
// which the topology gives as the NIC's one GPU; a NIC that names none is
// taken to serve the device of its own index.
Result<int> hccl_device(const topo::Fabric& f, const topo::Nic& nic) {
  if (nic.gpus.empty()) return nic.index_on_host;
  if (nic.gpus.size() == 1) return nic.gpus[0];
  return invalid_argument(fmt::format("hccl cannot express this order: {}:{} serves {} GPUs, and an HCCL rank is "
                                      "one device; list one GPU per NIC in the topology",
                                      f.hosts[nic.host].name, nic.name, nic.gpus.size()));
}

Result<std::string> write_hccl(const topo::Fabric& f, const RankOrder& o) {
  // HCCL rank table 1.0: servers in order of their first rank; string values
  // throughout, as HCCL's parser expects.
  using ojson = nlohmann::ordered_json;  // keep HCCL's documented key order
  ojson servers = ojson::array();
  std::map<int, size_t> slot_of_host;
  std::map<std::pair<int, int>, int> rank_of_device;  // (host, device) -> first rank on it
  for (int r = 0; r < o.size(); ++r) {
    const auto& nic = f.nics[o.nics[r]];
    WEFT_ASSIGN_OR_RETURN(const int device, hccl_device(f, nic));
    if (auto [at, fresh] = rank_of_device.try_emplace({nic.host, device}, r); !fresh) {
      return invalid_argument(fmt::format(
          "hccl cannot express this order: ranks {} and {} are both on device {} of host '{}' (HCCL runs one rank "
          "per device; the ports of one NIC on several planes serve one device): rank one port per device, or use "
          "--format csv or openmpi",
          at->second, r, device, f.hosts[nic.host].name));
    }
    auto [it, fresh] = slot_of_host.try_emplace(nic.host, servers.size());
    if (fresh) {
      servers.push_back({{"server_id", f.hosts[nic.host].name}, {"device", ojson::array()}, {"host_nic_ip", "reserve"}});
    }
    ojson dev = {{"device_id", std::to_string(device)},
                 {"device_ip", nic.address.empty() ? "0.0.0.0" : nic.address},
                 {"rank_id", std::to_string(r)}};
    servers[it->second]["device"].push_back(std::move(dev));
  }
  ojson root = {{"status", "completed"},
               {"version", "1.0"},
               {"server_count", std::to_string(servers.size())},
               {"server_list", std::move(servers)}};
  return root.dump(2) + "\n";
}

Result<std::string> write_torchrun(const topo::Fabric& f, const RankOrder& o) {
  // torchrun: global rank = node_rank * nproc_per_node + local_rank, so an
  // order is expressible only if each host's ranks are one contiguous block of
  // the same size.
  std::vector<int> node_hosts;
  int per_node = 0;
  for (int r = 0; r < o.size();) {
    int host = f.nics[o.nics[r]].host;
    int start = r;
    while (r < o.size() && f.nics[o.nics[r]].host == host) ++r;
    int count = r - start;
    if (per_node == 0) per_node = count;
    if (count != per_node) {
      return invalid_argument(fmt::format(
          "torchrun cannot express this order: host '{}' gets {} consecutive ranks from rank {}, but "
          "torchrun runs the same --nproc_per_node ({}) on every node; use --format {}",
          f.hosts[host].name, count, start, per_node,
          check_host_only(f, o, RankFormat::kSlurm) ? "openmpi or slurm" : "hccl or csv"));
    }
    for (int h : node_hosts) {
      if (h == host) {
        return invalid_argument(fmt::format(
            "torchrun cannot express this order: host '{}' gets two separate blocks of ranks (again at rank {})",
            f.hosts[host].name, start));
      }
    }
    node_hosts.push_back(host);
  }
  // Underscored options: torchrun 1.13 (Debian 12) knows no others; 2.x
  // takes both spellings.
  std::string out = fmt::format(
      "# torchrun node order written by weft: on the host in line K run\n"
      "#   torchrun --nnodes={} --nproc_per_node={} --node_rank=K --rdzv_backend=static --master_addr={} "
      "--master_port=PORT ...\n"
      "# (static rendezvous: the only one that numbers nodes by --node_rank)\n"
      "# nproc_per_node={}\n",
      node_hosts.size(), per_node, f.hosts[node_hosts[0]].name, per_node);
  for (size_t k = 0; k < node_hosts.size(); ++k) out += fmt::format("{} {}\n", k, f.hosts[node_hosts[k]].name);
  return out;
}

// ---- readers ----------------------------------------------------------------

Result<RankOrder> read_openmpi(const topo::Fabric& f, std::string_view text) {
  std::map<long, int> by_rank;
  auto lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    auto line = trim(lines[i]);
    if (line.empty() || line[0] == '#') continue;
    // rank N=host slot=S
    if (line.substr(0, 5) != "rank ") return invalid_argument(fmt::format("line {}: expected 'rank N=host slot=S'", i + 1));
    auto eq = line.find('=');
    auto sp = line.find(" slot=");
    if (eq == std::string_view::npos || sp == std::string_view::npos || sp < eq) {
      return invalid_argument(fmt::format("line {}: expected 'rank N=host slot=S'", i + 1));
    }
    auto rank = to_long(trim(line.substr(5, eq - 5)));
    auto slot = to_long(trim(line.substr(sp + 6)));
    if (!rank || *rank < 0 || !slot) return invalid_argument(fmt::format("line {}: bad rank or slot number", i + 1));
    WEFT_ASSIGN_OR_RETURN(int nic, nic_by_index(f, trim(line.substr(eq + 1, sp - eq - 1)), *slot, i + 1));
    if (!by_rank.emplace(*rank, nic).second) return invalid_argument(fmt::format("line {}: rank {} given twice", i + 1, *rank));
  }
  return order_from_ranks(by_rank, "rank");
}

Result<RankOrder> read_mpich(const topo::Fabric& f, std::string_view text) {
  HostCursor cur(f);
  RankOrder o;
  std::set<std::string, std::less<>> earlier;  // hosts of lines before the previous host's
  std::string_view previous;
  auto lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    auto line = trim(lines[i]);
    if (line.empty() || line[0] == '#') continue;
    auto colon = line.find(':');
    std::string_view host = trim(line.substr(0, colon));
    if (host != previous) {
      if (earlier.count(host) > 0) {
        return invalid_argument(fmt::format("line {}: host '{}' again after other hosts: Hydra starts it as another "
                                            "node, whose first rank is local rank 0 again",
                                            i + 1, host));
      }
      earlier.emplace(previous);
      previous = host;
    }
    long count = 1;
    if (colon != std::string_view::npos) {
      auto c = to_long(trim(line.substr(colon + 1)));
      if (!c || *c < 1) return invalid_argument(fmt::format("line {}: expected 'host:count'", i + 1));
      count = *c;
    }
    for (long k = 0; k < count; ++k) {
      WEFT_ASSIGN_OR_RETURN(int nic, cur.next(trim(host), i + 1));
      o.nics.push_back(nic);
    }
  }
  return o;
}

Result<RankOrder> read_slurm(const topo::Fabric& f, std::string_view text) {
  HostCursor cur(f);
  RankOrder o;
  auto lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    auto line = trim(lines[i]);
    if (line.empty() || line[0] == '#') continue;
    WEFT_ASSIGN_OR_RETURN(int nic, cur.next(line, i + 1));
    o.nics.push_back(nic);
  }
  return o;
}

Result<RankOrder> read_csv(const topo::Fabric& f, std::string_view text) {
  auto lines = lines_of(text);
  if (lines.empty() || trim(lines[0]) != "rank,host,nic,switch") {
    return invalid_argument("line 1: expected the header 'rank,host,nic,switch'");
  }
  RankOrder o;
  for (size_t i = 1; i < lines.size(); ++i) {
    auto line = trim(lines[i]);
    if (line.empty()) continue;
    std::vector<std::string_view> col;
    size_t pos = 0;
    while (true) {
      auto c = line.find(',', pos);
      col.push_back(line.substr(pos, c == std::string_view::npos ? std::string_view::npos : c - pos));
      if (c == std::string_view::npos) break;
      pos = c + 1;
    }
    if (col.size() != 4) return invalid_argument(fmt::format("line {}: expected 4 columns", i + 1));
    auto r = to_long(col[0]);
    if (!r || *r != o.size()) return invalid_argument(fmt::format("line {}: expected rank {}", i + 1, o.size()));
    auto nic = f.find_nic(fmt::format("{}:{}", col[1], col[2]));
    if (!nic) return not_found(fmt::format("line {}: NIC '{}:{}' is not in the topology", i + 1, col[1], col[2]));
    if (f.switches[f.nic_switch(*nic)].name != col[3]) {
      return invalid_argument(fmt::format("line {}: {}:{} attaches to '{}', not '{}'", i + 1, col[1], col[2],
                                          f.switches[f.nic_switch(*nic)].name, col[3]));
    }
    o.nics.push_back(*nic);
  }
  return o;
}

// The NIC a rank table's device is: the host's NIC whose device
// (hccl_device) it is; of several (one NIC's ports on several planes serve
// one device), the one whose address is the table's device_ip. A device
// that names no NIC, or several with nothing to choose between them, is
// refused: a guess would plan the job on another NIC's links.
Result<int> nic_of_device(const topo::Fabric& f, const std::string& host, long device, const std::string& ip,
                          const std::string& where) {
  auto h = f.find_host(host);
  if (!h) return not_found(fmt::format("{}: host '{}' is not in the topology", where, host));
  std::vector<int> serving;
  for (int n : f.hosts[*h].nics) {
    // A NIC serving several GPUs is no HCCL device (hccl_device): never the one named.
    const Result<int> d = hccl_device(f, f.nics[n]);
    if (d && *d == device) serving.push_back(n);
  }
  if (serving.size() > 1) {
    std::vector<int> by_ip;
    for (int n : serving) {
      if (!f.nics[n].address.empty() && f.nics[n].address == ip) by_ip.push_back(n);
    }
    if (by_ip.size() == 1) return by_ip[0];
    std::vector<std::string> names;
    for (int n : serving) names.push_back(f.nics[n].name);
    return invalid_argument(fmt::format("{}: device {} of host '{}' is served by NICs {} (one NIC's ports on several "
                                        "planes), and device_ip '{}' is the address of none of them in the topology; "
                                        "give the NICs their addresses, or use --format csv",
                                        where, device, host, fmt::join(names, ", "), ip));
  }
  if (serving.empty()) {
    return invalid_argument(fmt::format("{}: host '{}' has no NIC serving device {} (a NIC's device is its one GPU "
                                        "in the topology, or its index when it lists none)",
                                        where, host, device));
  }
  return serving[0];
}

Result<RankOrder> read_hccl(const topo::Fabric& f, std::string_view text) {
  WEFT_ASSIGN_OR_RETURN(json root, parse_json(text));
  std::map<long, int> by_rank;
  try {
    if (root.at("version").get<std::string>() != "1.0") return invalid_argument("/version: only rank table 1.0 is read");
    const auto& servers = root.at("server_list");
    for (size_t s = 0; s < servers.size(); ++s) {
      const std::string host = servers[s].at("server_id").get<std::string>();
      const auto& devs = servers[s].at("device");
      for (size_t d = 0; d < devs.size(); ++d) {
        auto dev = to_long(devs[d].at("device_id").get<std::string>());
        auto rank = to_long(devs[d].at("rank_id").get<std::string>());
        const std::string where = fmt::format("/server_list/{}/device/{}", s, d);
        if (!dev || !rank) return invalid_argument(fmt::format("{}: bad number", where));
        const std::string ip = devs[d].contains("device_ip") ? devs[d].at("device_ip").get<std::string>() : "";
        WEFT_ASSIGN_OR_RETURN(int nic, nic_of_device(f, host, *dev, ip, where));
        if (!by_rank.emplace(*rank, nic).second) return invalid_argument(fmt::format("rank_id {} given twice", *rank));
      }
    }
  } catch (const json::exception& e) {
    return invalid_argument(fmt::format("not an HCCL rank table: {}", e.what()));
  }
  return order_from_ranks(by_rank, "rank_id");
}

Result<RankOrder> read_torchrun(const topo::Fabric& f, std::string_view text) {
  long per_node = -1;
  HostCursor cur(f);
  RankOrder o;
  long expect = 0;
  auto lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    auto line = trim(lines[i]);
    if (line.empty()) continue;
    if (line[0] == '#') {
      auto p = line.find("nproc_per_node=");
      if (p != std::string_view::npos) per_node = to_long(trim(line.substr(p + 15))).value_or(-1);
      continue;
    }
    if (per_node < 1) return invalid_argument("torchrun node order lacks '# nproc_per_node=N' before the nodes");
    auto sp = line.find(' ');
    auto k = to_long(line.substr(0, sp));
    if (sp == std::string_view::npos || !k || *k != expect) {
      return invalid_argument(fmt::format("line {}: expected '{} host'", i + 1, expect));
    }
    ++expect;
    for (long j = 0; j < per_node; ++j) {
      WEFT_ASSIGN_OR_RETURN(int nic, cur.next(trim(line.substr(sp + 1)), i + 1));
      o.nics.push_back(nic);
    }
  }
  return o;
}

}  // namespace

std::string_view rank_format_name(RankFormat f) {
  switch (f) {
    case RankFormat::kOpenMpi: return "openmpi";
    case RankFormat::kMpich: return "mpich";
    case RankFormat::kSlurm: return "slurm";
    case RankFormat::kHccl: return "hccl";
    case RankFormat::kTorchrun: return "torchrun";
    case RankFormat::kCsv: return "csv";
  }
  return "csv";
}

std::optional<RankFormat> parse_rank_format(std::string_view s) {
  for (auto f : {RankFormat::kOpenMpi, RankFormat::kMpich, RankFormat::kSlurm, RankFormat::kHccl,
                 RankFormat::kTorchrun, RankFormat::kCsv}) {
    if (rank_format_name(f) == s) return f;
  }
  return std::nullopt;
}

bool format_carries_nics(RankFormat f) {
  return f == RankFormat::kOpenMpi || f == RankFormat::kHccl || f == RankFormat::kCsv;
}

// A file that names hosts only is read (here, and by a launcher whose local
// rank k drives device k) as giving a host's k-th rank its k-th NIC: an order
// that puts a rank elsewhere (a host given in part, or its NICs ranked out of
// their order) would run on other NICs than it was ranked and routed for.
Status check_host_only(const topo::Fabric& f, const RankOrder& o, RankFormat fmt) {
  std::map<int, size_t> seen;
  for (int r = 0; r < o.size(); ++r) {
    const auto& nic = f.nics[o.nics[r]];
    const auto& host = f.hosts[nic.host];
    const int reads_as = host.nics[seen[nic.host]++];
    if (reads_as == o.nics[r]) continue;
    return invalid_argument(fmt::format(
        "{} cannot express this order: it names hosts only, and a host's k-th rank runs on its k-th NIC, so rank {} "
        "would run on {}:{} where the order puts {}:{}; use --format csv or hccl, which name each rank's NIC",
        rank_format_name(fmt), r, host.name, f.nics[reads_as].name, host.name, nic.name));
  }
  return ok_status();
}

Result<std::string> format_rank_file(const topo::Fabric& f, const RankOrder& order, RankFormat fmt) {
  WEFT_RETURN_IF_ERROR(validate_order(f, order));
  switch (fmt) {
    case RankFormat::kOpenMpi: return write_openmpi(f, order);
    case RankFormat::kMpich: {
      WEFT_ASSIGN_OR_RETURN(std::string text, write_mpich(f, order));  // its blocks first: the plainer reason
      WEFT_RETURN_IF_ERROR(check_host_only(f, order, fmt));
      return text;
    }
    case RankFormat::kSlurm: WEFT_RETURN_IF_ERROR(check_host_only(f, order, fmt)); return write_slurm(f, order);
    case RankFormat::kHccl: return write_hccl(f, order);
    case RankFormat::kTorchrun: {
      WEFT_ASSIGN_OR_RETURN(std::string text, write_torchrun(f, order));  // its blocks first: the plainer reason
      WEFT_RETURN_IF_ERROR(check_host_only(f, order, fmt));
      return text;
    }
    case RankFormat::kCsv: return write_csv(f, order);
  }
  return internal_error("unknown rank format");
}

Status write_rank_file(const topo::Fabric& f, const RankOrder& order, RankFormat fmt, const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(std::string text, format_rank_file(f, order, fmt));
  return write_file_atomic(path, text);
}

std::optional<RankFormat> detect_rank_format(std::string_view text) {
  for (auto line : lines_of(text)) {
    line = trim(line);
    if (line.empty()) continue;
    if (line[0] == '{') return RankFormat::kHccl;
    if (line == "rank,host,nic,switch") return RankFormat::kCsv;
    if (line.find("torchrun") != std::string_view::npos && line[0] == '#') return RankFormat::kTorchrun;
    if (line[0] == '#') {
      if (line.find("Open MPI") != std::string_view::npos) return RankFormat::kOpenMpi;
      if (line.find("MPICH") != std::string_view::npos) return RankFormat::kMpich;
      continue;
    }
    if (line.substr(0, 5) == "rank ") return RankFormat::kOpenMpi;
    if (line.find(':') != std::string_view::npos) return RankFormat::kMpich;
    return RankFormat::kSlurm;
  }
  return std::nullopt;
}

Result<RankOrder> parse_rank_file(const topo::Fabric& f, const std::string& text, std::optional<RankFormat> fmt) {
  if (!fmt) fmt = detect_rank_format(text);
  if (!fmt) return invalid_argument("empty rank file");
  Result<RankOrder> o = invalid_argument("unknown rank format");
  switch (*fmt) {
    case RankFormat::kOpenMpi: o = read_openmpi(f, text); break;
    case RankFormat::kMpich: o = read_mpich(f, text); break;
    case RankFormat::kSlurm: o = read_slurm(f, text); break;
    case RankFormat::kHccl: o = read_hccl(f, text); break;
    case RankFormat::kTorchrun: o = read_torchrun(f, text); break;
    case RankFormat::kCsv: o = read_csv(f, text); break;
  }
  if (!o) return o.status().with_context(std::string(rank_format_name(*fmt)) + " rank file");
  if (o->nics.empty()) return invalid_argument(fmt::format("{} rank file has no ranks", rank_format_name(*fmt)));
  WEFT_RETURN_IF_ERROR(validate_order(f, *o));
  return o;
}

Result<RankOrder> load_rank_file(const topo::Fabric& f, const std::string& path, std::optional<RankFormat> fmt) {
  WEFT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  auto o = parse_rank_file(f, text, fmt);
  if (!o) return o.status().with_context(path);
  return o;
}

}  // namespace weft::ranking
