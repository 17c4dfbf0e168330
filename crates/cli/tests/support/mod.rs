//! What the process tests share: the `boxoffice` binary's first line, and a payment
//! simulator in its own process (`boxoffice paysim`), so that servers can die and come back
//! while payments stay where they were.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Condvar, Mutex, PoisonError};

pub const BIN: &str = env!("CARGO_BIN_EXE_boxoffice");

/// Tests of one binary that start clusters, browsers or crash loops at once.
pub const HEAVY_AT_ONCE: usize = 2;

static HEAVY: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// A place among the [`HEAVY_AT_ONCE`] heavy tests of this binary allowed to run at once,
/// held until dropped. `.cargo/config.toml` runs four tests at once, for the server's many
/// short stories; on two cores, more than two whole clusters, browsers or crash loops would
/// only make each other time out, and four tests of three nodes each take more connections
/// than PostgreSQL's default 100 (their nodes answer 429 "the inventory store is busy"),
/// so those tests take a place first.
pub fn heavy() -> Heavy {
    let (count, freed) = &HEAVY;
    let mut running = count.lock().unwrap_or_else(PoisonError::into_inner);
    while *running >= HEAVY_AT_ONCE {
        running = freed.wait(running).unwrap_or_else(PoisonError::into_inner);
    }
    *running += 1;
    Heavy(())
}

/// See [`heavy`].
pub struct Heavy(());

impl Drop for Heavy {
    fn drop(&mut self) {
        let (count, freed) = &HEAVY;
        *count.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
        freed.notify_one();
    }
}

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

/// Makes sure Debian's `package` is installed (its program at `path`): installed with
/// apt-get when missing and running as root (after `apt-get update` on a fresh machine
/// with no package lists), so that the README's test command passes on its own, as
/// `.ci/run` does. Panics with the command to run otherwise.
pub fn ensure_debian_package(path: &str, package: &str) {
    // The tests of one binary run on several threads, and two of them installing at once
    // failed on dpkg's lock (seen: both cluster tests on a fresh machine): one at a time
    // here, and apt-get waits for a lock another process holds.
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    if std::path::Path::new(path).exists() {
        return;
    }
    let output = |command: &mut Command, what: &str| {
        command
            .output()
            .unwrap_or_else(|e| panic!("{what}: could not start it: {e}"))
    };
    let show = |out: &std::process::Output| {
        format!(
            "exit: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let uid = output(Command::new("id").arg("-u"), "id -u");
    assert!(
        String::from_utf8_lossy(&uid.stdout).trim() == "0",
        "install Debian's {package}: sudo apt-get install -y {package}"
    );
    eprintln!("installing Debian's {package} (apt-get install -y {package})");
    let install = || {
        output(
            Command::new("apt-get")
                .args([
                    "-o",
                    "DPkg::Lock::Timeout=600",
                    "install",
                    "-y",
                    "-q",
                    package,
                ])
                .env("DEBIAN_FRONTEND", "noninteractive"),
            "apt-get install",
        )
    };
    let mut out = install();
    if !out.status.success() {
        let update = output(
            Command::new("apt-get").args(["-o", "DPkg::Lock::Timeout=600", "update"]),
            "apt-get update",
        );
        assert!(
            update.status.success(),
            "apt-get update failed:\n{}",
            show(&update)
        );
        out = install();
    }
    assert!(
        out.status.success() && std::path::Path::new(path).exists(),
        "apt-get install -y {package} failed:\n{}",
        show(&out)
    );
}
