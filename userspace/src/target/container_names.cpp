#include "target/container_names.h"

#include <algorithm>
#include <dirent.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "common/contained_file.h"
#include "common/log.h"
#include "common/memory_account.h"
#include "common/procfs.h"
#include "common/text.h"
#include "target/container_cgroup.h"

namespace flamebpf::target {
namespace {

constexpr size_t kMaxCmdline = 1 << 16;
constexpr size_t kMaxJson = 4 << 20;
// An OCI spec is tens of KiB; a containerd config a few.
constexpr size_t kMaxSpec = 1 << 20;
constexpr size_t kMaxToml = 1 << 20;
// Per state directory and refresh: a node runs at most a few hundred containers.
constexpr size_t kMaxNamespaces = 64;
constexpr size_t kMaxTasks = 4096;
constexpr const char* kTaskDirectory = "/io.containerd.runtime.v2.task";
// Kubernetes' own limits: a DNS label (namespaces, containers) and a DNS subdomain (pods).
constexpr size_t kMaxLabel = 63;
constexpr size_t kMaxSubdomain = 253;
constexpr size_t kMaxPodUid = 64;

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

bool lower_alnum(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool is_pod_uid(std::string_view text)
{
  return !text.empty() && text.size() <= kMaxPodUid &&
         std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-';
         });
}

// The annotation keys of one runtime's Kubernetes integration.
struct PodAnnotationKeys {
  const char* type; // "sandbox" or "container"
  const char* sandbox_type_value;
  const char* namespace_name;
  const char* pod;
  const char* container;
  const char* pod_uid;
};

constexpr PodAnnotationKeys kContainerdCri = {
    "io.kubernetes.cri.container-type",    "sandbox",
    "io.kubernetes.cri.sandbox-namespace", "io.kubernetes.cri.sandbox-name",
    "io.kubernetes.cri.container-name",    "io.kubernetes.cri.sandbox-uid"};
constexpr PodAnnotationKeys kCrio = {"io.kubernetes.cri-o.ContainerType", "sandbox",
                                     "io.kubernetes.pod.namespace",       "io.kubernetes.pod.name",
                                     "io.kubernetes.container.name",      "io.kubernetes.pod.uid"};

// A value shown in an error: cut and escaped, as it may be anything.
std::string shown_value(const std::string& value)
{
  constexpr size_t kShown = 40;
  std::string shown;
  for (char c : value.substr(0, kShown)) {
    auto byte = static_cast<unsigned char>(c);
    shown += byte >= 0x20 && byte < 0x7f && c != '\\' ? std::string(1, c)
                                                      : fmt::format("\\x{:02x}", byte);
  }
  return value.size() > kShown ? shown + "..." : shown;
}

} // namespace

bool is_dns_label(std::string_view text)
{
  return !text.empty() && text.size() <= kMaxLabel && lower_alnum(text.front()) &&
         lower_alnum(text.back()) &&
         std::all_of(text.begin(), text.end(), [](char c) { return lower_alnum(c) || c == '-'; });
}

bool is_dns_subdomain(std::string_view text)
{
  if (text.empty() || text.size() > kMaxSubdomain)
    return false;
  for (std::string_view label : text::lines(text, '.')) {
    if (label.empty() || !lower_alnum(label.front()) || !lower_alnum(label.back()) ||
        !std::all_of(label.begin(), label.end(), [](char c) { return lower_alnum(c) || c == '-'; }))
      return false;
  }
  return !text.ends_with('.');
}

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
    else if (auto bundle = option_value(args, i, {"-b", "--bundle"}))
      parsed.bundle = *bundle;
  }
  if (!is_container_id(parsed.id) || parsed.name.empty())
    return std::nullopt;
  return parsed;
}

ContainerdArguments parse_containerd_cmdline(std::string_view cmdline)
{
  ContainerdArguments parsed;
  auto args = split_nul(cmdline);
  for (size_t i = 1; i < args.size(); ++i) {
    if (auto state = option_value(args, i, {"--state"}))
      parsed.state = *state;
    else if (auto config = option_value(args, i, {"-c", "--config"}))
      parsed.config_file = *config;
  }
  return parsed;
}

std::optional<std::string> parse_containerd_config_state(std::string_view toml)
{
  for (std::string_view line : text::lines(toml)) {
    line = text::trim(line);
    if (line.starts_with('['))
      break; // the first table: the top level, where state is, has ended
    if (!line.starts_with("state"))
      continue;
    std::string_view rest = text::trim(line.substr(5));
    if (!rest.starts_with('='))
      continue;
    rest = text::trim(rest.substr(1));
    if (rest.size() < 2 || (rest.front() != '"' && rest.front() != '\''))
      return std::nullopt;
    size_t end = rest.find(rest.front(), 1);
    if (end == std::string_view::npos)
      return std::nullopt;
    return std::string(rest.substr(1, end - 1));
  }
  return std::nullopt;
}

Result<std::optional<PodMember>> parse_pod_annotations(std::string_view config_json,
                                                       PodRuntime runtime)
{
  auto parsed = nlohmann::json::parse(config_json, nullptr, false);
  if (!parsed.is_object())
    return fail(error("not an OCI spec"));
  auto annotations = parsed.find("annotations");
  if (annotations == parsed.end() || !annotations->is_object())
    return std::nullopt;
  const PodAnnotationKeys* keys = runtime == PodRuntime::kCrio ? &kCrio : &kContainerdCri;
  auto namespace_name = string_field(*annotations, keys->namespace_name);
  auto pod = string_field(*annotations, keys->pod);
  if (!namespace_name && !pod)
    return std::nullopt;
  PodMember member;
  member.sandbox = string_field(*annotations, keys->type) == keys->sandbox_type_value;
  member.namespace_name = namespace_name.value_or("");
  member.pod = pod.value_or("");
  member.container = member.sandbox ? "" : string_field(*annotations, keys->container).value_or("");
  member.pod_uid = string_field(*annotations, keys->pod_uid).value_or("");
  auto refuse = [&](const char* key, const std::string& value) -> Result<std::optional<PodMember>> {
    // A sandbox runs nothing of the pod's and is never a target: what it is counts, and its
    // names are dropped unsaid.
    if (member.sandbox)
      return PodMember{"", "", "", "", true};
    return fail(
        error(fmt::format("annotation {} is no Kubernetes name: \"{}\"", key, shown_value(value))));
  };
  if (!is_dns_label(member.namespace_name))
    return refuse(keys->namespace_name, member.namespace_name);
  if (!is_dns_subdomain(member.pod))
    return refuse(keys->pod, member.pod);
  if (!member.sandbox && !is_dns_label(member.container))
    return refuse(keys->container, member.container);
  if (!member.pod_uid.empty() && !is_pod_uid(member.pod_uid))
    return refuse(keys->pod_uid, member.pod_uid);
  return member;
}

std::string pod_member_name(const PodMember& member)
{
  return member.namespace_name + "/" + member.pod + "/" +
         (member.sandbox ? std::string("POD") : member.container);
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

std::vector<ContainerNames::DataRoot> ContainerNames::find_containerd_states() const
{
  std::vector<DataRoot> states;
  for_each_process_named(proc_root_, "containerd", [&](const std::string& pid) {
    if (!trusted(pid))
      return;
    auto cmdline = procfs::read_file(proc_root_ + "/" + pid + "/cmdline", kMaxCmdline);
    if (!cmdline)
      return;
    auto args = parse_containerd_cmdline(*cmdline);
    std::string process_root = proc_root_ + "/" + pid + "/root";
    std::string state = args.state;
    if (state.empty()) {
      std::string config =
          args.config_file.empty() ? "/etc/containerd/config.toml" : args.config_file;
      if (auto toml = read_contained(process_root, config, kMaxToml))
        state = parse_containerd_config_state(*toml).value_or("");
    }
    if (state.empty())
      state = "/run/containerd";
    states.push_back({process_root, state});
  });
  return states;
}

std::optional<NamedContainer> ContainerNames::read_containerd_task(const DataRoot& state,
                                                                   const std::string& namespace_dir,
                                                                   const std::string& id) const
{
  auto json = read_contained(
      state.process_root,
      state.data_root + kTaskDirectory + "/" + namespace_dir + "/" + id + "/config.json", kMaxSpec);
  if (!json) {
    spdlog::debug("{}", json.error().message);
    return std::nullopt;
  }
  auto member = parse_pod_annotations(*json, PodRuntime::kContainerd);
  if (!member) {
    warn_once(id, fmt::format("container {} of containerd {}: {}; it is named by its ID",
                              id.substr(0, 12), state.data_root, member.error().message));
    return std::nullopt;
  }
  if (!*member)
    return std::nullopt;
  NamedContainer named;
  named.id = id;
  // A sandbox whose names were refused is named by its ID.
  named.name = (*member)->pod.empty() ? id.substr(0, 12) : pod_member_name(**member);
  named.source = "containerd " + state.data_root;
  named.pod = std::move(**member);
  return named;
}

void ContainerNames::read_containerd_tasks(const DataRoot& state, const std::string& only_id)
{
  std::string tasks = state.process_root + state.data_root + kTaskDirectory;
  DIR* namespaces = ::opendir(tasks.c_str());
  if (!namespaces)
    return;
  size_t namespaces_read = 0;
  size_t tasks_read = 0;
  while (dirent* entry = ::readdir(namespaces)) {
    std::string namespace_dir = entry->d_name;
    if (namespace_dir == "." || namespace_dir == "..")
      continue;
    if (++namespaces_read > kMaxNamespaces)
      break;
    if (!only_id.empty()) {
      if (auto named = read_containerd_task(state, namespace_dir, only_id))
        add(std::move(*named));
      continue;
    }
    DIR* dir = ::opendir((tasks + "/" + namespace_dir).c_str());
    if (!dir)
      continue;
    while (dirent* task = ::readdir(dir)) {
      if (!is_container_id(task->d_name))
        continue;
      if (++tasks_read > kMaxTasks)
        break;
      if (auto named = read_containerd_task(state, namespace_dir, task->d_name))
        add(std::move(*named));
    }
    ::closedir(dir);
  }
  ::closedir(namespaces);
}

void ContainerNames::warn_once(const std::string& id, const std::string& message) const
{
  // Bounded: a host that churns through forged containers is told again after a while.
  if (warned_.size() >= kMaxTasks)
    warned_.clear();
  if (warned_.insert(id).second)
    spdlog::warn("{}", message);
}

void ContainerNames::add(NamedContainer container)
{
  if (by_id_.contains(container.id))
    return;
  by_id_[container.id] = all_.size();
  all_.push_back(std::move(container));
}

void ContainerNames::refresh()
{
  roots_ = find_docker_data_roots();
  containerd_states_ = find_containerd_states();
  docker_roots_.clear();
  all_.clear();
  by_id_.clear();
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
        add({config->id, config->name, "docker " + root.data_root, std::nullopt});
    }
    ::closedir(dir);
  }
  for (const auto& state : containerd_states_)
    read_containerd_tasks(state, "");

  for_each_process_named(proc_root_, "conmon", [&](const std::string& pid) {
    if (!trusted(pid))
      return;
    auto cmdline = procfs::read_file(proc_root_ + "/" + pid + "/cmdline", kMaxCmdline);
    if (!cmdline)
      return;
    auto parsed = parse_conmon_cmdline(*cmdline);
    if (!parsed)
      return;
    NamedContainer named{parsed->id, trim_newline(parsed->name), "conmon", std::nullopt};
    // CRI-O's conmon names the bundle, whose spec places the container in its pod.
    auto json = parsed->bundle.empty() ? Result<std::string>(fail(error("no bundle")))
                                       : read_contained(proc_root_ + "/" + pid + "/root",
                                                        parsed->bundle + "/config.json", kMaxSpec);
    if (json) {
      auto member = parse_pod_annotations(*json, PodRuntime::kCrio);
      if (!member) {
        warn_once(parsed->id, fmt::format("container {} of CRI-O: {}; it is named by conmon",
                                          parsed->id.substr(0, 12), member.error().message));
      } else if (*member) {
        if (!(*member)->pod.empty())
          named.name = pod_member_name(**member);
        named.source = "cri-o";
        named.pod = std::move(**member);
      }
    }
    add(std::move(named));
  });
}

const NamedContainer* ContainerNames::find(const std::string& id)
{
  if (auto it = by_id_.find(id); it != by_id_.end())
    return &all_[it->second];
  for (const auto& root : roots_) {
    if (auto config = read_docker_config(root, id)) {
      add({id, config->name, "docker " + root.data_root, std::nullopt});
      return &all_.back();
    }
  }
  for (const auto& state : containerd_states_) {
    read_containerd_tasks(state, id);
    if (auto it = by_id_.find(id); it != by_id_.end())
      return &all_[it->second];
  }
  return nullptr;
}

std::optional<std::string> ContainerNames::name_of(const std::string& id)
{
  if (const NamedContainer* found = find(id))
    return found->name;
  return std::nullopt;
}

uint64_t ContainerNames::memory_bytes() const
{
  // A node of an unordered container: its value, the next pointer and the cached hash.
  constexpr uint64_t kNodeBytes = 2 * sizeof(void*);
  uint64_t bytes = all_.capacity() * sizeof(NamedContainer);
  for (const auto& container : all_) {
    bytes += heap_bytes(container.id) + heap_bytes(container.name) + heap_bytes(container.source);
    if (container.pod)
      bytes += heap_bytes(container.pod->namespace_name) + heap_bytes(container.pod->pod) +
               heap_bytes(container.pod->container) + heap_bytes(container.pod->pod_uid);
  }
  bytes += by_id_.bucket_count() * sizeof(void*) +
           by_id_.size() * (kNodeBytes + sizeof(std::pair<const std::string, size_t>));
  for (const auto& [id, index] : by_id_)
    bytes += heap_bytes(id);
  bytes +=
      warned_.bucket_count() * sizeof(void*) + warned_.size() * (kNodeBytes + sizeof(std::string));
  for (const auto& id : warned_)
    bytes += heap_bytes(id);
  for (const auto* roots : {&roots_, &containerd_states_})
    for (const auto& root : *roots)
      bytes += sizeof(DataRoot) + heap_bytes(root.process_root) + heap_bytes(root.data_root);
  for (const auto& root : docker_roots_)
    bytes += sizeof(std::string) + heap_bytes(root);
  return bytes;
}

} // namespace flamebpf::target
