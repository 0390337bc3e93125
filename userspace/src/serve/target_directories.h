// The targets' directories in agent mode's output directory, as the routes look them up: a name
// from a request is matched against the directories there are, never used as a path.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flamebpf::serve {

// The subdirectories of directory, by name, sorted (no symbolic link, nothing else).
std::vector<std::string> subdirectories(const std::string& directory);

// output_dir/target, if output_dir has a subdirectory named target.
std::optional<std::string> find_target_directory(const std::string& output_dir,
                                                 std::string_view target);

} // namespace flamebpf::serve
