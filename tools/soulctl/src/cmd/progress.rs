//! Progress bars (on stderr, drawn only when it is a terminal) and password input.

use std::io::IsTerminal;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar of `len` steps labelled `msg`; hidden when stderr is not a terminal.
pub fn bar(len: u64, msg: &str) -> ProgressBar {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let pb = ProgressBar::with_draw_target(Some(len), target);
    pb.set_style(
        ProgressStyle::with_template(
            "{msg:>10} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb.set_message(msg.to_owned());
    pb
}

/// A spinner labelled `msg` for steps of unknown length.
pub fn spinner(msg: &str) -> ProgressBar {
    let pb = bar(0, msg);
    pb.set_style(
        ProgressStyle::with_template("{msg:>10} [{elapsed_precise}] {spinner}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.enable_steady_tick(std::time::Duration::from_millis(120));
    pb
}

/// The password from the environment variable `var` when given, else from an
/// interactive prompt when stdin is a terminal (asked twice when `confirm`).
/// `Ok(None)` when neither is possible. Never from the command line.
pub fn password(var: Option<&str>, prompt: &str, confirm: bool) -> anyhow::Result<Option<String>> {
    if let Some(var) = var {
        let p = std::env::var(var).with_context(|| {
            format!("environment variable {var} (from --password-env) is not set")
        })?;
        anyhow::ensure!(!p.is_empty(), "environment variable {var} is empty");
        return Ok(Some(p));
    }
    if !std::io::stdin().is_terminal() {
        return Ok(None);
    }
    let p = rpassword::prompt_password(prompt).context("reading the password")?;
    anyhow::ensure!(!p.is_empty(), "empty password");
    if confirm {
        let again =
            rpassword::prompt_password("Repeat the password: ").context("reading the password")?;
        anyhow::ensure!(p == again, "the passwords differ");
    }
    Ok(Some(p))
}
