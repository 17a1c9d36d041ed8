#include "roce_capture.h"

#include <arpa/inet.h>

#include <chrono>

namespace weft::verbs::testing {

bool parse_roce(const std::uint8_t* p, std::size_t n, RocePacket* out) {
  if (n < 14 + 20 + 8 + 12 || p[12] != 0x08 || p[13] != 0x00) return false;
  const std::uint8_t* ip = p + 14;
  const std::size_t ihl = (ip[0] & 0x0Fu) * 4u;
  if (ip[9] != 17 || n < 14 + ihl + 8 + 12) return false;
  const std::uint8_t* udp = ip + ihl;
  if ((udp[2] << 8 | udp[3]) != 4791) return false;
  // The destination QP is bytes 5..7 of the 12-byte base transport header
  // (IBTA vol. 1, 9.2).
  const std::uint8_t* bth = udp + 8;
  out->sport = static_cast<std::uint16_t>(udp[0] << 8 | udp[1]);
  out->dest_qpn = static_cast<std::uint32_t>(bth[5] << 16 | bth[6] << 8 | bth[7]);
  out->opcode = bth[0];
  out->tos = ip[1];
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, ip + 16, buf, sizeof buf);
  out->dst_ip = buf;
  return true;
}

Status RoceCapture::start(const std::string& netdev) {
  char err[PCAP_ERRBUF_SIZE] = {};
  pc_ = pcap_create(netdev.c_str(), err);
  if (pc_ == nullptr) return unavailable(std::string("pcap_create(") + netdev + "): " + err);
  pcap_set_snaplen(pc_, 128);
  pcap_set_immediate_mode(pc_, 1);
  pcap_set_buffer_size(pc_, 32 << 20);
  pcap_set_timeout(pc_, 50);
  if (pcap_activate(pc_) != 0) return unavailable(std::string("pcap_activate: ") + pcap_geterr(pc_));
  bpf_program prog{};
  if (pcap_compile(pc_, &prog, "udp dst port 4791", 1, PCAP_NETMASK_UNKNOWN) != 0) {
    return unavailable(std::string("pcap_compile: ") + pcap_geterr(pc_));
  }
  const int rc = pcap_setfilter(pc_, &prog);
  pcap_freecode(&prog);
  if (rc != 0) return unavailable(std::string("pcap_setfilter: ") + pcap_geterr(pc_));
  if (pcap_setnonblock(pc_, 1, err) != 0) return unavailable(std::string("pcap_setnonblock: ") + err);
  thread_ = std::thread([this] {
    while (!stop_) {
      if (drain() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    drain();
  });
  return ok_status();
}

std::vector<RocePacket> RoceCapture::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (pc_ != nullptr) pcap_close(pc_);
  pc_ = nullptr;
  return std::move(seen_);
}

int RoceCapture::drain() {
  return pcap_dispatch(
      pc_, -1,
      [](u_char* user, const pcap_pkthdr* h, const u_char* bytes) {
        RocePacket p;
        if (parse_roce(bytes, h->caplen, &p)) reinterpret_cast<std::vector<RocePacket>*>(user)->push_back(p);
      },
      reinterpret_cast<u_char*>(&seen_));
}

}  // namespace weft::verbs::testing
