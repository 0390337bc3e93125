// Node.js as a runtime (runtimes/runtime.h). V8 names its generated code in /tmp/perf-<pid>.map
// when node runs with --perf-basic-prof; a JavaScript function's entry reads
// "JS:<tier><name> <script>:<line>:<column>" ("LazyCompile:" before V8 11, Node 20), where the
// tier marks how V8 compiled it: '~' not
// optimized (the interpreter's or the baseline compiler's code), '^' Sparkplug, '+' Maglev, '*'
// TurboFan. One function is one frame whatever its tier, "name script:line:column", so that a
// function's time is not split across tiers; unoptimized code is an interpreted frame, compiled
// code a JIT frame. Builtins, stubs and regular expressions keep V8's names.
#pragma once

#include <string_view>
#include <unordered_set>

#include "runtimes/runtime.h"
#include "symbolize/process_table.h"

namespace flamebpf::node {

// The frame of one name V8 wrote into a perf map.
profile::Frame node_frame(std::string_view name);

class NodeRuntime final : public runtimes::Runtime {
public:
  std::string_view name() const override { return "Node.js"; }
  // A node process: its executable is node (or nodejs), or it maps libnode.so.
  void captured(symbolize::ProcessTable& processes,
                const symbolize::ImageKey& key,
                const symbolize::ProcessImage& image,
                const std::vector<procfs::Mapping>& mappings) override;
  std::optional<runtimes::NamedCode> name_code(symbolize::ProcessTable& processes,
                                               const symbolize::ImageKey& key,
                                               uint64_t address,
                                               bool anonymous) override;
  void forget(const symbolize::ImageKey& key, bool exited) override;

private:
  std::unordered_set<symbolize::ImageKey, symbolize::ImageKeyHash> images_;
};

} // namespace flamebpf::node
