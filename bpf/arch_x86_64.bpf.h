// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// x86-64's facts for the unwinder (unwind.bpf.h): registers, the frame-pointer chain, PLT entries,
// and the signal frame. Userspace's side is unwind/arch_x86_64.h;
// another architecture is a file like each, chosen where they are included.
#ifndef FLAMEBPF_ARCH_X86_64_BPF_H
#define FLAMEBPF_ARCH_X86_64_BPF_H

#define FB_WORD_BYTES 8
// The end of the user address space with 5-level paging (4-level paging ends it at 1 << 47): a
// return address at or above it is no code's.
#define FB_USER_ADDRESS_END (1ULL << 56)
// A call leaves the return address one word below the CFA (the caller's sp before the call).
#define FB_RETURN_ADDRESS_AT_CFA (-8)
// The frame-pointer chain: [fp] is the caller's fp, [fp + 8] the return address, and the caller's
// sp is fp + 16.
#define FB_CALLER_SP_FROM_FP 16
// A row's fp_offset_words for the usual frame: the caller's fp right below the return address.
#define FB_SAVED_FP_BELOW_RETURN_WORDS (-2)
// The CFA's offset from sp at a function's first instruction (the return address alone), and once
// the frame pointer is pushed below it.
#define FB_CFA_AT_ENTRY 8
#define FB_CFA_AFTER_FP_PUSH 16

// The CFA of a PLT entry at pc with stack pointer sp: each entry pushes once, 11 bytes in (so does
// each entry of the classic PLT).
static __always_inline __u64 plt_cfa(__u64 sp, __u64 pc)
{
  return sp + 8 + ((pc & 15) >= 11 ? 8 : 0);
}

// The signal frame at the sp of a signal trampoline (the handler's return has popped
// rt_sigframe.pretcode, so sp is at its ucontext): the interrupted registers are in
// uc_mcontext, 40 bytes in, as struct sigcontext.
#define FB_SIGFRAME_MCONTEXT 40
#define FB_SIGCONTEXT_FP 80
#define FB_SIGCONTEXT_SP 120
#define FB_SIGCONTEXT_PC 128

// The saved user registers (struct pt_regs, the layout of the perf_event context's regs and of
// what bpf_task_pt_regs points at), laid out here rather than taken from vmlinux.h: that type
// would make each field a CO-RE relocation, and libbpf would parse the kernel's whole BTF at
// every start to resolve offsets that the ABI fixes (measured: 10 ms of a 40 ms start).
struct fb_user_regs {
  __u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax;
  __u64 ip, cs, flags, sp, ss;
};

// The user registers of the current task: those the sample interrupted if it was in user mode,
// else those saved on kernel entry. 0 if there are none (a kernel thread).
static __always_inline int
user_registers(struct bpf_perf_event_data* ctx, __u64* pc, __u64* sp, __u64* fp)
{
  struct fb_user_regs* interrupted = (struct fb_user_regs*)ctx;
  // Volatile: the context allows only whole-word loads, which clang would narrow to the low bits.
  __u64 cs = *(volatile __u64*)&interrupted->cs;
  if ((cs & 3) == 3) {
    *pc = interrupted->ip;
    *sp = interrupted->sp;
    *fp = interrupted->bp;
    return 1;
  }
  void* saved = (void*)bpf_task_pt_regs(bpf_get_current_task_btf());
  struct fb_user_regs regs;
  if (!saved || bpf_probe_read_kernel(&regs, sizeof(regs), saved))
    return 0;
  if ((regs.cs & 3) != 3)
    return 0;
  *pc = regs.ip;
  *sp = regs.sp;
  *fp = regs.bp;
  return 1;
}

#endif /* FLAMEBPF_ARCH_X86_64_BPF_H */
