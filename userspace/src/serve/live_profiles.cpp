#include "serve/live_profiles.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "profile/by_target.h"

namespace flamebpf::serve {

bool LiveProfiles::wait(std::string directory,
                        Clock::duration length,
                        Done done,
                        Abandoned abandoned)
{
  std::lock_guard lock(mutex_);
  drop_abandoned();
  if (requests_.size() >= kMaxWaiting)
    return false;
  auto request = std::make_unique<Request>();
  request->directory = std::move(directory);
  request->length = length;
  request->done = std::move(done);
  request->abandoned = std::move(abandoned);
  requests_.push_back(std::move(request));
  return true;
}

void LiveProfiles::drop_abandoned()
{
  std::erase_if(requests_,
                [](const auto& request) { return request->abandoned && request->abandoned(); });
}

std::optional<LiveProfiles::Clock::time_point> LiveProfiles::drain_wanted_by() const
{
  std::lock_guard lock(mutex_);
  std::optional<Clock::time_point> by;
  for (const auto& request : requests_) {
    if (request->abandoned && request->abandoned())
      continue; // no drain for one who went away
    // One not started wants a drain now: the earliest time there is.
    Clock::time_point when =
        request->started ? *request->started + request->length : Clock::time_point::min();
    by = by ? std::min(*by, when) : when;
  }
  return by;
}

void LiveProfiles::drained(const profile::SymbolizedProfile& delta, Clock::time_point now)
{
  std::vector<std::unique_ptr<Request>> ended;
  {
    std::lock_guard lock(mutex_);
    drop_abandoned();
    if (requests_.empty())
      return;
    // Split by target only for a request of one target: the scrape of every target
    // (docs/agent.md's) takes the drain as it is.
    bool one_target_asked =
        std::any_of(requests_.begin(), requests_.end(), [](const auto& request) {
          return request->started.has_value() && !request->directory.empty();
        });
    std::map<std::string, profile::SymbolizedProfile> parts;
    std::map<std::string, std::string> directories;
    if (one_target_asked) {
      parts = profile::split_by_target(delta);
      std::set<std::string> names;
      for (const auto& [name, part] : parts)
        names.insert(name);
      directories = profile::target_file_names(names);
    }
    for (auto& request : requests_) {
      if (!request->started) {
        // This drain holds samples from before the request: the profile starts after it.
        request->started = now;
        continue;
      }
      if (request->directory.empty()) {
        request->profile.add(delta);
        continue;
      }
      profile::SymbolizedProfile part;
      for (auto& [name, profile] : parts) {
        if (directories[name] == request->directory) {
          part = profile;
          break;
        }
      }
      if (part.stacks.empty()) {
        // No samples of the target in this drain: its time still counts.
        part.start = delta.start;
        part.end = delta.end;
        part.frequency_hz = delta.frequency_hz;
        part.node = delta.node;
      }
      request->profile.add(std::move(part));
    }
    auto due = std::stable_partition(requests_.begin(), requests_.end(), [&](const auto& request) {
      return !request->started || now < *request->started + request->length;
    });
    std::move(due, requests_.end(), std::back_inserter(ended));
    requests_.erase(due, requests_.end());
  }
  // Outside the lock: done may take its time, and a request may arrive meanwhile.
  for (auto& request : ended)
    request->done(request->profile.take());
}

void LiveProfiles::clear()
{
  std::lock_guard lock(mutex_);
  requests_.clear();
}

size_t LiveProfiles::waiting() const
{
  std::lock_guard lock(mutex_);
  return static_cast<size_t>(
      std::count_if(requests_.begin(), requests_.end(), [](const auto& request) {
        return !(request->abandoned && request->abandoned());
      }));
}

void LiveProfiles::target_added(const std::string& name)
{
  std::lock_guard lock(mutex_);
  recorded_.insert(profile::target_file_name(name));
}

void LiveProfiles::target_removed(const std::string& name)
{
  std::lock_guard lock(mutex_);
  recorded_.erase(profile::target_file_name(name));
}

bool LiveProfiles::recording(std::string_view directory) const
{
  std::lock_guard lock(mutex_);
  return recorded_.contains(directory);
}

} // namespace flamebpf::serve
