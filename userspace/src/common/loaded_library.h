// A shared library loaded when a feature first needs it (dlopen), not with flamebpf: what only
// some runs use (--listen's HTTP server, debuginfod's fetching) and brings libraries of its own
// would otherwise be mapped and relocated at every start. Its functions are found by name into
// pointers of their declared types.
#pragma once

#include <dlfcn.h>
#include <string>

#include "common/result.h"

namespace flamebpf {

class LoadedLibrary {
public:
  // Loads soname (kept loaded for the rest of the run); what_for prefixes the error.
  static Result<LoadedLibrary> open(const char* soname, const std::string& what_for)
  {
    void* handle = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      return fail(error(what_for + ": cannot load " + soname + ": " + ::dlerror()));
    return LoadedLibrary(handle);
  }

  // Points function at the library's function of that name (nullptr, and remembered, if none).
  template <class Function> void resolve(Function*& function, const char* name)
  {
    function = reinterpret_cast<Function*>(::dlsym(handle_, name));
    missing_ |= function == nullptr;
  }
  // Whether every resolve() found its function.
  bool complete() const { return !missing_; }

private:
  explicit LoadedLibrary(void* handle) : handle_(handle) {}

  void* handle_;
  bool missing_ = false;
};

} // namespace flamebpf
