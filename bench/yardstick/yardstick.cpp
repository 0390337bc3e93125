// Runs the yardstick program (with -e, the empty one) on every CPU at -F Hz until -d seconds pass
// or SIGINT/SIGTERM, and prints when its first sample came: bench/overhead.sh compares flamebpf's
// in-kernel cost and start-up with it.
#include <bpf/libbpf.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <linux/perf_event.h>
#include <string>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "yardstick.skel.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;

double monotonic_seconds()
{
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

int usage()
{
  std::fprintf(stderr, "usage: flamebpf-yardstick [-e] [-F HZ] [-d SECONDS]\n");
  return 2;
}

} // namespace

int main(int argc, char** argv)
{
  double started = monotonic_seconds();
  unsigned long frequency = 99;
  double duration = 0;
  bool empty = false;
  int option;
  while ((option = getopt(argc, argv, "eF:d:")) != -1) {
    if (option == 'e')
      empty = true;
    else if (option == 'F')
      frequency = std::strtoul(optarg, nullptr, 10);
    else if (option == 'd')
      duration = std::strtod(optarg, nullptr);
    else
      return usage();
  }
  if (frequency == 0)
    return usage();
  std::signal(SIGINT, [](int) { g_stop = 1; });
  std::signal(SIGTERM, [](int) { g_stop = 1; });

  yardstick* skeleton = yardstick::open_and_load();
  if (!skeleton) {
    std::fprintf(stderr, "yardstick: cannot load the program: %s\n", std::strerror(errno));
    return 1;
  }
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.freq = 1;
  attr.sample_freq = frequency;
  std::vector<bpf_link*> links;
  int cpus = libbpf_num_possible_cpus();
  for (int cpu = 0; cpu < cpus; ++cpu) {
    int fd =
        static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0)
      continue; // an offline CPU
    bpf_link* link = bpf_program__attach_perf_event(
        empty ? skeleton->progs.empty : skeleton->progs.yardstick, fd);
    if (!link) {
      std::fprintf(stderr, "yardstick: cannot attach to CPU %d: %s\n", cpu, std::strerror(errno));
      return 1;
    }
    links.push_back(link);
  }
  if (links.empty()) {
    std::fprintf(stderr, "yardstick: no CPU could be sampled\n");
    return 1;
  }
  std::fprintf(stderr, "yardstick: sampling %zu CPUs at %lu Hz\n", links.size(), frequency);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(duration);
  bool reported = false;
  auto report_first_sample = [&] {
    uint64_t first = __atomic_load_n(&skeleton->bss->first_sample_ns, __ATOMIC_RELAXED);
    if (reported || first == 0)
      return;
    double at = static_cast<double>(first) / 1e9;
    std::fprintf(stderr, "yardstick: first sample at %.6f (monotonic), %.3f s after start\n", at,
                 at - started);
    reported = true;
  };
  while (!g_stop && (duration == 0 || std::chrono::steady_clock::now() < deadline)) {
    report_first_sample();
    std::this_thread::sleep_for(std::chrono::milliseconds(reported ? 20 : 1));
  }
  report_first_sample();
  for (bpf_link* link : links)
    bpf_link__destroy(link);
  yardstick::destroy(skeleton);
  return 0;
}
