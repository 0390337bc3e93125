// Where a profile given as -o PATH goes, for every command (record, render, diff, merge): in the
// format its name says (emit::format_of_path: ".svg", ".pb.gz", else folded), to stdout for "-" or
// else to a file replaced whole, readable by whom it belongs to. Agent mode's dumps name their
// files from the same formats (emit::extension) and write them in their own directory.
#pragma once

#include <string>

#include "common/atomic_file.h"
#include "common/result.h"
#include "emit/svg.h"
#include "profile/symbolized_profile.h"

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

// Writes path with write_content: "-" is stdout, anything else a file written whole
// (write_output_file) with profile_file_access(). A failure keeps write_content's message.
[[nodiscard]] Result<> write_output(const std::string& path, const ContentWriter& write_content);

// Writes profile to path in the format its name says: a flame graph styled by graph (its
// target_frame puts each stack under its target's name in folded text too), pprof, or folded.
[[nodiscard]] Result<> write_profile(const std::string& path,
                                     const profile::SymbolizedProfile& profile,
                                     const emit::SvgOptions& graph);

} // namespace flamebpf::pipeline
