#!/usr/bin/env python3
"""Writes a synthetic folded profile: N distinct stacks of depth 20-60, shaped like a real one
(a few processes, shared prefixes that fan out with depth, Java, C++ and kernel frames, skewed
counts). Deterministic for a given seed. Usage: gen-folded.py [N] [SEED] > out.folded"""
import random
import sys

def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    processes = ["java", "nginx", "postgres", "python3", "node", "envoy"]
    kinds = [
        lambda i: f"org.example.service.Handler{i}.process_[j]",
        lambda i: f"com.example.util.Codec{i}$$Lambda/0x{i:016x}.apply_[i]",
        lambda i: f"std::vector<Request<{i}>, std::allocator<Request<{i}>>>::emplace_back",
        lambda i: f"ngx_http_process_{i}",
        lambda i: f"do_syscall_{i}_[k]",
    ]
    seen = set()
    out = sys.stdout
    while len(seen) < count:
        depth = rng.randint(20, 60)
        frames = [rng.choice(processes)]
        for level in range(1, depth):
            # Few choices near the root, many near the leaves: real profiles fan out with depth.
            width = 2 + level * level // 4
            frames.append(rng.choice(kinds)(rng.randrange(width)))
        stack = ";".join(frames)
        if stack in seen:
            continue
        seen.add(stack)
        out.write(f"{stack} {int(rng.paretovariate(1.2))}\n")

if __name__ == "__main__":
    main()
