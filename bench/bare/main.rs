// The smallest Rust process: the floor for any Rust CLI's start-up on this machine.
fn main() {}
