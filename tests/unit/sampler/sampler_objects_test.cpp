// The two builds of the sampling program (bpf/CMakeLists.txt): the one without the table unwinder
// must have the same maps and variables as the one with it, since sampler_bpf's skeleton drives
// both, and must use nothing that kernels 5.8 to 5.12 lack, since they are why it exists.
#include <algorithm>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <linux/bpf.h>
#include <memory>
#include <string>
#include <vector>

#include "sampler_bpf.skel.h"
#include "sampler_fp_bpf.skel.h"

namespace flamebpf::sampler {
namespace {

struct ObjectCloser {
  void operator()(bpf_object* object) const { bpf_object__close(object); }
};
using Object = std::unique_ptr<bpf_object, ObjectCloser>;

Object open_object(const void* bytes, size_t size, const char* name)
{
  LIBBPF_OPTS(bpf_object_open_opts, options, .object_name = name);
  bpf_object* object = bpf_object__open_mem(bytes, size, &options);
  EXPECT_NE(object, nullptr) << "cannot open " << name;
  return Object(object);
}

Object with_unwinder()
{
  size_t size = 0;
  const void* bytes = sampler_bpf__elf_bytes(&size);
  return open_object(bytes, size, "sampler_bpf");
}

Object frame_pointers_only()
{
  size_t size = 0;
  const void* bytes = sampler_fp_bpf__elf_bytes(&size);
  return open_object(bytes, size, "sampler_fp_bpf");
}

// Each map as the skeleton and the kernel see it, in the object's order.
// Sorted: the skeleton finds each map by its name, wherever the compiler put it in the object.
std::vector<std::string> maps_of(bpf_object* object)
{
  std::vector<std::string> maps;
  bpf_map* map = nullptr;
  bpf_object__for_each_map(map, object)
  {
    maps.push_back(std::string(bpf_map__name(map)) + " type=" + std::to_string(bpf_map__type(map)) +
                   " key=" + std::to_string(bpf_map__key_size(map)) +
                   " value=" + std::to_string(bpf_map__value_size(map)) +
                   " entries=" + std::to_string(bpf_map__max_entries(map)) +
                   " flags=" + std::to_string(bpf_map__map_flags(map)));
  }
  std::sort(maps.begin(), maps.end());
  return maps;
}

// Each global variable of each data section, with its offset and size: the layout of the
// skeleton's bss, data and rodata structs.
std::vector<std::string> variables_of(bpf_object* object)
{
  std::vector<std::string> variables;
  const btf* types = bpf_object__btf(object);
  if (types == nullptr)
    return {"no BTF"};
  for (const char* section : {".bss", ".data", ".rodata"}) {
    int id = btf__find_by_name_kind(types, section, BTF_KIND_DATASEC);
    if (id < 0)
      continue;
    const btf_type* datasec = btf__type_by_id(types, static_cast<uint32_t>(id));
    const btf_var_secinfo* info = btf_var_secinfos(datasec);
    for (uint16_t at = 0; at < btf_vlen(datasec); ++at, ++info) {
      const btf_type* variable = btf__type_by_id(types, info->type);
      variables.push_back(std::string(section) + " " +
                          btf__name_by_offset(types, variable->name_off) + " at " +
                          std::to_string(info->offset) + " size " + std::to_string(info->size));
    }
  }
  return variables;
}

std::vector<std::string> programs_of(bpf_object* object)
{
  std::vector<std::string> programs;
  bpf_program* program = nullptr;
  bpf_object__for_each_program(program, object)
  {
    programs.push_back(std::string(bpf_program__name(program)) + " " +
                       bpf_program__section_name(program));
  }
  return programs;
}

// What in an object's code kernels 5.8 to 5.12 refuse: helpers added after 5.8, calls of kernel
// functions, callbacks (the address of a function, which bpf_loop takes), atomics that fetch
// (5.12). Read from the ELF object itself, since libbpf adds subprograms only when it loads.
std::vector<std::string> newer_than_5_8(const void* bytes, size_t size)
{
  std::vector<std::string> found;
  elf_version(EV_CURRENT);
  Elf* elf = elf_memory(static_cast<char*>(const_cast<void*>(bytes)), size);
  if (elf == nullptr)
    return {"not ELF"};
  size_t names = 0;
  elf_getshdrstrndx(elf, &names);
  auto code_of = [&](Elf_Scn* section) -> std::pair<const bpf_insn*, size_t> {
    GElf_Shdr header;
    Elf_Data* data = elf_getdata(section, nullptr);
    if (!gelf_getshdr(section, &header) || !(header.sh_flags & SHF_EXECINSTR) || !data)
      return {nullptr, 0};
    return {static_cast<const bpf_insn*>(data->d_buf), data->d_size / sizeof(bpf_insn)};
  };
  Elf_Scn* section = nullptr;
  while ((section = elf_nextscn(elf, section)) != nullptr) {
    GElf_Shdr header;
    gelf_getshdr(section, &header);
    std::string name = elf_strptr(elf, names, header.sh_name);
    auto [code, count] = code_of(section);
    for (size_t at = 0; at < count; ++at) {
      const bpf_insn& instruction = code[at];
      std::string where = name + "+" + std::to_string(at);
      if (instruction.code == (BPF_JMP | BPF_CALL)) {
        if (instruction.src_reg == BPF_PSEUDO_KFUNC_CALL)
          found.push_back(where + ": kernel function call");
        else if (instruction.src_reg == 0 && instruction.imm > BPF_FUNC_csum_level)
          found.push_back(where + ": helper " + std::to_string(instruction.imm));
      } else if (BPF_CLASS(instruction.code) == BPF_STX &&
                 BPF_MODE(instruction.code) == BPF_ATOMIC && instruction.imm != BPF_ADD) {
        found.push_back(where + ": atomic " + std::to_string(instruction.imm));
      }
    }
    if (header.sh_type != SHT_REL)
      continue;
    // A 64-bit load of a symbol in code is a function's address.
    auto [target, target_count] = code_of(elf_getscn(elf, header.sh_info));
    Elf_Data* relocations = elf_getdata(section, nullptr);
    Elf_Scn* symbols = elf_getscn(elf, header.sh_link);
    Elf_Data* symbol_data = symbols ? elf_getdata(symbols, nullptr) : nullptr;
    for (size_t at = 0;
         target && relocations && symbol_data && at < header.sh_size / header.sh_entsize; ++at) {
      GElf_Rel relocation;
      GElf_Sym symbol;
      if (!gelf_getrel(relocations, static_cast<int>(at), &relocation) ||
          !gelf_getsym(symbol_data, static_cast<int>(GELF_R_SYM(relocation.r_info)), &symbol))
        continue;
      size_t index = relocation.r_offset / sizeof(bpf_insn);
      if (index >= target_count || target[index].code != (BPF_LD | BPF_IMM | BPF_DW) ||
          symbol.st_shndx == SHN_UNDEF || symbol.st_shndx >= SHN_LORESERVE)
        continue;
      if (code_of(elf_getscn(elf, symbol.st_shndx)).first)
        found.push_back(name + "+" + std::to_string(index) + ": callback");
    }
  }
  elf_end(elf);
  return found;
}

TEST(SamplerObjects, TheProgramWithoutTheUnwinderHasTheSameMapsVariablesAndPrograms)
{
  auto full = with_unwinder();
  auto plain = frame_pointers_only();
  ASSERT_TRUE(full && plain);
  EXPECT_EQ(maps_of(plain.get()), maps_of(full.get()));
  EXPECT_EQ(variables_of(plain.get()), variables_of(full.get()));
  EXPECT_EQ(programs_of(plain.get()), programs_of(full.get()));
  // The comparison is of something: the unwinder's own map and variable are in both.
  auto variables = variables_of(plain.get());
  EXPECT_NE(std::find_if(variables.begin(), variables.end(),
                         [](const std::string& variable) {
                           return variable.starts_with(".bss tables_generation ");
                         }),
            variables.end());
  EXPECT_GE(maps_of(plain.get()).size(), 10u);
}

TEST(SamplerObjects, OnlyTheProgramWithTheUnwinderNeedsKernelsNewerThan5_8)
{
  size_t full_size = 0, plain_size = 0;
  const void* full = sampler_bpf__elf_bytes(&full_size);
  const void* plain = sampler_fp_bpf__elf_bytes(&plain_size);
  EXPECT_EQ(newer_than_5_8(plain, plain_size), std::vector<std::string>{});
  // The check finds what it looks for: bpf_loop's callback and helpers in the unwinder.
  auto needed = newer_than_5_8(full, full_size);
  EXPECT_NE(std::find_if(needed.begin(), needed.end(),
                         [](const std::string& what) { return what.ends_with(": callback"); }),
            needed.end());
  EXPECT_NE(std::find_if(needed.begin(), needed.end(),
                         [](const std::string& what) {
                           return what.ends_with(": helper " + std::to_string(BPF_FUNC_loop));
                         }),
            needed.end());
}

} // namespace
} // namespace flamebpf::sampler
