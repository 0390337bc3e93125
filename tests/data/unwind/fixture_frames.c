// ELF fixture for the unwind-table tests: code whose CFI holds each kind of rule the table
// builder maps. Built twice: with .eh_frame (-fomit-frame-pointer, so CFA = rsp + n, and
// -fno-omit-frame-pointer, so CFA = rbp + 16) and with only .debug_frame.

#include <string.h>

int fb_frames_leaf(int n);
int fb_frames_chain(int n);
int fb_frames_big(int n);
void fb_frames_stop(void);
void fb_frames_signal(void);
void fb_frames_states(void);
void fb_frames_expression(void);

static volatile int fb_frames_sink;

__attribute__((noinline)) int fb_frames_leaf(int n)
{
  int acc = 1;
  for (int i = 0; i < n; ++i)
    fb_frames_sink = acc = acc * 3 + i;
  return acc;
}

// Pushes callee-saved registers and calls: several CFA offsets in one function.
__attribute__((noinline)) int fb_frames_chain(int n)
{
  int a = fb_frames_leaf(n);
  int b = fb_frames_leaf(a & 7);
  int c = fb_frames_leaf(b & 3);
  return a + b * c + fb_frames_leaf(a ^ b);
}

// A frame too large for a 16-bit CFA offset.
__attribute__((noinline)) int fb_frames_big(int n)
{
  volatile char buffer[70000];
  memset((char*)buffer, n, sizeof buffer);
  return buffer[n & 1023] + fb_frames_leaf(buffer[7]);
}

// Rules compilers emit only in hand-written code: an outermost frame (return address
// undefined), a signal frame, remembered states, a CFA expression and a frame pointer saved in
// another register.
__asm__(".text\n"
        ".globl fb_frames_stop\n"
        ".type fb_frames_stop, @function\n"
        "fb_frames_stop:\n"
        ".cfi_startproc\n"
        ".cfi_undefined rip\n"
        "  xor %ebp, %ebp\n"
        "  hlt\n"
        ".cfi_endproc\n"
        ".size fb_frames_stop, .-fb_frames_stop\n"

        ".globl fb_frames_signal\n"
        ".type fb_frames_signal, @function\n"
        ".cfi_startproc\n"
        ".cfi_signal_frame\n"
        "  nop\n"
        "fb_frames_signal:\n"
        "  mov $15, %eax\n"
        "  syscall\n"
        ".cfi_endproc\n"
        ".size fb_frames_signal, .-fb_frames_signal\n"

        ".globl fb_frames_states\n"
        ".type fb_frames_states, @function\n"
        "fb_frames_states:\n"
        ".cfi_startproc\n"
        "  push %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset rbp, -16\n"
        "  mov %rsp, %rbp\n"
        ".cfi_def_cfa_register rbp\n"
        "  test %edi, %edi\n"
        "  je 1f\n"
        ".cfi_remember_state\n"
        "  pop %rbp\n"
        ".cfi_def_cfa rsp, 8\n"
        ".cfi_same_value rbp\n"
        "  ret\n"
        "1:\n"
        ".cfi_restore_state\n"
        "  mov %rbx, %rbp\n"
        ".cfi_register rbp, rbx\n"
        "  nop\n"
        ".cfi_restore rbp\n"
        "  leave\n"
        ".cfi_def_cfa rsp, 8\n"
        "  ret\n"
        ".cfi_endproc\n"
        ".size fb_frames_states, .-fb_frames_states\n"

        ".globl fb_frames_expression\n"
        ".type fb_frames_expression, @function\n"
        "fb_frames_expression:\n"
        ".cfi_startproc\n"
        "  sub $8, %rsp\n"
        // CFA = [rsp + 8]: a DWARF expression the sampler cannot follow.
        ".cfi_escape 0x0f, 0x03, 0x77, 0x08, 0x06\n"
        "  add $8, %rsp\n"
        ".cfi_def_cfa rsp, 8\n"
        "  ret\n"
        ".cfi_endproc\n"
        ".size fb_frames_expression, .-fb_frames_expression\n");
