// What this flamebpf binary is: its version and the git commit it was built from.
#pragma once

#include <string>
#include <string_view>

namespace flamebpf::build_info {

// The project's version, e.g. "0.1.0".
std::string_view version();

// The full hash of the commit the binary was built from; empty when it was built outside a git
// checkout (from a release tarball, say).
std::string_view commit();

// Whether tracked files differed from that commit at build time.
bool modified();

// One line for --version: "flamebpf 0.1.0 (commit <hash>)", with ", modified" when the tree
// differed from the commit, or "(not built from a git checkout)".
std::string version_line();

} // namespace flamebpf::build_info
