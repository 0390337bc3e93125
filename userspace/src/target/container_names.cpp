#include "target/container_names.h"

#include <dirent.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "common/contained_file.h"
#include "common/log.h"
#include "common/procfs.h"
#include "common/text.h"
#include "target/container_cgroup.h"

namespace flamebpf::target {
namespace {

constexpr size_t kMaxCmdline = 1 << 16;
constexpr size_t kMaxJson = 4 << 20;

std::vector<std::string_view> split_nul(std::string_view text)
{
  std::vector<std::string_view> parts;
  for (std::string_view part : text::lines(text, '\0'))
    parts.push_back(part);
  return parts;
}

// The value of an option given as "--name value", "--name=value" or "-n value".
std::optional<std::string> option_value(const std::vector<std::string_view>& args,
                                        size_t& index,
                                        std::initializer_list<std::string_view> spellings)
{
  std::string_view arg = args[index];
  for (auto spelling : spellings) {
    if (arg == spelling && index + 1 < args.size())
      return std::string(args[++index]);
    if (spelling.starts_with("--") && arg.size() > spelling.size() && arg.starts_with(spelling) &&
        arg[spelling.size()] == '=')
      return std::string(arg.substr(spelling.size() + 1));
  }
  return std::nullopt;
}

std::optional<std::string> string_field(const nlohmann::json& object, const char* key)
{
  auto it = object.find(key);
  if (it == object.end() || !it->is_string())
    return std::nullopt;
  return it->get<std::string>();
}

// Calls visit(pid) for each process in proc_root whose comm is `comm`.
template <class Visit>
void for_each_process_named(const std::string& proc_root, std::string_view comm, Visit visit)
{
  DIR* proc = ::opendir(proc_root.c_str());
  if (!proc)
    return;
  while (dirent* entry = ::readdir(proc)) {
    std::string_view name = entry->d_name;
    auto pid = text::parse_number<uint32_t>(name);
    if (pid && procfs::read_comm(*pid, proc_root) == comm)
      visit(std::string(name));
  }
  ::closedir(proc);
}

std::string trim_newline(std::string text)
{
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0'))
    text.pop_back();
  return text;
}

} // namespace

DockerdArguments parse_dockerd_cmdline(std::string_view cmdline)
{
  DockerdArguments parsed;
  auto args = split_nul(cmdline);
  for (size_t i = 1; i < args.size(); ++i) {
    if (auto root = option_value(args, i, {"--data-root", "-g", "--graph"}))
      parsed.data_root = *root;
    else if (auto config = option_value(args, i, {"--config-file"}))
      parsed.config_file = *config;
  }
  return parsed;
}

std::optional<std::string> parse_daemon_json_data_root(std::string_view json)
{
  auto parsed = nlohmann::json::parse(json, nullptr, false);
  if (!parsed.is_object())
    return std::nullopt;
  if (auto root = string_field(parsed, "data-root"))
    return root;
  return string_field(parsed, "graph");
}

std::optional<DockerContainerConfig> parse_docker_config(std::string_view json)
{
  auto parsed = nlohmann::json::parse(json, nullptr, false);
  if (!parsed.is_object())
    return std::nullopt;
  auto id = string_field(parsed, "ID");
  auto name = string_field(parsed, "Name");
  if (!id || !name || !is_container_id(*id))
    return std::nullopt;
  DockerContainerConfig config;
  config.id = std::move(*id);
  config.name = name->starts_with('/') ? name->substr(1) : std::move(*name);
  if (auto state = parsed.find("State"); state != parsed.end() && state->is_object()) {
    auto running = state->find("Running");
    config.running = running != state->end() && running->is_boolean() && running->get<bool>();
  }
  return config;
}

std::optional<ConmonArguments> parse_conmon_cmdline(std::string_view cmdline)
{
  ConmonArguments parsed;
  auto args = split_nul(cmdline);
  for (size_t i = 1; i < args.size(); ++i) {
    if (auto id = option_value(args, i, {"-c", "--cid"}))
      parsed.id = *id;
    else if (auto name = option_value(args, i, {"-n", "--name"}))
      parsed.name = *name;
  }
  if (!is_container_id(parsed.id) || parsed.name.empty())
    return std::nullopt;
  return parsed;
}

ContainerNames::ContainerNames(std::string proc_root) : proc_root_(std::move(proc_root)) {}

bool ContainerNames::trusted(const std::string& pid) const
{
  std::string process = proc_root_ + "/" + pid;
  struct stat ours {};
  struct stat theirs {};
  if (::stat((proc_root_ + "/self/ns/pid").c_str(), &ours) != 0 ||
      ::stat((process + "/ns/pid").c_str(), &theirs) != 0)
    return false;
  if (ours.st_dev != theirs.st_dev || ours.st_ino != theirs.st_ino)
    return false;
  // Any user can run a program named dockerd or conmon; only root runs the real ones, from a file
  // only root can change.
  auto status = procfs::read_file(process + "/status", 1 << 16);
  auto euid = status ? procfs::status_field(*status, "Uid", 1) : std::nullopt;
  struct stat program {};
  if (!euid || *euid != 0 || ::stat((process + "/exe").c_str(), &program) != 0)
    return false;
  return program.st_uid == 0 && (program.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

std::vector<ContainerNames::DataRoot> ContainerNames::find_docker_data_roots() const
{
  std::vector<DataRoot> roots;
  for_each_process_named(proc_root_, "dockerd", [&](const std::string& pid) {
    if (!trusted(pid))
      return;
    auto cmdline = procfs::read_file(proc_root_ + "/" + pid + "/cmdline", kMaxCmdline);
    if (!cmdline)
      return;
    auto args = parse_dockerd_cmdline(*cmdline);
    std::string process_root = proc_root_ + "/" + pid + "/root";
    std::string data_root = args.data_root;
    if (data_root.empty()) {
      std::string config = args.config_file.empty() ? "/etc/docker/daemon.json" : args.config_file;
      if (auto json = read_contained(process_root, config, kMaxJson))
        data_root = parse_daemon_json_data_root(*json).value_or("");
    }
    if (data_root.empty())
      data_root = "/var/lib/docker";
    roots.push_back({process_root, data_root});
  });
  return roots;
}

std::optional<DockerContainerConfig> ContainerNames::read_docker_config(const DataRoot& root,
                                                                        const std::string& id) const
{
  auto json = read_contained(root.process_root,
                             root.data_root + "/containers/" + id + "/config.v2.json", kMaxJson);
  if (!json) {
    spdlog::debug("{}", json.error().message);
    return std::nullopt;
  }
  auto config = parse_docker_config(*json);
  if (!config || config->id != id)
    return std::nullopt;
  return config;
}

void ContainerNames::refresh()
{
  roots_ = find_docker_data_roots();
  docker_roots_.clear();
  all_.clear();
  by_id_.clear();
  auto add = [&](std::string id, std::string name, std::string source) {
    if (by_id_.try_emplace(id, name).second)
      all_.push_back({std::move(id), std::move(name), std::move(source)});
  };
  for (const auto& root : roots_) {
    std::string containers = root.process_root + root.data_root + "/containers";
    docker_roots_.push_back(root.process_root + root.data_root);
    DIR* dir = ::opendir(containers.c_str());
    if (!dir)
      continue;
    while (dirent* entry = ::readdir(dir)) {
      if (!is_container_id(entry->d_name))
        continue;
      if (auto config = read_docker_config(root, entry->d_name))
        add(config->id, config->name, "docker " + root.data_root);
    }
    ::closedir(dir);
  }

  for_each_process_named(proc_root_, "conmon", [&](const std::string& pid) {
    if (!trusted(pid))
      return;
    auto cmdline = procfs::read_file(proc_root_ + "/" + pid + "/cmdline", kMaxCmdline);
    if (!cmdline)
      return;
    if (auto parsed = parse_conmon_cmdline(*cmdline))
      add(parsed->id, trim_newline(parsed->name), "conmon");
  });
}

std::optional<std::string> ContainerNames::name_of(const std::string& id)
{
  if (auto it = by_id_.find(id); it != by_id_.end())
    return it->second;
  for (const auto& root : roots_) {
    if (auto config = read_docker_config(root, id)) {
      by_id_[id] = config->name;
      all_.push_back({id, config->name, "docker " + root.data_root});
      return config->name;
    }
  }
  return std::nullopt;
}

} // namespace flamebpf::target
