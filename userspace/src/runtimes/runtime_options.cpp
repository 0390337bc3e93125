#include "runtimes/runtime_options.h"

namespace flamebpf::runtimes {

void add_runtime_options(CLI::App& app, RuntimeOptions& options)
{
  app.add_flag("--java-signatures", options.java_signatures,
               "Name Java frames with their parameter types: Foo.bar(long, int[])");
  app.add_flag("!--no-attach", options.attach,
               "Do not load flamebpf's agent into JVMs; Java frames are named from perf maps "
               "something else keeps, or read from the JVM's code cache");
}

} // namespace flamebpf::runtimes
