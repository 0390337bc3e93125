#include "common/scoped_fs_ids.h"

#include <sys/fsuid.h>

namespace flamebpf {

ScopedFsIds::ScopedFsIds(uint32_t uid, uint32_t gid)
    : previous_uid_(static_cast<uint32_t>(::setfsuid(static_cast<uid_t>(-1)))),
      previous_gid_(static_cast<uint32_t>(::setfsgid(static_cast<gid_t>(-1))))
{
  // The group first: with the fsuid changed, the thread may lose what it needs to change it.
  ::setfsgid(gid);
  ::setfsuid(uid);
  // setfsuid reports no errors; reading the ids back (-1 changes nothing) does.
  active_ = static_cast<uint32_t>(::setfsuid(static_cast<uid_t>(-1))) == uid &&
            static_cast<uint32_t>(::setfsgid(static_cast<gid_t>(-1))) == gid;
}

ScopedFsIds::~ScopedFsIds()
{
  ::setfsuid(previous_uid_);
  ::setfsgid(previous_gid_);
}

} // namespace flamebpf
