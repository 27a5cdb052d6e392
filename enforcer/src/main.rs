//! enforcer: filled in by its own issue.

fn main() {
    println!("enforcer: not yet implemented");
}
