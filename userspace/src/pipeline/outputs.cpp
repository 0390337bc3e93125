#include "pipeline/outputs.h"

#include <cstdlib>
#include <ctime>
#include <iostream>
#include <optional>
#include <string_view>
#include <unistd.h>

#include "common/text.h"
#include "emit/formats.h"

namespace flamebpf::pipeline {
namespace {

// A user or group id from sudo's environment: decimal, and not -1 (which chown reads as "keep").
template <class Id> std::optional<Id> id_from_environment(const char* variable)
{
  const char* value = std::getenv(variable);
  if (value == nullptr)
    return std::nullopt;
  auto id = text::parse_number<Id>(value);
  if (!id || *id == static_cast<Id>(-1))
    return std::nullopt;
  return id;
}

} // namespace

std::string default_output_path()
{
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  return std::string("./flamebpf-") + stamp + ".folded";
}

std::string output_path_for_target(const std::string& path, const std::string& file_name)
{
  size_t slash = path.rfind('/');
  size_t base = slash == std::string::npos ? 0 : slash + 1;
  // pprof's ".pb.gz" is one extension: "out.web.pb.gz", not "out.pb.web.gz".
  size_t dot = path.ends_with(".pb.gz") ? path.size() - 6 : path.rfind('.');
  // A leading dot (".profile") or none at all: no extension to keep.
  if (dot == std::string::npos || dot <= base)
    return path + "." + file_name;
  return path.substr(0, dot) + "." + file_name + path.substr(dot);
}

FileAccess profile_file_access()
{
  FileAccess access;
  access.mode = 0600;
  auto uid = id_from_environment<uid_t>("SUDO_UID");
  auto gid = id_from_environment<gid_t>("SUDO_GID");
  if (::geteuid() == 0 && uid && gid) {
    access.owner_uid = *uid;
    access.owner_gid = *gid;
  }
  return access;
}

Result<> write_output(const std::string& path, const ContentWriter& write_content)
{
  if (path == "-") {
    if (auto written = write_content(std::cout); !written)
      return fail(error("cannot write to stdout: " + written.error().message));
    return {};
  }
  return write_output_file(path, profile_file_access(), write_content);
}

Result<> write_profile(const std::string& path,
                       const profile::SymbolizedProfile& profile,
                       const emit::SvgOptions& graph)
{
  auto emitter = emit::make_emitter(emit::format_of_path(path), graph);
  return write_output(path, [&](std::ostream& out) { return emitter->write(profile, out); });
}

} // namespace flamebpf::pipeline
