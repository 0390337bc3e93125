// Where recording mode writes its profiles.
#pragma once

#include <string>

namespace flamebpf::pipeline {

// ./flamebpf-<UTC time>.folded for a recording that starts now.
std::string default_output_path();

// The file of one target when the profile is split per target: "out.folded" and the target's
// file name (profile::target_file_names) "web" give "out.web.folded"; a path without an
// extension gets ".web" appended.
std::string output_path_for_target(const std::string& path, const std::string& file_name);

} // namespace flamebpf::pipeline
