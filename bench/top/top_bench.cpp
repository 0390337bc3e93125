// What one refresh of `flamebpf top` costs: an interval of `targets` targets with `stacks`
// distinct stacks each (20 frames, names drawn from a pool as a real host's are) is made compact
// (the recording's thread), added to the model, ranked for all targets and for one, and printed
// as a --batch snapshot (the view's thread). Warm: the same names every interval, as a steady host
// has. Usage: flamebpf-top-bench TARGETS STACKS [INTERVALS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <random>
#include <string>
#include <sys/resource.h>
#include <vector>

#include "emit/formats.h"
#include "profile/by_target.h"
#include "top/top_table.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start)
{
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Discards what is written to it, as fast as it can.
class NullBuffer : public std::streambuf {
protected:
  std::streamsize xsputn(const char*, std::streamsize count) override { return count; }
  int overflow(int c) override { return c; }
};

// What agent mode's report cycle does with the same interval (bench/overhead.sh measures it on a
// real recording, folded+svg): split by target, then each part written as folded stacks and SVG.
double report_cycle_ms(const flamebpf::profile::SymbolizedProfile& profile)
{
  auto started = Clock::now();
  NullBuffer buffer;
  std::ostream out(&buffer);
  for (const auto& [target, part] : flamebpf::profile::split_by_target(profile)) {
    for (auto format : {flamebpf::emit::Format::kFolded, flamebpf::emit::Format::kSvg}) {
      if (!flamebpf::emit::make_emitter(format, {})->write(part, out))
        std::abort();
    }
  }
  return ms_since(started);
}

flamebpf::profile::SymbolizedProfile make_interval(size_t targets, size_t stacks, unsigned seed)
{
  std::mt19937 random(seed);
  // 2,000 functions per target, of realistic lengths; the same ones every interval.
  std::vector<std::string> pool;
  for (size_t i = 0; i < 2000; ++i)
    pool.push_back(fmt::format("org.example.service.Component{}.method{}", i % 97, i));
  flamebpf::profile::SymbolizedProfile profile;
  profile.end = std::chrono::system_clock::now();
  profile.start = profile.end - std::chrono::seconds(1);
  profile.frequency_hz = 99;
  for (size_t target = 0; target < targets; ++target) {
    for (size_t i = 0; i < stacks; ++i) {
      flamebpf::profile::Stack stack;
      stack.comm = "java";
      stack.target = fmt::format("prod/shop-{}/web", target);
      stack.count = 1 + random() % 5;
      // Distinct stacks: a shared trunk, then branches that differ.
      for (size_t depth = 0; depth < 20; ++depth) {
        size_t pick = depth < 5 ? depth : (i * 31 + depth * 7 + random() % 13) % pool.size();
        stack.frames.push_back({pool[pick], "",
                                depth % 4 == 3 ? flamebpf::profile::FrameKind::kInlined
                                               : flamebpf::profile::FrameKind::kJit});
      }
      profile.stacks.push_back(std::move(stack));
    }
  }
  return profile;
}

} // namespace

int main(int argc, char** argv)
{
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TARGETS STACKS [INTERVALS]\n", argv[0]);
    return 2;
  }
  size_t targets = std::strtoul(argv[1], nullptr, 10);
  size_t stacks = std::strtoul(argv[2], nullptr, 10);
  size_t intervals = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 10;
  flamebpf::top::TopModel model;
  std::vector<double> compact_ms, model_ms, view_ms, report_ms;
  for (size_t n = 0; n < intervals; ++n) {
    auto profile = make_interval(targets, stacks, static_cast<unsigned>(n));
    // Twice is enough for its median, warm.
    if (n < 3)
      report_ms.push_back(report_cycle_ms(profile));
    auto started = Clock::now();
    auto compact = flamebpf::top::compact_interval(profile, model.names());
    compact_ms.push_back(ms_since(started));
    started = Clock::now();
    model.add(std::move(compact));
    model_ms.push_back(ms_since(started));
    started = Clock::now();
    auto all = model.rows(flamebpf::top::TopWindow::kInterval, flamebpf::top::TopOrder::kSelf, "",
                          std::nullopt);
    auto one = model.rows(flamebpf::top::TopWindow::kDecaying, flamebpf::top::TopOrder::kTotal,
                          "prod/shop-0/web", std::nullopt);
    auto text = flamebpf::top::batch_snapshot(model, flamebpf::top::TopWindow::kInterval,
                                              flamebpf::top::TopOrder::kSelf, 30);
    view_ms.push_back(ms_since(started));
    if (all.empty() || one.empty() || text.empty())
      return 1;
  }
  // Warm: the median of the intervals after the first.
  auto median = [](std::vector<double> values) {
    values.erase(values.begin());
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
  };
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  std::printf("%zu targets x %zu stacks: cold %.1f ms; warm per refresh %.1f ms (compact %.1f on "
              "the recording's thread, model %.1f and view %.1f on the view's); peak RSS %.0f "
              "MiB (with the generator's profiles); agent mode's report cycle (folded+svg) on the "
              "same interval: %.1f ms\n",
              targets, stacks, compact_ms[0] + model_ms[0] + view_ms[0],
              median(compact_ms) + median(model_ms) + median(view_ms), median(compact_ms),
              median(model_ms), median(view_ms), usage.ru_maxrss / 1024.0, median(report_ms));
  return 0;
}
