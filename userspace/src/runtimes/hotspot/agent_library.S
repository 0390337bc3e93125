/* clang-format off */
/* The agent library's bytes, between two symbols; FLAMEBPF_AGENT_PATH is set by CMake. */
    .section .rodata
    .balign 16
    .global flamebpf_agent_library_start
flamebpf_agent_library_start:
    .incbin FLAMEBPF_AGENT_PATH
    .global flamebpf_agent_library_end
flamebpf_agent_library_end:
    .section .note.GNU-stack,"",%progbits
