// Long work on the recorder's thread (waiting for a target's file to be read, symbolizing a large
// interval) runs the recorder's "meanwhile" task every kStep: it takes the kernel's new-process
// notices, so that a short-lived process is read before it exits, however long that work takes.
#pragma once

#include <chrono>
#include <functional>

namespace flamebpf::meanwhile {

constexpr std::chrono::milliseconds kStep{10};

// Sets the task of this thread; empty: none.
void set_task(std::function<void()> task);
// Runs this thread's task if kStep has passed since it last ran, and not from within itself.
void run_if_due();

} // namespace flamebpf::meanwhile
