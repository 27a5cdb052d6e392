//! sim: filled in by its own issue.

fn main() {
    println!("sim: not yet implemented");
}
