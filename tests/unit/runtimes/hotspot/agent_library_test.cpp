// The built libflamebpf-agent.so itself: what it exports, and how its entry points behave when the
// JVM refuses it JVMTI. A fake JavaVM stands in: the paths tested end before any JVMTI call.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <jni.h>
#include <jvmti.h>
#include <set>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "common/procfs.h"
#include "test_elf.h"
#include "test_support.h"

namespace {

using flamebpf::testing::FixtureElf;
using flamebpf::testing::TempDir;

using AgentEntry = jint (*)(JavaVM*, char*, void*);

// The defined symbols of the library's dynamic symbol table: what a JVM (or anything) can bind to.
std::set<std::string> exported_symbols(const char* path)
{
  std::set<std::string> names;
  for (const auto& [name, symbol] : FixtureElf(path).symbols(SHT_DYNSYM))
    if (symbol.st_shndx != SHN_UNDEF && GELF_ST_BIND(symbol.st_info) != STB_LOCAL)
      names.insert(name);
  return names;
}

// What GetEnv answers, and how often it was asked (in the child that loads the agent).
jint g_get_env_answer = JNI_OK;
int g_get_env_calls = 0;

// A JVMTI environment whose AddCapabilities answers g_add_capabilities_answer; the tests end there.
jvmtiError g_add_capabilities_answer = JVMTI_ERROR_NONE;
jvmtiInterface_1_ g_jvmti_functions{};
_jvmtiEnv g_jvmti{};

int g_dispose_calls = 0;

jvmtiError JNICALL fake_add_capabilities(jvmtiEnv*, const jvmtiCapabilities*)
{
  return g_add_capabilities_answer;
}

jvmtiError JNICALL fake_dispose_environment(jvmtiEnv*)
{
  ++g_dispose_calls;
  return JVMTI_ERROR_NONE;
}

jint JNICALL fake_get_env(JavaVM*, void** env, jint)
{
  ++g_get_env_calls;
  *env = g_get_env_answer == JNI_OK ? &g_jvmti : nullptr;
  return g_get_env_answer;
}

// What the agent did with a fake JVM whose GetEnv answers get_env_answer.
struct Loads {
  std::vector<jint> results; // of each call of the entry point
  int get_env_calls = 0;
  int dispose_calls = 0; // of the JVMTI environment it was given
  std::string stderr_text;
};

// Loads the built agent into a child process (the test process must not map it: it would take
// itself for a process whose perf map an agent keeps) and calls entry times times.
Loads load_in_child(const char* entry,
                    jint get_env_answer,
                    int times,
                    jvmtiError add_capabilities_answer = JVMTI_ERROR_INTERNAL)
{
  TempDir dir;
  std::string stderr_path = (dir.path() / "stderr").string();
  int results[2];
  if (::pipe(results) != 0)
    return {};
  pid_t child = ::fork();
  if (child == 0) {
    ::alarm(10); // a stuck load fails the test instead of hanging it
    int file = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ::dup2(file, STDERR_FILENO);
    void* library = ::dlopen(FLAMEBPF_AGENT_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    auto call = library ? reinterpret_cast<AgentEntry>(::dlsym(library, entry)) : nullptr;
    if (!call)
      ::_exit(2);
    JNIInvokeInterface_ functions{};
    functions.GetEnv = fake_get_env;
    JavaVM vm{};
    vm.functions = &functions;
    g_get_env_answer = get_env_answer;
    g_add_capabilities_answer = add_capabilities_answer;
    g_jvmti_functions.AddCapabilities = fake_add_capabilities;
    g_jvmti_functions.DisposeEnvironment = fake_dispose_environment;
    g_jvmti.functions = &g_jvmti_functions;
    for (int i = 0; i < times; ++i) {
      jint result = call(&vm, nullptr, nullptr);
      (void)!::write(results[1], &result, sizeof result);
    }
    (void)!::write(results[1], &g_get_env_calls, sizeof g_get_env_calls);
    (void)!::write(results[1], &g_dispose_calls, sizeof g_dispose_calls);
    ::fflush(stderr);
    ::_exit(0);
  }
  ::close(results[1]);
  Loads loads;
  std::vector<jint> values;
  jint value = 0;
  while (::read(results[0], &value, sizeof value) == sizeof value)
    values.push_back(value);
  ::close(results[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child could not load the agent";
  if (values.size() >= 2) {
    loads.dispose_calls = values.back();
    values.pop_back();
    loads.get_env_calls = values.back();
    values.pop_back();
  }
  loads.results = values;
  auto written = flamebpf::procfs::read_file(stderr_path, 1 << 16);
  loads.stderr_text = written ? *written : "(unreadable)";
  return loads;
}

TEST(AgentLibrary, ExportsOnlyTheAgentEntryPoints)
{
  EXPECT_EQ(exported_symbols(FLAMEBPF_AGENT_LIBRARY),
            (std::set<std::string>{"Agent_OnAttach", "Agent_OnLoad", "Agent_OnUnload"}));
}

// HotSpot answers JNI_EDETACHED once the VM is shutting down: a short-lived JVM attached at its
// end. Its stderr is the user's program's, so the refusal is silent.
TEST(AgentLibrary, ShuttingDownJvmIsRefusedSilently)
{
  auto loads = load_in_child("Agent_OnAttach", JNI_EDETACHED, 1);
  ASSERT_EQ(loads.results.size(), 1u);
  EXPECT_NE(loads.results[0], JNI_OK);
  EXPECT_EQ(loads.stderr_text, "");
}

// The same when the VM enters its dead phase after GetEnv: JVMTI answers JVMTI_ERROR_WRONG_PHASE.
TEST(AgentLibrary, JvmEnteringItsDeadPhaseIsRefusedSilently)
{
  auto loads = load_in_child("Agent_OnAttach", JNI_OK, 1, JVMTI_ERROR_WRONG_PHASE);
  EXPECT_EQ(loads.results, (std::vector<jint>{JNI_ERR}));
  EXPECT_EQ(loads.stderr_text, "");
  EXPECT_EQ(loads.dispose_calls, 1); // the environment it got is given back
}

TEST(AgentLibrary, OtherJvmtiErrorsAreReported)
{
  auto loads = load_in_child("Agent_OnAttach", JNI_OK, 1, JVMTI_ERROR_NOT_AVAILABLE);
  EXPECT_EQ(loads.results, (std::vector<jint>{JNI_ERR}));
  EXPECT_EQ(loads.dispose_calls, 1);
  EXPECT_EQ(loads.stderr_text, "flamebpf agent: AddCapabilities failed (JVMTI error 98); Java "
                               "frames stay unnamed\n");
}

TEST(AgentLibrary, RefusedLoadIsTriedAfreshByTheNextLoad)
{
  auto loads = load_in_child("Agent_OnAttach", JNI_EVERSION, 2);
  // Not taken for "loaded twice": the JVM is asked again, and the reason given again.
  EXPECT_EQ(loads.results, (std::vector<jint>{JNI_ERR, JNI_ERR}));
  EXPECT_EQ(loads.get_env_calls, 2);
  EXPECT_EQ(loads.stderr_text,
            "flamebpf agent: JVMTI 1.2 is unavailable; Java frames stay unnamed\n"
            "flamebpf agent: JVMTI 1.2 is unavailable; Java frames stay unnamed\n");
}

// A JVM started with -agentpath starts even when the agent cannot work.
TEST(AgentLibrary, FailureAtStartDoesNotStopTheJvm)
{
  auto loads = load_in_child("Agent_OnLoad", JNI_EVERSION, 1);
  EXPECT_EQ(loads.results, (std::vector<jint>{JNI_OK}));
  EXPECT_EQ(loads.get_env_calls, 1);
  EXPECT_NE(loads.stderr_text.find("Java frames stay unnamed"), std::string::npos);
}

} // namespace
