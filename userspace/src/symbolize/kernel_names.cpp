#include "symbolize/kernel_names.h"

#include <algorithm>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cerrno>
#include <cstring>

#include "bpf_abi.h"
#include "common/log.h"
#include "kernel_names.skel.h"

namespace flamebpf::symbolize {

struct BpfKernelNames::Program {
  ::kernel_names* skeleton = nullptr;
  fb_kernel_names batch{};
  ~Program()
  {
    if (skeleton)
      ::kernel_names::destroy(skeleton);
  }
};

BpfKernelNames::BpfKernelNames(std::unique_ptr<Program> program) : program_(std::move(program)) {}
BpfKernelNames::BpfKernelNames(BpfKernelNames&&) noexcept = default;
BpfKernelNames& BpfKernelNames::operator=(BpfKernelNames&&) noexcept = default;
BpfKernelNames::~BpfKernelNames() = default;

Result<BpfKernelNames> BpfKernelNames::load()
{
  auto program = std::make_unique<Program>();
  program->skeleton = ::kernel_names::open_and_load();
  if (!program->skeleton)
    return fail(system_error(errno, "cannot load the kernel-naming BPF program"));
  BpfKernelNames names(std::move(program));
  // A run over an empty batch checks that the kernel runs syscall programs on request (5.14+).
  names.name_batch(nullptr, 0);
  if (names.failure_reported_)
    return fail(error("the kernel-naming BPF program does not run"));
  return names;
}

void BpfKernelNames::name_batch(const uint64_t* addresses, size_t count)
{
  auto& batch = program_->batch;
  batch.count = static_cast<uint32_t>(count);
  std::copy_n(addresses, count, batch.addresses);
  for (size_t i = 0; i < count; ++i)
    batch.names[i][0] = '\0';
  uint32_t zero = 0;
  int map = bpf_map__fd(program_->skeleton->maps.batch);
  LIBBPF_OPTS(bpf_test_run_opts, run);
  bool ran = bpf_map_update_elem(map, &zero, &batch, BPF_ANY) == 0 &&
             bpf_prog_test_run_opts(
                 bpf_program__fd(program_->skeleton->progs.name_kernel_addresses), &run) == 0 &&
             bpf_map_lookup_elem(map, &zero, &batch) == 0;
  if (!ran) {
    if (!failure_reported_)
      spdlog::warn("cannot name kernel addresses through BPF: {}", std::strerror(errno));
    failure_reported_ = true;
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    auto& text = batch.names[i];
    text[FB_KERNEL_NAME_LEN - 1] = '\0';
    Named named;
    parse_printed_symbol(text, named.name, named.module);
    named_[addresses[i]] = std::move(named);
  }
}

void BpfKernelNames::prepare(const std::vector<uint64_t>& addresses)
{
  std::vector<uint64_t> unknown;
  for (uint64_t address : addresses) {
    if (!named_.contains(address))
      unknown.push_back(address);
  }
  std::sort(unknown.begin(), unknown.end());
  unknown.erase(std::unique(unknown.begin(), unknown.end()), unknown.end());
  if (named_.size() + unknown.size() > kMaxRemembered)
    named_.clear();
  for (size_t at = 0; at < unknown.size(); at += FB_KERNEL_NAMES_BATCH)
    name_batch(unknown.data() + at, std::min<size_t>(FB_KERNEL_NAMES_BATCH, unknown.size() - at));
}

std::optional<KernelSymbol> BpfKernelNames::lookup(uint64_t address) const
{
  auto it = named_.find(address);
  if (it == named_.end() || it->second.name.empty())
    return std::nullopt;
  return KernelSymbol{address, it->second.name, it->second.module};
}

void parse_printed_symbol(std::string_view printed, std::string& name, std::string& module)
{
  name.clear();
  module.clear();
  if (printed.empty() || printed.starts_with("0x"))
    return;
  if (printed.back() == ']') {
    size_t open = printed.rfind(" [");
    if (open != std::string_view::npos) {
      module = std::string(printed.substr(open + 2, printed.size() - open - 3));
      printed = printed.substr(0, open);
    }
  }
  name = std::string(printed);
}

Result<std::unique_ptr<KernelNames>> load_kernel_names()
{
  // The kernel names only the addresses sampled, for a few kilobytes; /proc/kallsyms would cost
  // megabytes of memory and a tenth of a second of CPU to read whole.
  auto bpf = BpfKernelNames::load();
  if (bpf)
    return std::make_unique<BpfKernelNames>(std::move(*bpf));
  auto kallsyms = KernelSymbols::load();
  if (!kallsyms) {
    Error failure = bpf.error();
    failure.message += "; and " + kallsyms.error().message;
    return fail(failure);
  }
  spdlog::debug("{}; kernel frames are named from /proc/kallsyms instead", bpf.error().message);
  return std::make_unique<KallsymsNames>(std::move(*kallsyms));
}

} // namespace flamebpf::symbolize
