//! Printing to standard output without panicking when its reader has gone.
//!
//! `println!` panics when a write fails, as it does once a pipe's reader stops
//! early (`soulctl recall … | head`). [`outln!`] returns the error from the
//! calling function instead, and [`closed_pipe`] tells the entry point that the
//! command only lost output nobody reads, so it ends quietly.

/// `println!` that returns the write's error from the calling function
/// instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

/// Whether `e` comes from writing to a pipe whose reader has gone (`| head`):
/// the output nobody reads any more is not a failure of the command.
pub fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
