// The Content-Security-Policy of each kind of answer --listen gives. Every answer carries one: a
// profile names what a target chose (functions, files, containers), and a browser that opened an
// answer must run none of it.
#pragma once

#include <string>

namespace flamebpf::serve {

// Text, JSON, pprof: nothing runs, nothing loads, nothing frames it.
inline constexpr const char* kDataPolicy = "default-src 'none'; frame-ancestors 'none'";

// The page (serve/page_routes.h): its own script and style, requests to this server, flame
// graphs framed from it, and framed by nothing.
inline constexpr const char* kPagePolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

// A flame graph (SVG): its embedded script alone, by hash, so that nothing else in the document
// runs; its inline style; framed by the page only.
const std::string& flame_graph_policy();

} // namespace flamebpf::serve
