// WatchState (watch_state.h).
#include "watch/watch_state.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace weft::cli {

using routing::PathHealth;
using routing::Verdict;

WatchState::WatchState(std::vector<WatchTuple> tuples, std::vector<uint32_t> host_ips, int leaves, int spines,
                       WatchRules rules)
    : tuples_(std::move(tuples)), host_ips_(std::move(host_ips)), live_(tuples_.size()), leaves_(leaves),
      spines_(spines), rules_(rules) {
  for (size_t i = 0; i < tuples_.size(); ++i) {
    by_arrival_[{tuples_[i].dst, host_ips_[static_cast<size_t>(tuples_[i].src)], tuples_[i].sport}] = i;
    const auto h = static_cast<size_t>(tuples_[i].src);
    if (by_host_.size() <= h) by_host_.resize(h + 1);
    by_host_[h].push_back(i);
  }
}

std::string WatchState::link_name(int id) const {
  const int leaf = id / 2 / spines_ + 1, spine = id / 2 % spines_ + 1;
  return id % 2 ? fmt::format("s{}->l{}", spine, leaf) : fmt::format("l{}->s{}", leaf, spine);
}

std::vector<probe::MonitorTuple> WatchState::tuples_of(int host) const {
  std::vector<probe::MonitorTuple> out;
  if (static_cast<size_t>(host) >= by_host_.size()) return out;
  for (size_t i : by_host_[static_cast<size_t>(host)]) {
    out.push_back({host_ips_[static_cast<size_t>(tuples_[i].dst)], tuples_[i].sport});
  }
  return out;
}

LinkEvent on_wall_clock(LinkEvent e, uint64_t monotonic_now_ns, uint64_t realtime_now_ns) {
  const auto wall = [&](uint64_t t) -> uint64_t {
    if (t == 0) return 0;
    const uint64_t ago = monotonic_now_ns > t ? monotonic_now_ns - t : 0;
    return realtime_now_ns > ago ? realtime_now_ns - ago : 1;
  };
  e.first_loss_ns = wall(e.first_loss_ns);
  e.at_ns = wall(e.at_ns);
  return e;
}

void WatchState::update(int host, std::span<const probe::TupleTally> rows, uint64_t now_ns) {
  if (host < 0 || static_cast<size_t>(host) >= by_host_.size()) return;
  const auto& mine = by_host_[static_cast<size_t>(host)];
  if (rows.size() != mine.size()) return;
  for (size_t k = 0; k < rows.size(); ++k) {
    Live& l = live_[mine[k]];
    if (rows[k].sport != tuples_[mine[k]].sport) return;
    if (rows[k].streak == 0) {
      l.loss_since_ns = 0;
    } else if (l.loss_since_ns == 0) {
      l.loss_since_ns = now_ns;
    }
    l.last = rows[k];
    l.report_ns = now_ns;
  }
}

void WatchState::restarted(int host) {
  if (host < 0 || static_cast<size_t>(host) >= by_host_.size()) return;
  for (size_t i : by_host_[static_cast<size_t>(host)]) {
    Live& l = live_[i];
    l.sent_before += std::exchange(l.last.sent, 0);
    l.answered_before += std::exchange(l.last.answered, 0);
    l.lost_before += std::exchange(l.last.lost, 0);
  }
}

void WatchState::arrived(int host, std::span<const agent::Arrival> arrivals, uint64_t now_ns) {
  for (const agent::Arrival& a : arrivals) {
    auto it = by_arrival_.find({host, a.src_ip, a.sport});
    if (it == by_arrival_.end()) continue;
    Live& l = live_[it->second];
    // A count that fell is a new monitor's (its agent was reconnected and
    // counts from zero): what it counted arrived since.
    if (a.count > l.arrivals || (a.count < l.arrivals && a.count > 0)) l.arrivals_grew_ns = now_ns;
    l.arrivals = a.count;
  }
  // Every tuple towards this host was reported on, arrived or not.
  for (auto& [key, i] : by_arrival_) {
    if (std::get<0>(key) == host) live_[i].arrivals_report_ns = now_ns;
  }
}

WatchState::State WatchState::state(const Live& l, uint64_t now_ns) const {
  if (l.report_ns == 0 || now_ns - l.report_ns > rules_.stale_ms * 1000000) return State::kUnknown;
  if (l.last.streak == 0 && l.last.answered > 0) return State::kHealthy;
  if (l.last.streak < rules_.streak) return State::kUnknown;
  if (l.arrivals_report_ns == 0) return State::kRoundTripFailing;
  // A report interval after the losses began, requests sent before them have
  // surely been counted: growth after that is requests that still arrive.
  const uint64_t settled = l.loss_since_ns + rules_.report_ms * 1000000;
  if (l.arrivals_grew_ns > settled) return State::kReplyFailing;
  if (l.arrivals_report_ns > settled) return State::kForwardFailing;
  return State::kUnknown;
}

std::vector<LinkEvent> WatchState::evaluate(uint64_t now_ns) {
  std::vector<routing::ProbedPath> paths;
  uint64_t first_loss = 0;
  // A link comes back up on evidence only: a healthy probe crossing it. When
  // the routing withdraws a failed link, its tuples hash onto other spines
  // (their replies name the new spine) and every path turns healthy while
  // nothing crosses the link at all.
  bool down_carried = false;
  for (size_t i = 0; i < tuples_.size(); ++i) {
    const WatchTuple& t = tuples_[i];
    const Live& l = live_[i];
    const State st = state(l, now_ns);
    if (st == State::kUnknown) continue;
    const int spine = l.last.spine >= 1 && l.last.spine <= spines_ ? l.last.spine : t.spine;
    std::vector<int> forward = {up(t.src_leaf, spine), down(spine, t.dst_leaf)};
    std::vector<int> reply;
    for (int s = 1; s <= spines_; ++s) {
      reply.push_back(up(t.dst_leaf, s));
      reply.push_back(down(s, t.src_leaf));
    }
    if (st == State::kHealthy && down_ && (forward[0] == *down_ || forward[1] == *down_)) down_carried = true;
    switch (st) {
      case State::kHealthy: paths.push_back({forward, {}, PathHealth::kHealthy}); break;
      case State::kForwardFailing: paths.push_back({forward, {}, PathHealth::kFailing}); break;
      case State::kReplyFailing:
        paths.push_back({forward, {}, PathHealth::kHealthy});
        paths.push_back({{}, reply, PathHealth::kFailing});
        break;
      case State::kRoundTripFailing: paths.push_back({forward, reply, PathHealth::kFailing}); break;
      case State::kUnknown: break;
    }
    if (st != State::kHealthy && (first_loss == 0 || l.loss_since_ns < first_loss)) first_loss = l.loss_since_ns;
  }
  // Link ids (up()/down() above) differ in their lowest bit only between the
  // two directions of a cable: a cut cable is named as such.
  const routing::Localisation loc = routing::localise(paths, [](int e) { return e ^ 1; });
  // A localised link that grows into its cable (the other direction's
  // evidence comes later, e.g. from hosts whose reports crossed the cable
  // until they were reconnected) is the same failure known better: the
  // verdict keeps the time it has held.
  const bool grows = loc.verdict == Verdict::kLocalised && pending_ == Verdict::kLocalised &&
                     down_carried == pending_carried_ && loc.links.size() > pending_links_.size() &&
                     std::all_of(pending_links_.begin(), pending_links_.end(), [&](int id) {
                       return std::find(loc.links.begin(), loc.links.end(), id) != loc.links.end();
                     });
  if (grows) {
    pending_links_ = loc.links;
  } else if (loc.verdict != pending_ || loc.links != pending_links_ || down_carried != pending_carried_) {
    pending_ = loc.verdict;
    pending_links_ = loc.links;
    pending_held_ = loc.links;
    pending_carried_ = down_carried;
    pending_since_ = now_ns;
    pending_reported_ = false;
  }
  std::vector<LinkEvent> events;
  if (pending_reported_ || now_ns - pending_since_ < rules_.confirm_ms * 1000000) return events;
  pending_reported_ = true;
  auto names = [&](const std::vector<int>& ids) {
    std::vector<std::string> v;
    for (int id : ids) v.push_back(link_name(id));
    return v;
  };
  switch (pending_) {
    case Verdict::kLocalised:
      if (!down_) {
        // The links that held the whole wait come first: a failure of one
        // direction may look like its cable only at the end (a reconnected
        // host's first report), and the record names the first.
        std::vector<int> ordered = pending_held_;
        for (int id : pending_links_) {
          if (std::find(ordered.begin(), ordered.end(), id) == ordered.end()) ordered.push_back(id);
        }
        down_ = ordered[0];
        events.push_back({LinkEvent::Kind::kDown, names(ordered), first_loss, now_ns});
      }
      break;
    case Verdict::kNone:
      if (down_ && pending_carried_) {
        events.push_back({LinkEvent::Kind::kUp, {link_name(*down_)}, 0, now_ns});
        down_.reset();
      }
      break;
    case Verdict::kAmbiguous:
      if (!down_) events.push_back({LinkEvent::Kind::kAmbiguous, names(pending_links_), first_loss, now_ns});
      break;
    case Verdict::kUnexplained:
      if (!down_) events.push_back({LinkEvent::Kind::kUnexplained, {}, first_loss, now_ns});
      break;
  }
  return events;
}

WatchCounts WatchState::counts(uint64_t now_ns) const {
  WatchCounts c;
  c.tuples = tuples_.size();
  for (const Live& l : live_) {
    switch (state(l, now_ns)) {
      case State::kHealthy: ++c.healthy; break;
      case State::kUnknown: ++c.unknown; break;
      default: ++c.failing; break;
    }
    c.sent += l.sent_before + l.last.sent;
    c.answered += l.answered_before + l.last.answered;
    c.lost += l.lost_before + l.last.lost;
  }
  if (down_) c.down = link_name(*down_);
  c.verdict = pending_;
  return c;
}

size_t WatchState::hosts_with_tuples(size_t hosts) const {
  size_t n = 0;
  for (size_t h = 0; h < std::min(hosts, by_host_.size()); ++h) n += !by_host_[h].empty();
  return n;
}

}  // namespace weft::cli

namespace weft::cli {

std::string WatchState::describe_unhealthy(uint64_t now_ns) const {
  std::string out;
  for (size_t i = 0; i < tuples_.size(); ++i) {
    const State st = state(live_[i], now_ns);
    if (st == State::kHealthy) continue;
    static constexpr const char* kNames[] = {"unknown", "healthy", "forward failing", "reply failing",
                                             "round trip failing"};
    const WatchTuple& t = tuples_[i];
    const Live& l = live_[i];
    out += fmt::format("  host {} (l{}) -> host {} (l{}) sport {} spine {}: {} (lost {} in a row; {} answered, {} arrived)\n",
                       t.src, t.src_leaf, t.dst, t.dst_leaf, t.sport, l.last.spine >= 1 ? l.last.spine : t.spine,
                       kNames[static_cast<int>(st)], l.last.streak, l.last.answered, l.arrivals);
  }
  return out;
}

}  // namespace weft::cli
