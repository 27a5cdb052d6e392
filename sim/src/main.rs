//! The `sim` command: see `sim --help` and the `sim::cli` module.

fn main() -> std::process::ExitCode {
    sim::cli::main()
}
