# deep_chain.cpp's shape in Python, for the benchmark's cost of walking Python frames: each sample
# has 30 Python frames, <module>;run;27 levels of descend_a/b/c;spin.
#   deep_chain.py 5            works for 5 seconds
#   deep_chain.py --rounds N   does N rounds of fixed work and prints the seconds they took
import sys
import time

LEVELS = 27


def spin():
    s = 0
    for i in range(2000):
        s = (s * 31 + i) & 0xFFFFFFFF
    return s


def descend_a(level):
    return descend_b(level - 1) if level else spin()


def descend_b(level):
    return descend_c(level - 1) if level else spin()


def descend_c(level):
    return descend_a(level - 1) if level else spin()


def run(rounds, seconds):
    started = time.monotonic()
    done = 0
    while (rounds and done < rounds) or (not rounds and time.monotonic() - started < seconds):
        descend_a(LEVELS - 1)
        done += 1
    return time.monotonic() - started


if len(sys.argv) == 3 and sys.argv[1] == "--rounds":
    print("%.3f" % run(int(sys.argv[2]), 0))
else:
    run(0, float(sys.argv[1]) if len(sys.argv) > 1 else 10)
