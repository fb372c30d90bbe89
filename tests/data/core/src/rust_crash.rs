// A Rust program that reads through a null pointer three calls deep (a trait method on a generic type, a
// closure, a const-generic function), for tests/test_symbols.py: built with legacy and v0 symbol mangling.
use std::collections::HashMap;

struct Job<T> {
    items: Vec<T>,
}

trait Step {
    fn step(&self, depth: u32) -> u32;
}

impl<T: Copy + Into<u64>> Step for Job<T> {
    #[inline(never)]
    fn step(&self, depth: u32) -> u32 {
        if depth == 0 {
            let p: *const u32 = std::ptr::null();
            return unsafe { std::ptr::read_volatile(p) } + self.items.len() as u32;
        }
        let f = |d: u32| self.step(d);
        f(depth - 1) + 1
    }
}

#[inline(never)]
fn run<const N: usize>(m: &HashMap<&str, [u8; N]>) -> u32 {
    Job { items: vec![m.len() as u8] }.step(3)
}

fn main() {
    let mut m = HashMap::new();
    m.insert("a", [1u8; 4]);
    std::process::exit(run(&m) as i32);
}
