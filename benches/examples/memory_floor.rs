//! The memory floor of the engine's layout: per GPU, read a 72-byte sample, update a 128-byte
//! state and one slot of a 440-byte ring (the engine's window sizes), with next to no work.
//! Whatever the engine computes comes on top. Usage: `memory_floor [gpus]` (default 80,000,
//! issue 2's 10,000 jobs × 8 GPUs); prints the best of 30 passes, ns per GPU.

use std::hint::black_box;
use std::time::Instant;

#[derive(Clone, Copy, Default)]
struct Sample72([u64; 9]);

#[derive(Clone, Copy)]
#[repr(align(64))]
struct State128([u64; 16]);

const RING_SLOTS: usize = 22;

#[derive(Clone, Copy, Default)]
struct Entry20([u32; 5]);

fn main() {
    let gpus: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(80_000);
    let samples = vec![Sample72([1; 9]); gpus];
    let mut states = vec![State128([0; 16]); gpus];
    let mut rings: Vec<Box<[Entry20]>> = (0..gpus).map(|_| vec![Entry20::default(); RING_SLOTS].into_boxed_slice()).collect();
    let mut best = f64::MAX;
    for pass in 0..40usize {
        let slot = pass % RING_SLOTS;
        let t0 = Instant::now();
        for ((s, st), ring) in samples.iter().zip(&mut states).zip(&mut rings) {
            let old = ring[slot].0[1];
            ring[slot].0[1] = s.0[1] as u32;
            st.0[0] = st.0[0].wrapping_add(s.0[0]).wrapping_sub(old as u64);
            st.0[15] ^= s.0[8];
        }
        let ns = t0.elapsed().as_nanos() as f64 / gpus as f64;
        if pass >= 10 {
            best = best.min(ns);
        }
    }
    black_box(&states);
    println!("{gpus} GPUs: {best:.1} ns per GPU (sample read, state and ring slot updated)");
}
