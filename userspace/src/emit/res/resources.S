/* clang-format off */
/* The flame graph's script and style, between symbols; the paths are set by CMake. */
    .section .rodata
    .global flamebpf_svg_script_start
flamebpf_svg_script_start:
    .incbin FLAMEBPF_SVG_SCRIPT
    .global flamebpf_svg_script_end
flamebpf_svg_script_end:
    .global flamebpf_svg_style_start
flamebpf_svg_style_start:
    .incbin FLAMEBPF_SVG_STYLE
    .global flamebpf_svg_style_end
flamebpf_svg_style_end:
    .section .note.GNU-stack,"",%progbits
