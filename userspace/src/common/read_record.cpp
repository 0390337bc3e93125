#include "common/read_record.h"

#include <algorithm>
#include <cerrno>
#include <string>
#include <unistd.h>

namespace flamebpf {

namespace {

// What one read of a replay takes: the bytes are hashed as they come.
constexpr size_t kReplayStepBytes = 1 << 20;

} // namespace

void ReadRecord::add(uint64_t offset, std::string_view bytes)
{
  if (sealed_ || dropped_ || bytes.empty())
    return;
  // Only the parts no earlier read covered: the replay checks the rest where it was first read.
  uint64_t end = offset + bytes.size();
  uint64_t at = offset;
  while (at < end && !dropped_) {
    auto next = covered_.upper_bound(at);
    if (next != covered_.begin() && std::prev(next)->second > at) {
      at = std::prev(next)->second;
      continue;
    }
    uint64_t gap_end = next == covered_.end() ? end : std::min(end, next->first);
    add_new(at, bytes.substr(static_cast<size_t>(at - offset), static_cast<size_t>(gap_end - at)));
    at = gap_end;
  }
}

void ReadRecord::add_new(uint64_t offset, std::string_view bytes)
{
  // A read that goes on from where the last ended extends its range: the bytes hashed are the
  // same stream either way.
  if (!ranges_.empty() && ranges_.back().offset + ranges_.back().length == offset) {
    ranges_.back().length += bytes.size();
  } else if (ranges_.size() < kMaxRanges) {
    ranges_.push_back({offset, bytes.size()});
  } else {
    drop();
    return;
  }
  bytes_read_ += bytes.size();
  hash_.update(bytes);
  // Merged with what it touches on either side.
  uint64_t start = offset, end = offset + bytes.size();
  auto after = covered_.lower_bound(start);
  if (after != covered_.begin() && std::prev(after)->second == start) {
    --after;
    start = after->first;
  }
  while (after != covered_.end() && after->first <= end) {
    end = std::max(end, after->second);
    after = covered_.erase(after);
  }
  covered_[start] = end;
}

void ReadRecord::drop()
{
  dropped_ = true;
  ranges_ = {};
  covered_ = {};
}

void ReadRecord::seal()
{
  if (sealed_)
    return;
  sealed_ = true;
  digest_ = hash_.finish();
  covered_ = {}; // only adding needs it
}

bool ReadRecord::replays_on(int fd, uint64_t size) const
{
  if (!sealed_ || dropped_ || size != file_size_)
    return false;
  SipHash hash(content_hash_key());
  std::string buffer;
  for (const auto& range : ranges_) {
    uint64_t done = 0;
    while (done < range.length) {
      buffer.resize(static_cast<size_t>(std::min<uint64_t>(range.length - done, kReplayStepBytes)));
      ssize_t n =
          ::pread(fd, buffer.data(), buffer.size(), static_cast<off_t>(range.offset + done));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return false; // unreadable, or shorter than it said: not a copy to trust
      hash.update(std::string_view(buffer.data(), static_cast<size_t>(n)));
      done += static_cast<uint64_t>(n);
    }
  }
  return hash.finish() == digest_;
}

} // namespace flamebpf
