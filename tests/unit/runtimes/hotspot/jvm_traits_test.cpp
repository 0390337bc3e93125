#include <gtest/gtest.h>
#include <string>
#include <string_view>

#include "common/proc_maps.h"
#include "runtimes/hotspot/jvm_traits.h"

namespace flamebpf::hotspot {
namespace {

TEST(JvmTraits, HotspotOpenJ9AndPerfMapAgents)
{
  auto traits = [](std::string_view text) { return jvm_traits(procfs::parse_proc_maps(text)); };
  constexpr std::string_view kHotspot =
      "7f0000000000-7f0000001000 r-xp 00000000 08:01 42 /opt/java/lib/server/libjvm.so\n";
  EXPECT_TRUE(traits(kHotspot).hotspot);
  EXPECT_FALSE(traits(kHotspot).keeps_perf_map);
  // Any mapping names the VM, executable or not; a file merely called like it does not.
  EXPECT_TRUE(traits("7f0000000000-7f0000001000 r--p 00000000 08:01 42 /jdk/libjvm.so\n").hotspot);
  EXPECT_FALSE(traits("7f0000000000-7f0000001000 r-xp 00000000 08:01 42 /x/libjvm.so.1\n").hotspot);
  // OpenJ9 ships a libjvm.so too, but its SIGQUIT is not HotSpot's.
  EXPECT_FALSE(traits(std::string(kHotspot) +
                      "7f0000100000-7f0000101000 r-xp 00000000 08:01 43 /opt/j9/libj9vm29.so\n")
                   .hotspot);
  EXPECT_TRUE(traits(std::string(kHotspot) +
                     "7f0000100000-7f0000101000 r-xp 00000000 08:01 44 /tmp/libperfmap.so\n")
                  .keeps_perf_map);
  EXPECT_TRUE(traits(std::string(kHotspot) + "7f0000100000-7f0000101000 r-xp 00000000 08:01 45 "
                                             "/tmp/libflamebpf-agent-0123456789abcdef.so\n")
                  .keeps_perf_map);
  EXPECT_FALSE(traits("").hotspot);
  // The launcher, before it loads the VM.
  auto launcher = traits("7f0000000000-7f0000001000 r-xp 00000000 08:01 46 /jdk/lib/libjli.so\n");
  EXPECT_TRUE(launcher.launcher);
  EXPECT_FALSE(launcher.hotspot);
}

} // namespace
} // namespace flamebpf::hotspot
