/* clang-format off */
/* The web page's HTML, script and style, between symbols; the paths are set by CMake. */
    .section .rodata
    .global flamebpf_page_html_start
flamebpf_page_html_start:
    .incbin FLAMEBPF_PAGE_HTML
    .global flamebpf_page_html_end
flamebpf_page_html_end:
    .global flamebpf_page_script_start
flamebpf_page_script_start:
    .incbin FLAMEBPF_PAGE_SCRIPT
    .global flamebpf_page_script_end
flamebpf_page_script_end:
    .global flamebpf_page_style_start
flamebpf_page_style_start:
    .incbin FLAMEBPF_PAGE_STYLE
    .global flamebpf_page_style_end
flamebpf_page_style_end:
    .section .note.GNU-stack,"",%progbits
