// Move-only RAII owner of the generated `sampler_bpf` skeleton: the sampling program
// (bpf/sampler.bpf.c) with its maps.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "sampler_bpf.skel.h"
#include "sampler_fp_bpf.skel.h"

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
  // Opens the sampling program with the table unwinder, or the one built without it
  // (bpf/CMakeLists.txt), which kernels before 5.13 can load. Both have the same maps and
  // variables, so sampler_bpf's skeleton drives either. Empty on failure, with errno set.
  static BpfSkeleton open(bool with_unwinder)
  {
    if (with_unwinder)
      return BpfSkeleton(::sampler_bpf::open());
    auto* skeleton = static_cast<::sampler_bpf*>(std::calloc(1, sizeof(::sampler_bpf)));
    if (!skeleton) {
      errno = ENOMEM;
      return {};
    }
    int error = ::sampler_bpf__create_skeleton(skeleton);
    if (error == 0) {
      size_t size = 0;
      skeleton->skeleton->data = const_cast<void*>(::sampler_fp_bpf__elf_bytes(&size));
      skeleton->skeleton->data_sz = size;
      error = ::bpf_object__open_skeleton(skeleton->skeleton, nullptr);
    }
    if (error != 0) {
      ::sampler_bpf::destroy(skeleton);
      errno = -error;
      return {};
    }
    return BpfSkeleton(skeleton);
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
