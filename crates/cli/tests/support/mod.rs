//! What the process tests share: the `boxoffice` binary's first line, and a payment
//! simulator in its own process (`boxoffice paysim`), so that servers can die and come back
//! while payments stay where they were.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_boxoffice");

/// The URL a process prints on its first line after `prefix`.
pub fn first_line_url(child: &mut Child, prefix: &str) -> String {
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    line.trim()
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned()
}

/// `boxoffice paysim` on a free port.
pub struct Paysim {
    child: Child,
    pub base: String,
}

impl Paysim {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// With extra arguments (e.g. `--webhook-url`).
    pub fn start_with(args: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .args(["paysim", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = first_line_url(&mut child, "payment simulator on ");
        Self { child, base }
    }
}

impl Drop for Paysim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
