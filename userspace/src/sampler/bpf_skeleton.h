// Move-only RAII owner of the generated `profile` skeleton.
#pragma once

#include <utility>

#include "profile.skel.h"

namespace flamebpf::sampler {

class BpfSkeleton {
public:
  BpfSkeleton() = default;
  // Takes ownership of an opened (not yet loaded) skeleton.
  explicit BpfSkeleton(::profile* skeleton) : skeleton_(skeleton) {}
  BpfSkeleton(BpfSkeleton&& other) noexcept : skeleton_(std::exchange(other.skeleton_, nullptr)) {}
  BpfSkeleton& operator=(BpfSkeleton&& other) noexcept
  {
    if (this != &other) {
      destroy();
      skeleton_ = std::exchange(other.skeleton_, nullptr);
    }
    return *this;
  }
  BpfSkeleton(const BpfSkeleton&) = delete;
  BpfSkeleton& operator=(const BpfSkeleton&) = delete;
  ~BpfSkeleton() { destroy(); }

  ::profile* operator->() const { return skeleton_; }
  ::profile* get() const { return skeleton_; }
  explicit operator bool() const { return skeleton_ != nullptr; }

private:
  void destroy()
  {
    if (skeleton_)
      ::profile::destroy(skeleton_);
    skeleton_ = nullptr;
  }

  ::profile* skeleton_ = nullptr;
};

} // namespace flamebpf::sampler
