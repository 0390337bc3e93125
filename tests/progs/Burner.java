// A CPU-bound JVM workload with a distinctive call chain, Burner.run -> a -> b -> c, for the JVM
// tests and the demo; the Java counterpart of burner.c. Needs nothing but
// -XX:+PreserveFramePointer (for frame-pointer unwinding of compiled code):
//   java -XX:+PreserveFramePointer -cp DIR Burner 15               burns CPU in c() for 15 s
//   java -XX:+PreserveFramePointer -cp DIR Burner 15 --threads 4   the same in 4 threads (main's
//                                                                  and burner-1 .. burner-3)
//   java -XX:+PreserveFramePointer -cp DIR Burner 15 --recompile   c is deoptimized halfway
// It prints "burner ready" after a warm-up (1.5 s and 30,000 calls; a, b and c reach C2 within
// about 0.2 s), "burner recompile" when --recompile makes c take its uncommon path, and "burner
// done <calls>" at the end.
//
// a, b and c stay separate frames after JIT compilation: C2 inlines a hot callee only if it has
// at most FreqInlineSize (325) bytes of bytecode, C1 one of at most 35, and each of them is an
// unrolled add-rotate-xor permutation of 466 to 481 bytes (javap -c). Smaller methods would be
// folded into their callers and vanish from the stacks. run is compiled on stack (OSR) and main
// stays interpreted, so a perf map names the chain Interpreter;Burner.run;Burner.a;Burner.b;
// Burner.c.

import static java.lang.Long.rotateLeft;

public class Burner {
  // Loop iterations per call of c: short calls, so that a, b and c are invoked often enough to be
  // compiled as ordinary methods, not only on-stack-replaced loops.
  private static final int ITERATIONS = 500;
  // Warm-up before "burner ready": a, b and c reach C2 after a few thousand invocations each.
  private static final long READY_CALLS = 30_000;
  private static final long READY_NANOS = 1_500_000_000L;

  // Set halfway through by --recompile. Until then c's compiled code has never seen it set, so C2
  // replaces the branch by an uncommon trap; setting it deoptimizes c, which is later recompiled.
  private static volatile boolean uncommon;
  // Calls of a so far, as last stored by any burning thread; only a warm-up gauge.
  private static volatile long progress;
  // Keeps the results alive, so the JIT cannot drop the work.
  private static volatile long sink;

  public static void main(String[] args) throws InterruptedException {
    double seconds = -1;
    int threads = 1;
    boolean recompile = false;
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals("--recompile")) {
        recompile = true;
      } else if (args[i].equals("--threads") && i + 1 < args.length) {
        threads = Integer.parseInt(args[++i]);
      } else if (seconds < 0) {
        seconds = Double.parseDouble(args[i]);
      } else {
        seconds = -1;
        break;
      }
    }
    if (seconds < 0 || threads < 1) {
      System.err.println("usage: Burner SECONDS [--threads N] [--recompile]");
      System.exit(2);
    }

    long start = System.nanoTime();
    long deadline = start + (long) (seconds * 1e9);
    long switchAt = recompile ? start + (long) (seconds * 0.5e9) : Long.MAX_VALUE;
    // The progress lines come from a thread of their own: rare branches in run's loop would be
    // compiled as uncommon traps, and taking them would send run back to the interpreter.
    Thread clock = new Thread(() -> report(start, deadline, switchAt), "burner-clock");
    clock.setDaemon(true);
    clock.start();
    Thread[] workers = new Thread[threads - 1];
    long[] calls = new long[threads];
    for (int i = 0; i < workers.length; i++) {
      int slot = i + 1;
      workers[i] = new Thread(() -> calls[slot] = run(deadline), "burner-" + slot);
      workers[i].start();
    }
    calls[0] = run(deadline);
    long total = calls[0];
    for (int i = 0; i < workers.length; i++) {
      workers[i].join();
      total += calls[i + 1];
    }
    System.out.println("burner done " + total);
  }

  // Calls a until the deadline; returns the number of calls.
  static long run(long deadline) {
    long calls = 0;
    long h = 0x243F6A8885A308D3L;
    while (System.nanoTime() < deadline) {
      h = a(h, ITERATIONS);
      progress = ++calls;
    }
    sink = h;
    return calls;
  }

  // Prints "burner ready" after the warm-up and, at switchAt, makes c take its uncommon path.
  static void report(long start, long deadline, long switchAt) {
    try {
      while (progress < READY_CALLS || System.nanoTime() - start < READY_NANOS) {
        Thread.sleep(20);
      }
      System.out.println("burner ready");
      System.out.flush();
      for (long now = System.nanoTime(); now < switchAt; now = System.nanoTime()) {
        Thread.sleep(Math.max(1, Math.min(100, (switchAt - now) / 1_000_000)));
      }
      if (switchAt < deadline) {
        uncommon = true;
        System.out.println("burner recompile");
        System.out.flush();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  static long a(long seed, int iterations) {
    long x0 = seed;
    long x1 = seed ^ 0x13198A2E03707344L;
    long x2 = ~seed;
    long x3 = seed * 0xA4093822299F31D1L;
    x0 += x1; x3 = rotateLeft(x3 ^ x0, 25); x2 += x3; x1 = rotateLeft(x1 ^ x2, 14);
    x1 += x2; x0 = rotateLeft(x0 ^ x1, 30); x3 += x0; x2 = rotateLeft(x2 ^ x3, 46);
    x2 += x3; x1 = rotateLeft(x1 ^ x2, 8); x0 += x1; x3 = rotateLeft(x3 ^ x0, 9);
    x3 += x0; x2 = rotateLeft(x2 ^ x3, 57); x1 += x2; x0 = rotateLeft(x0 ^ x1, 39);
    x0 += x1; x3 = rotateLeft(x3 ^ x0, 11); x2 += x3; x1 = rotateLeft(x1 ^ x2, 28);
    x1 += x2; x0 = rotateLeft(x0 ^ x1, 42); x3 += x0; x2 = rotateLeft(x2 ^ x3, 8);
    x0 ^= b(x1 ^ x3, iterations);
    x2 += x3; x1 = rotateLeft(x1 ^ x2, 37); x0 += x1; x3 = rotateLeft(x3 ^ x0, 18);
    x3 += x0; x2 = rotateLeft(x2 ^ x3, 7); x1 += x2; x0 = rotateLeft(x0 ^ x1, 10);
    x0 += x1; x3 = rotateLeft(x3 ^ x0, 32); x2 += x3; x1 = rotateLeft(x1 ^ x2, 31);
    x1 += x2; x0 = rotateLeft(x0 ^ x1, 9); x3 += x0; x2 = rotateLeft(x2 ^ x3, 20);
    x2 += x3; x1 = rotateLeft(x1 ^ x2, 10); x0 += x1; x3 = rotateLeft(x3 ^ x0, 40);
    x3 += x0; x2 = rotateLeft(x2 ^ x3, 32); x1 += x2; x0 = rotateLeft(x0 ^ x1, 8);
    return x0 ^ x1 ^ x2 ^ x3;
  }

  static long b(long seed, int iterations) {
    long x0 = seed;
    long x1 = seed ^ 0x082EFA98EC4E6C89L;
    long x2 = ~seed;
    long x3 = seed * 0x452821E638D01377L;
    x0 += x1; x3 = rotateLeft(x3 ^ x0, 57); x2 += x3; x1 = rotateLeft(x1 ^ x2, 41);
    x1 += x2; x0 = rotateLeft(x0 ^ x1, 12); x3 += x0; x2 = rotateLeft(x2 ^ x3, 19);
    x2 += x3; x1 = rotateLeft(x1 ^ x2, 45); x0 += x1; x3 = rotateLeft(x3 ^ x0, 42);
    x3 += x0; x2 = rotateLeft(x2 ^ x3, 8); x1 += x2; x0 = rotateLeft(x0 ^ x1, 41);
    x0 += x1; x3 = rotateLeft(x3 ^ x0, 42); x2 += x3; x1 = rotateLeft(x1 ^ x2, 30);
    x1 += x2; x0 = rotateLeft(x0 ^ x1, 8); x3 += x0; x2 = rotateLeft(x2 ^ x3, 19);
    x0 ^= c(x1 ^ x3, iterations);
    x2 += x3; x1 = rotateLeft(x1 ^ x2, 7); x0 += x1; x3 = rotateLeft(x3 ^ x0, 40);
    x3 += x0; x2 = rotateLeft(x2 ^ x3, 59); x1 += x2; x0 = rotateLeft(x0 ^ x1, 13);
    x0 += x1; x3 = rotateLeft(x3 ^ x0, 23); x2 += x3; x1 = rotateLeft(x1 ^ x2, 31);
    x1 += x2; x0 = rotateLeft(x0 ^ x1, 14); x3 += x0; x2 = rotateLeft(x2 ^ x3, 39);
    x2 += x3; x1 = rotateLeft(x1 ^ x2, 12); x0 += x1; x3 = rotateLeft(x3 ^ x0, 41);
    x3 += x0; x2 = rotateLeft(x2 ^ x3, 24); x1 += x2; x0 = rotateLeft(x0 ^ x1, 40);
    return x0 ^ x1 ^ x2 ^ x3;
  }

  // The hot leaf: nearly all of the process's CPU time is spent in this loop.
  static long c(long seed, int iterations) {
    long x0 = seed;
    long x1 = seed ^ 0xBE5466CF34E90C6CL;
    long x2 = ~seed;
    long x3 = seed * 0xC0AC29B7C97C50DDL;
    for (int i = 0; i < iterations; i++) {
      x0 += x1; x3 = rotateLeft(x3 ^ x0, 57); x2 += x3; x1 = rotateLeft(x1 ^ x2, 48);
      x1 += x2; x0 = rotateLeft(x0 ^ x1, 16); x3 += x0; x2 = rotateLeft(x2 ^ x3, 11);
      x2 += x3; x1 = rotateLeft(x1 ^ x2, 42); x0 += x1; x3 = rotateLeft(x3 ^ x0, 41);
      x3 += x0; x2 = rotateLeft(x2 ^ x3, 45); x1 += x2; x0 = rotateLeft(x0 ^ x1, 17);
      x0 += x1; x3 = rotateLeft(x3 ^ x0, 28); x2 += x3; x1 = rotateLeft(x1 ^ x2, 11);
      x1 += x2; x0 = rotateLeft(x0 ^ x1, 40); x3 += x0; x2 = rotateLeft(x2 ^ x3, 50);
      x2 += x3; x1 = rotateLeft(x1 ^ x2, 9); x0 += x1; x3 = rotateLeft(x3 ^ x0, 41);
      x3 += x0; x2 = rotateLeft(x2 ^ x3, 8); x1 += x2; x0 = rotateLeft(x0 ^ x1, 44);
      x0 += x1; x3 = rotateLeft(x3 ^ x0, 18); x2 += x3; x1 = rotateLeft(x1 ^ x2, 36);
      x1 += x2; x0 = rotateLeft(x0 ^ x1, 48); x3 += x0; x2 = rotateLeft(x2 ^ x3, 39);
      x2 += x3; x1 = rotateLeft(x1 ^ x2, 32); x0 += x1; x3 = rotateLeft(x3 ^ x0, 54);
      x3 += x0; x2 = rotateLeft(x2 ^ x3, 25); x1 += x2; x0 = rotateLeft(x0 ^ x1, 34);
      if (uncommon) {
        x0 ^= i;
      }
    }
    return x0 ^ x1 ^ x2 ^ x3;
  }
}
