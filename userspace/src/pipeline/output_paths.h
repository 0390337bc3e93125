// Where recording mode (and render, diff, merge) writes its profiles, and who may read them.
#pragma once

#include <string>

#include "common/atomic_file.h"

namespace flamebpf::pipeline {

// ./flamebpf-<UTC time>.folded for a recording that starts now.
std::string default_output_path();

// The file of one target when the profile is split per target: "out.folded" and the target's
// file name (profile::target_file_names) "web" give "out.web.folded"; a path without an
// extension gets ".web" appended.
std::string output_path_for_target(const std::string& path, const std::string& file_name);

// The access of a profile written to -o FILE: readable by its owner only (0600). When flamebpf
// runs through sudo (SUDO_UID and SUDO_GID hold valid ids, and flamebpf is root), the file goes
// to the user who ran sudo, so that they can open it and no one else can.
FileAccess profile_file_access();

} // namespace flamebpf::pipeline
