// flamebpf's JVMTI agent: keeps /tmp/perf-<pid>.map current as the JIT compiles, moves and
// unloads code, so that flamebpf can name Java frames. Loaded at start (-agentpath) or attached
// to a running JVM. It must never crash, throw into, block or exit the JVM: every JVMTI error is
// checked and leads to doing less, not to failing.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <jvmti.h>
#include <jvmticmlr.h>
#include <optional>
#include <string>
#include <unistd.h>
#include <unordered_map>
#include <vector>

#include "code_blobs.h"
#include "method_name.h"
#include "perf_map_writer.h"
#include "unwind_records.h"

namespace flamebpf::agent {
namespace {

PerfMapWriter g_writer;
std::atomic<bool> g_started{false};
// The unwind records beside the map, written only when the JVM's own tables say where its blobs
// and their frame sizes are (g_blobs is set before any event is turned on, and never changes).
PerfMapWriter g_unwind_writer;
const CodeBlobFinder* g_blobs = nullptr;
// Interpreted methods named so far, against a budget: each costs a jmethodID the JVM keeps.
std::atomic<uint64_t> g_method_records{0};
constexpr uint64_t kMaxMethodRecords = 1 << 20;

// A JVMTI-allocated string, deallocated on scope exit.
class JvmtiString {
public:
  explicit JvmtiString(jvmtiEnv* jvmti) : jvmti_(jvmti) {}
  ~JvmtiString()
  {
    if (text_)
      jvmti_->Deallocate(reinterpret_cast<unsigned char*>(text_));
  }
  JvmtiString(const JvmtiString&) = delete;
  JvmtiString& operator=(const JvmtiString&) = delete;
  char** out() { return &text_; }
  std::string_view view() const { return text_ ? std::string_view(text_) : std::string_view(); }

private:
  jvmtiEnv* jvmti_;
  char* text_ = nullptr;
};

// "org.example.Foo.bar(long)", or a placeholder when the JVM cannot say (a class being unloaded).
std::string name_of(jvmtiEnv* jvmti, jmethodID method)
{
  JvmtiString name(jvmti);
  JvmtiString descriptor(jvmti);
  jclass owner = nullptr;
  JvmtiString class_signature(jvmti);
  if (jvmti->GetMethodName(method, name.out(), descriptor.out(), nullptr) != JVMTI_ERROR_NONE)
    return "[unknown method]";
  if (jvmti->GetMethodDeclaringClass(method, &owner) != JVMTI_ERROR_NONE ||
      jvmti->GetClassSignature(owner, class_signature.out(), nullptr) != JVMTI_ERROR_NONE)
    return "[unknown class]." + standard_utf8(name.view());
  return method_display_name(class_signature.view(), name.view(), descriptor.view());
}

const jvmtiCompiledMethodLoadInlineRecord* inline_record(const void* compile_info)
{
  for (auto* header = static_cast<const jvmtiCompiledMethodLoadRecordHeader*>(compile_info); header;
       header = header->next) {
    if (header->kind == JVMTI_CMLR_INLINE_INFO)
      return reinterpret_cast<const jvmtiCompiledMethodLoadInlineRecord*>(header);
  }
  return nullptr;
}

// The frame of the code at [start, start + size) as its blob describes it. Code no blob holds
// gets no record: flamebpf unwinds it by frame pointers, as before.
void write_code_record(uint64_t start, uint64_t size)
{
  if (!g_blobs)
    return;
  auto blob = g_blobs->find(OwnMemory(), start);
  if (!blob)
    return;
  int32_t complete = -1;
  if (blob->frame_complete >= 0) {
    uint64_t at = blob->code_begin + static_cast<uint64_t>(blob->frame_complete);
    complete = at <= start ? 0 : at - start < size ? static_cast<int32_t>(at - start) : -1;
  }
  // The code is this JVM's own, announced as installed: its bytes are readable here.
  Prologue prologue;
  if (blob->frame_words > 0 && start == blob->code_begin)
    prologue = find_prologue(reinterpret_cast<const uint8_t*>(start),
                             std::min<uint64_t>(size, kMaxPrologueSearch), blob->frame_words);
  g_unwind_writer.append_lines(code_record(start, size, blob->frame_words, complete, prologue));
}

// Names the methods of klass for the interpreter frames that may hold them. HotSpot's jmethodID
// is a pointer to the slot that holds the Method*, which is what interpreter frames hold.
void write_method_records(jvmtiEnv* jvmti, jclass klass)
{
  if (!g_blobs || g_method_records.load() >= kMaxMethodRecords)
    return;
  jint count = 0;
  jmethodID* methods = nullptr;
  if (jvmti->GetClassMethods(klass, &count, &methods) != JVMTI_ERROR_NONE)
    return; // a class not prepared yet, or an array or primitive class: no methods of its own
  JvmtiString class_signature(jvmti);
  if (jvmti->GetClassSignature(klass, class_signature.out(), nullptr) == JVMTI_ERROR_NONE) {
    std::string lines;
    for (jint i = 0; i < count && g_method_records.load() < kMaxMethodRecords; ++i) {
      uint64_t method = 0;
      if (methods[i])
        std::memcpy(&method, reinterpret_cast<const void*>(methods[i]), sizeof method);
      JvmtiString name(jvmti);
      JvmtiString descriptor(jvmti);
      if (!method || jvmti->GetMethodName(methods[i], name.out(), descriptor.out(), nullptr) !=
                         JVMTI_ERROR_NONE)
        continue;
      lines += method_record(
          method, method_display_name(class_signature.view(), name.view(), descriptor.view()));
      ++g_method_records;
    }
    // One write a class, so a reader never sees part of a line.
    g_unwind_writer.append_lines(lines);
  }
  jvmti->Deallocate(reinterpret_cast<unsigned char*>(methods));
}

// Names the methods of every class loaded so far (at attach, or once the VM has started).
void write_loaded_method_records(jvmtiEnv* jvmti)
{
  jint count = 0;
  jclass* classes = nullptr;
  if (!g_blobs || jvmti->GetLoadedClasses(&count, &classes) != JVMTI_ERROR_NONE)
    return;
  for (jint i = 0; i < count; ++i)
    write_method_records(jvmti, classes[i]);
  jvmti->Deallocate(reinterpret_cast<unsigned char*>(classes));
}

// Writes a compiled method as pieces: each stretch of code whose inlining chain is the same gets
// a line naming the chain, outermost first ("Outer.run()->Inner.work(long)"). A debug-info pc
// describes the code up to and including it.
void write_compiled_method(
    jvmtiEnv* jvmti, jmethodID method, uint64_t start, uint64_t size, const void* compile_info)
{
  std::unordered_map<jmethodID, std::string> names;
  auto cached_name = [&](jmethodID id) -> const std::string& {
    auto [it, inserted] = names.try_emplace(id);
    if (inserted)
      it->second = name_of(jvmti, id);
    return it->second;
  };
  const std::string& outer = cached_name(method);
  const auto* record = inline_record(compile_info);
  if (!record || record->numpcs <= 0 || !record->pcinfo) {
    g_writer.add(start, size, outer);
    return;
  }
  // The JVM lists debug-info pcs in no particular order; each describes the code after the
  // previous one up to and including itself, so they are walked in address order.
  std::vector<const PCStackInfo*> by_pc;
  for (jint i = 0; i < record->numpcs; ++i)
    by_pc.push_back(&record->pcinfo[i]);
  std::stable_sort(by_pc.begin(), by_pc.end(), [](const PCStackInfo* a, const PCStackInfo* b) {
    return reinterpret_cast<uint64_t>(a->pc) < reinterpret_cast<uint64_t>(b->pc);
  });
  // Stretches of one chain, merged while consecutive stretches have the same chain.
  std::vector<PerfMapWriter::Line> lines;
  auto extend = [&](uint64_t from, uint64_t to, const std::string& chain) {
    if (!lines.empty() && lines.back().name == chain &&
        lines.back().start + lines.back().size == from)
      lines.back().size += to - from;
    else
      lines.push_back({from, to - from, chain});
  };
  uint64_t end = start + size;
  uint64_t covered = start; // code before this address has its chain
  for (const PCStackInfo* info : by_pc) {
    uint64_t pc = reinterpret_cast<uint64_t>(info->pc);
    if (pc < covered || pc >= end || info->numstackframes <= 0 || !info->methods)
      continue;
    // methods[0] is the innermost frame.
    std::string chain;
    for (jint frame = info->numstackframes - 1; frame >= 0; --frame) {
      if (!chain.empty())
        chain += kInlineSeparator;
      chain += cached_name(info->methods[frame]);
    }
    extend(covered, pc + 1, chain);
    covered = pc + 1;
  }
  // Past the last pc (stubs, exception handlers) the method runs no inlined code.
  if (covered < end)
    extend(covered, end, outer);
  g_writer.add(start, size, lines);
}

void JNICALL on_compiled_method_load(jvmtiEnv* jvmti,
                                     jmethodID method,
                                     jint code_size,
                                     const void* code_addr,
                                     jint,
                                     const jvmtiAddrLocationMap*,
                                     const void* compile_info)
{
  if (code_size <= 0 || !code_addr)
    return;
  write_compiled_method(jvmti, method, reinterpret_cast<uint64_t>(code_addr),
                        static_cast<uint64_t>(code_size), compile_info);
  write_code_record(reinterpret_cast<uint64_t>(code_addr), static_cast<uint64_t>(code_size));
}

void JNICALL on_compiled_method_unload(jvmtiEnv*, jmethodID, const void* code_addr)
{
  g_writer.remove(reinterpret_cast<uint64_t>(code_addr));
  if (g_blobs)
    g_unwind_writer.append_lines(unload_record(reinterpret_cast<uint64_t>(code_addr)));
}

void JNICALL on_class_prepare(jvmtiEnv* jvmti, JNIEnv*, jthread, jclass klass)
{
  write_method_records(jvmti, klass);
}

void JNICALL on_vm_init(jvmtiEnv* jvmti, JNIEnv*, jthread)
{
  // Classes prepared before the VM started posted no ClassPrepare.
  write_loaded_method_records(jvmti);
}

void JNICALL on_dynamic_code_generated(jvmtiEnv*,
                                       const char* name,
                                       const void* address,
                                       jint length)
{
  if (length <= 0 || !address)
    return;
  g_writer.add(reinterpret_cast<uint64_t>(address), static_cast<uint64_t>(length),
               standard_utf8(name ? std::string_view(name) : std::string_view("[stub]")));
  if (g_blobs && name && std::strcmp(name, "Interpreter") == 0)
    g_unwind_writer.append_lines(
        interpreter_record(reinterpret_cast<uint64_t>(address), static_cast<uint64_t>(length)));
  else
    write_code_record(reinterpret_cast<uint64_t>(address), static_cast<uint64_t>(length));
}

// Reads where the JVM keeps its blobs, and opens the unwind records for them. Without either,
// the agent writes no records and flamebpf unwinds Java frames by frame pointers; the perf map
// is unaffected. jvmti's functions live in libjvm, which holds the tables.
void start_unwind_records(jvmtiEnv* jvmti)
{
  static std::optional<CodeBlobFinder> finder;
  if (g_blobs)
    return;
  std::string error;
  auto structs =
      VmStructs::of_libjvm(reinterpret_cast<const void*>(jvmti->functions->Allocate), &error);
  if (structs)
    finder = CodeBlobFinder::make(*structs, &error);
  if (!finder) {
    std::fprintf(stderr,
                 "flamebpf agent: cannot read this JVM's code layout (%s); Java stacks need "
                 "frame pointers\n",
                 error.c_str());
    return;
  }
  if (!g_unwind_writer.is_open()) {
    if (!g_unwind_writer.open_named("/tmp", "flamebpf-" + std::to_string(::getpid()) + ".unwind") ||
        !g_unwind_writer.append_lines(kUnwindRecordsHeader)) {
      std::fprintf(stderr, "flamebpf agent: cannot write its unwind records %s\n",
                   g_unwind_writer.open_error().c_str());
      return;
    }
  }
  g_blobs = &*finder;
}

void report(const char* what, jvmtiError error)
{
  // The VM entered its dead phase meanwhile: it is exiting, and there is nothing left to name.
  if (error == JVMTI_ERROR_WRONG_PHASE)
    return;
  std::fprintf(stderr, "flamebpf agent: %s failed (JVMTI error %d); Java frames stay unnamed\n",
               what, static_cast<int>(error));
}

// Sets the agent up; attached tells whether the JVM already runs (code to replay).
jint start(JavaVM* vm, bool attached)
{
  if (g_started.exchange(true))
    return JNI_OK; // loaded twice: the first load already keeps the map
  jvmtiEnv* jvmti = nullptr;
  // A failed load gives back its JVMTI environment (with any events it turned on), so a later
  // load starts afresh.
  auto refuse = [&jvmti] {
    if (jvmti)
      jvmti->DisposeEnvironment();
    g_started = false;
    return JNI_ERR;
  };
  jint got = vm->GetEnv(reinterpret_cast<void**>(&jvmti), JVMTI_VERSION_1_2);
  // JNI_EDETACHED: the VM is shutting down (a short-lived JVM attached at its end); its stderr is
  // the user's program's output, and there is nothing left to name.
  if (got == JNI_EDETACHED)
    return refuse();
  if (got != JNI_OK || !jvmti) {
    jvmti = nullptr;
    std::fprintf(stderr, "flamebpf agent: JVMTI 1.2 is unavailable; Java frames stay unnamed\n");
    return refuse();
  }
  jvmtiCapabilities capabilities{};
  capabilities.can_generate_compiled_method_load_events = 1;
  if (jvmtiError error = jvmti->AddCapabilities(&capabilities); error != JVMTI_ERROR_NONE) {
    report("AddCapabilities", error);
    return refuse();
  }
  jvmtiEventCallbacks callbacks{};
  callbacks.CompiledMethodLoad = on_compiled_method_load;
  callbacks.CompiledMethodUnload = on_compiled_method_unload;
  callbacks.DynamicCodeGenerated = on_dynamic_code_generated;
  callbacks.ClassPrepare = on_class_prepare;
  callbacks.VMInit = on_vm_init;
  if (jvmtiError error = jvmti->SetEventCallbacks(&callbacks, sizeof callbacks);
      error != JVMTI_ERROR_NONE) {
    report("SetEventCallbacks", error);
    return refuse();
  }
  if (!g_writer.is_open() && !g_writer.open("/tmp", static_cast<int>(::getpid()))) {
    std::fprintf(stderr, "flamebpf agent: cannot write its perf map %s; Java frames stay unnamed\n",
                 g_writer.open_error().c_str());
    return refuse();
  }
  start_unwind_records(jvmti);
  for (jvmtiEvent event :
       {JVMTI_EVENT_COMPILED_METHOD_LOAD, JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
        JVMTI_EVENT_DYNAMIC_CODE_GENERATED, JVMTI_EVENT_CLASS_PREPARE, JVMTI_EVENT_VM_INIT}) {
    if (jvmtiError error = jvmti->SetEventNotificationMode(JVMTI_ENABLE, event, nullptr);
        error != JVMTI_ERROR_NONE) {
      report("SetEventNotificationMode", error);
      // Disposing of the environment turns off the events already on; the map stays open for a
      // later load to use.
      return refuse();
    }
  }
  if (attached) {
    // Code that exists already: the events stay on afterwards for whatever comes next.
    for (jvmtiEvent event :
         {JVMTI_EVENT_DYNAMIC_CODE_GENERATED, JVMTI_EVENT_COMPILED_METHOD_LOAD}) {
      if (jvmtiError error = jvmti->GenerateEvents(event); error != JVMTI_ERROR_NONE)
        report("GenerateEvents", error);
    }
    write_loaded_method_records(jvmti);
  }
  return JNI_OK;
}

} // namespace
} // namespace flamebpf::agent

extern "C" JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM* vm, char*, void*)
{
  // A failure here must not stop the JVM from starting: it runs without named frames.
  flamebpf::agent::start(vm, false);
  return JNI_OK;
}

extern "C" JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM* vm, char*, void*)
{
  return flamebpf::agent::start(vm, true);
}

extern "C" JNIEXPORT void JNICALL Agent_OnUnload(JavaVM*) {}
