// The JVM of the scale benchmark (bench/scale.sh): a service that is mostly idle, as most JVMs of
// a node are. Each second it works for BUSY_MS milliseconds (parsing order lines, summing them,
// keeping the last few thousand, so the young generation fills and is collected now and then),
// then sleeps for the rest of the second.
//   java -cp /app Ticker BUSY_MS      prints "ticker ready" after its first second of work
import java.util.ArrayDeque;

public class Ticker {
  private static final int KEPT_ORDERS = 4096;
  // Keeps the results alive, so the JIT cannot drop the work.
  private static volatile long sink;

  record Order(String customer, long cents, int quantity) {}

  static Order parse(String line) {
    String[] fields = line.split(",");
    return new Order(fields[0], Long.parseLong(fields[1]), Integer.parseInt(fields[2]));
  }

  static long total(ArrayDeque<Order> orders) {
    long sum = 0;
    for (Order order : orders)
      sum += order.cents() * order.quantity();
    return sum;
  }

  static void work(long until, ArrayDeque<Order> kept) {
    for (long n = 0; System.nanoTime() < until; n++) {
      kept.addLast(parse("customer-" + (n % 211) + "," + (n * 37 % 10007) + "," + (n % 7 + 1)));
      if (kept.size() > KEPT_ORDERS)
        kept.removeFirst();
      if (n % 64 == 0)
        sink += total(kept);
    }
  }

  public static void main(String[] args) throws InterruptedException {
    long busyNanos = Long.parseLong(args[0]) * 1_000_000L;
    ArrayDeque<Order> kept = new ArrayDeque<>();
    boolean ready = false;
    for (;;) {
      long start = System.nanoTime();
      work(start + busyNanos, kept);
      if (!ready) {
        System.out.println("ticker ready");
        ready = true;
      }
      long rest = 1_000_000_000L - (System.nanoTime() - start);
      if (rest > 0)
        Thread.sleep(rest / 1_000_000L, (int) (rest % 1_000_000L));
    }
  }
}
