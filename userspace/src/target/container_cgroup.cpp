#include "target/container_cgroup.h"

#include <array>

#include "common/text.h"

namespace flamebpf::target {
namespace {

constexpr size_t kIdLength = 64;

struct ScopePrefix {
  std::string_view prefix;
  Runtime runtime;
};

// Names the systemd cgroup driver gives containers: <prefix><id>.scope. podman's cgroupfs driver
// uses the same prefix without ".scope". Conmon's own scopes (crio-conmon-, libpod-conmon-) are
// not containers: their suffix is no ID, so they never match.
constexpr std::array<ScopePrefix, 4> kScopePrefixes{{
    {"docker-", Runtime::kDocker},
    {"cri-containerd-", Runtime::kContainerd},
    {"crio-", Runtime::kCrio},
    {"libpod-", Runtime::kPodman},
}};

bool is_uuid(std::string_view text)
{
  if (text.size() != 36)
    return false;
  for (size_t i = 0; i < text.size(); ++i) {
    bool dash_position = i == 8 || i == 13 || i == 18 || i == 23;
    char c = text[i];
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    if (dash_position ? c != '-' : !hex)
      return false;
  }
  return true;
}

struct ComponentMatch {
  std::string id;
  Runtime runtime;
};

std::optional<ComponentMatch> container_of_component(std::string_view component,
                                                     const std::vector<std::string_view>& above)
{
  if (is_container_id(component)) {
    Runtime runtime = Runtime::kUnknown;
    for (auto ancestor : above) {
      if (ancestor == "docker")
        runtime = Runtime::kDocker;
      else if (ancestor == "libpod_parent")
        runtime = Runtime::kPodman;
      else if (ancestor.starts_with("kubepods"))
        runtime = Runtime::kKubernetes;
    }
    return ComponentMatch{std::string(component), runtime};
  }
  for (const auto& scope : kScopePrefixes) {
    if (!component.starts_with(scope.prefix))
      continue;
    auto rest = component.substr(scope.prefix.size());
    if (rest.ends_with(".scope"))
      rest.remove_suffix(6);
    if (is_container_id(rest))
      return ComponentMatch{std::string(rest), scope.runtime};
  }
  return std::nullopt;
}

} // namespace

std::string_view runtime_name(Runtime runtime)
{
  switch (runtime) {
  case Runtime::kDocker:
    return "docker";
  case Runtime::kContainerd:
    return "containerd";
  case Runtime::kCrio:
    return "cri-o";
  case Runtime::kPodman:
    return "podman";
  case Runtime::kKubernetes:
    return "kubernetes";
  case Runtime::kUnknown:
    break;
  }
  return "container";
}

bool is_container_id(std::string_view text)
{
  if (text.size() != kIdLength)
    return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  }
  return true;
}

std::optional<std::string> pod_of_component(std::string_view component)
{
  if (component.starts_with("pod") && is_uuid(component.substr(3)))
    return std::string(component.substr(3));
  // systemd driver: kubepods-pod<uid>.slice or kubepods-<qos>-pod<uid>.slice, with the UID's
  // dashes turned into underscores (a dash separates slice levels).
  if (!component.starts_with("kubepods-") || !component.ends_with(".slice"))
    return std::nullopt;
  auto name = component.substr(0, component.size() - 6);
  auto at = name.rfind("-pod");
  if (at == std::string_view::npos)
    return std::nullopt;
  std::string uid(name.substr(at + 4));
  for (char& c : uid) {
    if (c == '_')
      c = '-';
  }
  if (!is_uuid(uid))
    return std::nullopt;
  return uid;
}

std::optional<ContainerCgroupMatch> container_of_cgroup(std::string_view path)
{
  auto components = text::split_fields(path, "/");
  std::vector<std::string_view> above;
  std::string prefix;
  std::string pod;
  for (auto component : components) {
    prefix += '/';
    prefix += component;
    if (auto uid = pod_of_component(component)) {
      pod = *uid;
    } else if (auto match = container_of_component(component, above)) {
      return ContainerCgroupMatch{std::move(match->id), match->runtime, prefix, pod};
    }
    above.push_back(component);
  }
  return std::nullopt;
}

} // namespace flamebpf::target
