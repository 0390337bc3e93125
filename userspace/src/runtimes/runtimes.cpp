#include "runtimes/runtimes.h"

#include "runtimes/cpython/cpython_runtime.h"
#include "runtimes/hotspot/hotspot_runtime.h"
#include "runtimes/node/node_runtime.h"

namespace flamebpf::runtimes {

std::vector<std::unique_ptr<Runtime>> make_runtimes(const RuntimeOptions& options)
{
  std::vector<std::unique_ptr<Runtime>> runtimes;
  hotspot::HotSpotOptions hotspot;
  hotspot.java_signatures = options.java_signatures;
  hotspot.attacher.attach = options.attach;
  hotspot.attacher.proc_root = options.proc_root;
  hotspot.unwinds_by_records = options.unwinder;
  runtimes.push_back(std::make_unique<hotspot::HotSpotRuntime>(std::move(hotspot)));
  runtimes.push_back(std::make_unique<node::NodeRuntime>());
  runtimes.push_back(std::make_unique<cpython::CPythonRuntime>());
  return runtimes;
}

} // namespace flamebpf::runtimes
