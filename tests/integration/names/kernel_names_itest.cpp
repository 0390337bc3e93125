// Kernel frames named without /proc/kallsyms: the kernel names its own addresses through the
// kernel_names BPF program, which is how flamebpf names them wherever the kernel runs it (and the
// only way without CAP_SYSLOG while perf_event_paranoid > 1). Checked against kallsyms, read here
// as root.
#include <gtest/gtest.h>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "harness.h"
#include "symbolize/kernel_names.h"

namespace flamebpf::testing {
namespace {

using symbolize::BpfKernelNames;

TEST(BpfKernelNames, AgreeWithKallsyms)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  // Every address of a function in kallsyms, with every name it has (aliases share addresses).
  std::map<uint64_t, std::set<std::string>> names_at;
  std::map<uint64_t, std::string> module_at;
  std::istringstream kallsyms(read_text("/proc/kallsyms"));
  for (std::string line; std::getline(kallsyms, line);) {
    std::istringstream fields(line);
    std::string address, type, name, module;
    fields >> address >> type >> name >> module;
    // Code that is not a module's but listed like one (BPF programs, ftrace trampolines) comes
    // and goes: left out.
    if ((type != "t" && type != "T") || module == "[bpf]" || module.starts_with("[__builtin"))
      continue;
    uint64_t value = std::stoull(address, nullptr, 16);
    names_at[value].insert(name);
    if (!module.empty())
      module_at[value] = module.substr(1, module.size() - 2);
  }
  ASSERT_GT(names_at.size(), 10000u);
  ASSERT_NE(names_at.begin()->first, 0u) << "kallsyms shows zeros even to root";

  // Every 50th function, and the byte after each (inside the function, as a return address is).
  std::vector<uint64_t> addresses;
  size_t index = 0;
  for (const auto& [address, names] : names_at) {
    if (index++ % 50 == 0) {
      addresses.push_back(address);
      addresses.push_back(address + 1);
    }
  }
  // And functions of loaded modules, named with their module.
  size_t module_functions = 0;
  for (const auto& [address, module] : module_at) {
    if (module_functions++ % 5 == 0 && module_functions < 1000)
      addresses.push_back(address + 1);
  }
  auto bpf = BpfKernelNames::load();
  ASSERT_TRUE(bpf.has_value()) << bpf.error().message;
  bpf->prepare(addresses);
  size_t named = 0;
  size_t modules = 0;
  for (uint64_t address : addresses) {
    auto symbol = bpf->lookup(address);
    auto at = names_at.upper_bound(address);
    --at;
    if (!symbol)
      continue;
    ++named;
    EXPECT_TRUE(at->second.contains(std::string(symbol->name)))
        << std::hex << address << ": BPF says " << symbol->name << ", kallsyms "
        << *at->second.begin();
    if (module_at.contains(at->first)) {
      ++modules;
      EXPECT_EQ(symbol->module, module_at[at->first]) << symbol->name;
    } else {
      EXPECT_EQ(symbol->module, "") << symbol->name;
    }
  }
  // Some functions of kallsyms (e.g. in init sections freed after boot) are no longer text.
  EXPECT_GT(named, addresses.size() * 9 / 10) << named << " of " << addresses.size();
  std::printf("[ FIGURES  ] %zu of %zu kernel addresses named through BPF (%zu in modules)\n",
              named, addresses.size(), modules);
}

// As flamebpf uses it: with only the capabilities of the systemd unit, kallsyms shows zeros
// here, and kernel frames are still named.
TEST(BpfKernelNames, FlamebpfWithTheServicesCapabilitiesNamesKernelFrames)
{
  if (::access("/usr/bin/setpriv", X_OK) != 0)
    GTEST_SKIP() << "setpriv (util-linux) is not installed";
  TempDir dir;
  std::string burner = copy_burner(dir.path(), "burner_caps");
  Child workload({burner, "10"});
  // Work in the kernel, so that kernel frames are sampled on a quiet machine too.
  Child kernel_work({"/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=4k"});
  std::string caps = "-all,+bpf,+perfmon,+sys_admin,+sys_ptrace";
  std::string out = dir.path().string() + "/caps.folded";
  std::string log = dir.path().string() + "/caps.log";
  // The whole host, so that kernel work (timer interrupts, syscalls) is in the samples.
  Child run({"/usr/bin/setpriv", "--inh-caps=" + caps, "--bounding-set=" + caps, FLAMEBPF_BINARY,
             "-d", "2", "-o", out},
            "", log);
  ASSERT_EQ(run.wait(), 0) << read_text(log);
  auto folded = read_folded(out);
  uint64_t kernel_named = 0;
  uint64_t kernel_unknown = 0;
  for (const auto& [stack, count] : folded) {
    // Kernel frames close a stack; an unnamed one there reads "[unknown]".
    size_t first_kernel = stack.find("_[k]");
    if (first_kernel == std::string::npos)
      continue;
    kernel_named += count;
    if (stack.find("[unknown]", first_kernel) != std::string::npos)
      kernel_unknown += count;
  }
  EXPECT_GT(kernel_named, 0u) << read_text(out);
  EXPECT_EQ(kernel_unknown, 0u) << read_text(out);
  EXPECT_GT(burner_chain_samples(folded, "burner_caps", read_text(log)), 50u);
}

} // namespace
} // namespace flamebpf::testing
