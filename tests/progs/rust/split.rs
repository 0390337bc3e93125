// A Rust workload with a known split: outer calls heavy and light, which both call the leaf spin,
// heavy with three times light's rounds. Runs until killed.
use std::hint::black_box;

#[inline(never)]
fn spin(rounds: u64) -> u64 {
    let mut x = black_box(1u64);
    for _ in 0..rounds {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    }
    x
}

// black_box keeps the call from becoming a jump, which would leave no frame of heavy or light.
#[inline(never)]
fn heavy() -> u64 {
    black_box(spin(3 << 20)) ^ 1
}

#[inline(never)]
fn light() -> u64 {
    black_box(spin(1 << 20)) ^ 1
}

#[inline(never)]
fn outer() {
    let mut sum = 0u64;
    loop {
        sum = sum.wrapping_add(heavy());
        sum = sum.wrapping_add(light());
        black_box(sum);
    }
}

fn main() {
    eprintln!("ready");
    outer();
}
