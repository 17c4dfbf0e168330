//! A PostgreSQL server of a test's own: `initdb` and `pg_ctl` under a temporary directory,
//! on a free port below the client port range, run as the `postgres` user when the test runs
//! as root, with the settings the test asks for (a move by logical replication needs
//! `wal_level = logical`, which the machine's shared server does not have and must not be
//! given). Stopped (`pg_ctl stop -m immediate`) and removed when dropped, also when the test
//! panics. The same steps as `boxoffice cluster up` (`crates/cli/src/chaos.rs`:
//! `find_pg_bin`, `as_postgres`, `free_fixed_port`), which the CLI crate keeps to itself.
//! Used by `tests/moving.rs` and `examples/move_pause.rs`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The settings a move by logical replication needs, for a server that is source and target.
pub const LOGICAL: &str = "wal_level = logical\nmax_replication_slots = 16\nmax_wal_senders = 16\n\
     max_logical_replication_workers = 8\nmax_worker_processes = 16\n";
/// A server as the machine's shared one is set up.
pub const REPLICA: &str = "wal_level = replica\n";

/// Ports tried: below Linux's ephemeral range (32768-60999), where the clients' own ports are.
const PORTS: std::ops::Range<u16> = 20_000..32_000;
/// Attempts at a start, each on another port (another test may take the one found free).
const START_ATTEMPTS_MAX: u32 = 5;

/// A running server; stopped and its directory removed on drop.
#[derive(Debug)]
pub struct TestServer {
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
}

impl TestServer {
    /// Starts a fresh server with `settings` (postgresql.conf lines) added.
    pub fn start(settings: &str) -> Self {
        let bin = find_pg_bin();
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS_MAX {
            let dir = std::env::temp_dir().join(format!(
                "boxoffice-pg-test-{}-{:016x}",
                std::process::id(),
                random_u64()
            ));
            std::fs::create_dir_all(&dir).expect("create the server's directory");
            if running_as_root() {
                run(Command::new("chown").arg("postgres:postgres").arg(&dir))
                    .expect("give the server's directory to postgres");
            }
            let port = free_port();
            // From here the guard owns the directory: a failed start removes it.
            let server = TestServer {
                port,
                dir: dir.clone(),
                bin: bin.clone(),
            };
            let data = server.data();
            run(as_postgres(&bin.join("initdb")).arg("-D").arg(&data).args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
            ]))
            .expect("initdb");
            let conf = format!(
                "listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{}'\n\
                 max_connections = 100\nfsync = off\nfull_page_writes = off\n{settings}",
                dir.display()
            );
            append(&data.join("postgresql.conf"), &conf);
            let started = run(as_postgres(&bin.join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(data.join("server.log"))
                .args(["-w", "-t", "60", "start"]));
            match started {
                Ok(()) => return server,
                Err(error) => last_error = error,
            }
        }
        panic!("no test PostgreSQL server started: {last_error}");
    }

    /// `postgres://postgres@127.0.0.1:PORT/DATABASE`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if self.data().join("postmaster.pid").exists() {
            let _ = run(as_postgres(&self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(self.data())
                .args(["-m", "immediate", "-w", "stop"]));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run(command: &mut Command) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|e| format!("running {command:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open postgresql.conf");
    file.write_all(text.as_bytes())
        .expect("write postgresql.conf");
}

fn as_postgres(program: &Path) -> Command {
    if running_as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The newest `/usr/lib/postgresql/<version>/bin` with an `initdb`, or `BOXOFFICE_PG_BIN`.
fn find_pg_bin() -> PathBuf {
    if let Ok(bin) = std::env::var("BOXOFFICE_PG_BIN") {
        return PathBuf::from(bin);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL under /usr/lib/postgresql (or BOXOFFICE_PG_BIN)")
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .expect("an initdb under /usr/lib/postgresql/*/bin")
        .1
}

fn free_port() -> u16 {
    for _ in 0..200 {
        let port = PORTS.start + (random_u64() % u64::from(PORTS.end - PORTS.start)) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {PORTS:?}");
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}
