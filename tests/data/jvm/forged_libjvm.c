// A library named libjvm.so that exports HotSpot's VMStructs symbols over tables and a code cache
// of its own making, as a hostile process that only looks like a JVM could. forge(mode) sets up
// one attack on flamebpf's reader of JVM memory (userspace/src/symbolize/hotspot_code.h):
//   0  plausible: one compiled method whose class name holds a newline and invalid UTF-8 and
//      whose method name is a 65,535-byte symbol
//   1  a segment map whose every entry says "one segment back", so that finding a blob hops
//      65,535 times
//   2  a table of fields that never ends (every entry a copy of the first)
// code_address() is an address inside the forged code heap.
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct StructEntry {
  const char* type_name;
  const char* field_name;
  const char* type_string;
  int32_t is_static;
  uint64_t offset;
  void* address;
};
struct TypeEntry {
  const char* type_name;
  uint64_t size;
};

// HotSpot's types as the forged tables describe them.
struct GrowableArray {
  int32_t len;
  int32_t max;
  void** data;
};
struct VirtualSpace {
  char* low_boundary;
  char* high;
};
struct CodeHeap {
  struct VirtualSpace memory;
  struct VirtualSpace segmap;
  int32_t log2_segment_size;
};
struct CodeBlob {
  const char* name;
  int32_t size;
  int32_t code_offset;
  int32_t frame_size;
  int32_t frame_complete_offset;
  void* method;
};
struct Method {
  void* const_method;
};
struct ConstMethod {
  void* constants;
  uint16_t name_index;
  uint16_t signature_index;
};
struct ConstantPool {
  void* pool_holder;
};
struct Klass {
  void* name;
};
struct Symbol {
  uint16_t length;
  char body[2];
};

enum { kHeapBlock = 16, kLog2Segment = 4, kSegments = 1 << 16 };

static char code[kSegments << kLog2Segment] __attribute__((aligned(4096)));
static unsigned char segmap[kSegments];
static struct CodeHeap heap;
static void* heaps_data[1];
static struct GrowableArray heaps_array;
static struct GrowableArray* heaps;
static struct Method method;
static struct ConstMethod const_method;
static struct {
  struct ConstantPool header;
  void* entries[4];
} pool;
static struct Klass klass;
static struct {
  uint16_t length;
  char body[32];
} class_symbol = {19, "evil\nclass\xff\xfe name"};
static struct {
  uint16_t length;
  char body[65535];
} method_symbol;
static struct {
  uint16_t length;
  char body[8];
} signature_symbol = {3, "(J)V"};

static struct StructEntry fields[] = {
    {"CodeCache", "_heaps", "GrowableArray<CodeHeap*>*", 1, 0, &heaps},
    {"GrowableArrayBase", "_len", "int", 0, offsetof(struct GrowableArray, len), NULL},
    {"GrowableArray<int>", "_data", "int*", 0, offsetof(struct GrowableArray, data), NULL},
    {"CodeHeap", "_memory", "VirtualSpace", 0, offsetof(struct CodeHeap, memory), NULL},
    {"CodeHeap", "_segmap", "VirtualSpace", 0, offsetof(struct CodeHeap, segmap), NULL},
    {"CodeHeap", "_log2_segment_size", "int", 0, offsetof(struct CodeHeap, log2_segment_size),
     NULL},
    {"VirtualSpace", "_low_boundary", "char*", 0, offsetof(struct VirtualSpace, low_boundary),
     NULL},
    {"VirtualSpace", "_high", "char*", 0, offsetof(struct VirtualSpace, high), NULL},
    {"CodeBlob", "_name", "const char*", 0, offsetof(struct CodeBlob, name), NULL},
    {"CodeBlob", "_size", "int", 0, offsetof(struct CodeBlob, size), NULL},
    {"CodeBlob", "_code_offset", "int", 0, offsetof(struct CodeBlob, code_offset), NULL},
    {"CodeBlob", "_frame_size", "int", 0, offsetof(struct CodeBlob, frame_size), NULL},
    {"CodeBlob", "_frame_complete_offset", "int", 0,
     offsetof(struct CodeBlob, frame_complete_offset), NULL},
    {"nmethod", "_method", "Method*", 0, offsetof(struct CodeBlob, method), NULL},
    {"Method", "_constMethod", "ConstMethod*", 0, offsetof(struct Method, const_method), NULL},
    {"ConstMethod", "_constants", "ConstantPool*", 0, offsetof(struct ConstMethod, constants),
     NULL},
    {"ConstMethod", "_name_index", "u2", 0, offsetof(struct ConstMethod, name_index), NULL},
    {"ConstMethod", "_signature_index", "u2", 0, offsetof(struct ConstMethod, signature_index),
     NULL},
    {"ConstantPool", "_pool_holder", "InstanceKlass*", 0,
     offsetof(struct ConstantPool, pool_holder), NULL},
    {"Klass", "_name", "Symbol*", 0, offsetof(struct Klass, name), NULL},
    {"Symbol", "_length", "u2", 0, offsetof(struct Symbol, length), NULL},
    {"Symbol", "_body", NULL, 0, offsetof(struct Symbol, body), NULL},
    {NULL, NULL, NULL, 0, 0, NULL}};
// Mode 2's table: 200,000 fields and no end.
static struct StructEntry endless[200000];
static struct TypeEntry types[] = {
    {"HeapBlock", kHeapBlock}, {"ConstantPool", sizeof(struct ConstantPool)}, {NULL, 0}};

__attribute__((visibility("default"))) struct StructEntry* gHotSpotVMStructs = fields;
__attribute__((visibility("default"))) uint64_t gHotSpotVMStructEntryTypeNameOffset =
    offsetof(struct StructEntry, type_name);
__attribute__((visibility("default"))) uint64_t gHotSpotVMStructEntryFieldNameOffset =
    offsetof(struct StructEntry, field_name);
__attribute__((visibility("default"))) uint64_t gHotSpotVMStructEntryTypeStringOffset =
    offsetof(struct StructEntry, type_string);
__attribute__((visibility("default"))) uint64_t gHotSpotVMStructEntryIsStaticOffset =
    offsetof(struct StructEntry, is_static);
__attribute__((visibility("default"))) uint64_t gHotSpotVMStructEntryOffsetOffset =
    offsetof(struct StructEntry, offset);
__attribute__((visibility("default"))) uint64_t gHotSpotVMStructEntryAddressOffset =
    offsetof(struct StructEntry, address);
__attribute__((visibility("default"))) uint64_t gHotSpotVMStructEntryArrayStride =
    sizeof(struct StructEntry);
__attribute__((visibility("default"))) struct TypeEntry* gHotSpotVMTypes = types;
__attribute__((visibility("default"))) uint64_t gHotSpotVMTypeEntryTypeNameOffset =
    offsetof(struct TypeEntry, type_name);
__attribute__((visibility("default"))) uint64_t gHotSpotVMTypeEntrySizeOffset =
    offsetof(struct TypeEntry, size);
__attribute__((visibility("default"))) uint64_t gHotSpotVMTypeEntryArrayStride =
    sizeof(struct TypeEntry);

__attribute__((visibility("default"))) uintptr_t code_address(void)
{
  return (uintptr_t)(code + 1000);
}

__attribute__((visibility("default"))) void forge(int mode)
{
  heap.memory.low_boundary = code;
  heap.memory.high = code + sizeof code;
  heap.segmap.low_boundary = (char*)segmap;
  heap.segmap.high = (char*)segmap + sizeof segmap;
  heap.log2_segment_size = kLog2Segment;
  heaps_data[0] = &heap;
  heaps_array.len = 1;
  heaps_array.max = 1;
  heaps_array.data = heaps_data;
  heaps = &heaps_array;
  // One blob from segment 0 to 127, as HotSpot marks it: 0, then the distance back, capped.
  memset(segmap, 0xff, sizeof segmap);
  for (int i = 0; i < 128; ++i)
    segmap[i] = (unsigned char)(i < 0xfe ? i : 0xfe);
  struct CodeBlob* blob = (struct CodeBlob*)(code + kHeapBlock);
  blob->name = "nmethod";
  blob->size = 128 << kLog2Segment;
  blob->code_offset = 64;
  blob->frame_size = 4;
  blob->frame_complete_offset = 8;
  blob->method = &method;
  method.const_method = &const_method;
  const_method.constants = &pool;
  const_method.name_index = 1;
  const_method.signature_index = 2;
  pool.header.pool_holder = &klass;
  pool.entries[1] = &method_symbol;
  pool.entries[2] = &signature_symbol;
  klass.name = &class_symbol;
  method_symbol.length = 65535;
  memset(method_symbol.body, 'm', sizeof method_symbol.body);
  if (mode == 1)
    memset(segmap, 1, sizeof segmap);
  if (mode == 2) {
    for (size_t i = 0; i < sizeof endless / sizeof endless[0]; ++i)
      endless[i] = fields[i % 3];
    gHotSpotVMStructs = endless;
  }
}
