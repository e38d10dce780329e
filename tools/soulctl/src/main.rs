//! soulctl: operate soulmem stores from the shell.

fn main() {
    println!("soulctl {}", env!("CARGO_PKG_VERSION"));
}
