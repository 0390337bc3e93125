// Move-only RAII owner of the generated `sampler_bpf` skeleton: the sampling program
// (bpf/sampler.bpf.c) with its maps.
#pragma once

#include <utility>

#include "sampler_bpf.skel.h"

namespace flamebpf::sampler {

class BpfSkeleton {
public:
  BpfSkeleton() = default;
  // Takes ownership of an opened (not yet loaded) skeleton.
  explicit BpfSkeleton(::sampler_bpf* skeleton) : skeleton_(skeleton) {}
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

  ::sampler_bpf* operator->() const { return skeleton_; }
  ::sampler_bpf* get() const { return skeleton_; }
  explicit operator bool() const { return skeleton_ != nullptr; }

private:
  void destroy()
  {
    if (skeleton_)
      ::sampler_bpf::destroy(skeleton_);
    skeleton_ = nullptr;
  }

  ::sampler_bpf* skeleton_ = nullptr;
};

} // namespace flamebpf::sampler
