//! localstripe (PyPI `localstripe`, a stateful fake Stripe server that boxoffice did not
//! write) started for a test: [`LocalStripe::start`] runs it on a free port below 32768 (the
//! ports above are the kernel's client ports) and stops it when dropped. Tests run the Stripe
//! adapter and `serve --payments stripe` against it as well as against [`crate::simulator`],
//! so the adapter is checked against a Stripe that our own reading of Stripe did not shape.
//!
//! What localstripe does differently from Stripe, and what it cannot do, is listed in
//! ARCHITECTURE.md ("What localstripe cannot do"); the tests in
//! `tests/stripe_against_localstripe.rs` pin each difference.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::Rng;

/// The version `.ci/run` installs and the tests were written against.
pub const LOCALSTRIPE_VERSION: &str = "1.15.10";
/// How to install it, said by every failure to start it.
pub const INSTALL_HINT: &str = "install it with: python3 -m pip install localstripe==1.15.10";
/// localstripe accepts any secret key of the form `sk_...` (longer than 5 characters).
pub const SECRET_KEY: &str = "sk_test_boxoffice_localstripe";
/// The webhook signing secret tests register with localstripe.
pub const WEBHOOK_SECRET: &str = "whsec_boxoffice_localstripe";
/// Ports tried, below the client ports (32768-60999).
pub const PORT_FIRST: u16 = 20_000;
pub const PORT_LAST: u16 = 32_000;
/// Ports tried before giving up (another process may take a port between our look and
/// localstripe's bind).
pub const START_ATTEMPTS_MAX: u32 = 10;
/// Longest wait for one localstripe to answer after it was started (Python and aiohttp load
/// in about a second on the CI machine).
pub const START_WAIT_MS_MAX: u64 = 30_000;
/// Pause between two looks while it starts.
const START_POLL_MS: u64 = 50;

/// A running localstripe, killed when dropped.
#[derive(Debug)]
pub struct LocalStripe {
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
    pub port: u16,
    child: Child,
    /// Its standard output and error, shown when something goes wrong.
    log_path: PathBuf,
}

/// Installs localstripe with pip when python3 cannot import it (once per process), as
/// `.ci/run` does, so that README's test command passes on its own; the error names
/// [`INSTALL_HINT`] when pip cannot.
fn ensure_installed() -> Result<(), String> {
    static INSTALLED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let imports = || {
                std::process::Command::new("python3")
                    .args(["-c", "import localstripe"])
                    .output()
                    .is_ok_and(|out| out.status.success())
            };
            if imports() {
                return Ok(());
            }
            eprintln!("installing localstripe ({INSTALL_HINT})");
            let pip = std::process::Command::new("python3")
                .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
                .arg(format!("localstripe=={LOCALSTRIPE_VERSION}"))
                .output()
                .map_err(|error| format!("python3 -m pip: {error}; {INSTALL_HINT}"))?;
            if pip.status.success() && imports() {
                Ok(())
            } else {
                Err(format!(
                    "localstripe is not installed and pip could not install it ({}): {}; {INSTALL_HINT}",
                    pip.status,
                    String::from_utf8_lossy(&pip.stderr).trim()
                ))
            }
        })
        .clone()
}

impl LocalStripe {
    /// Starts `python3 -m localstripe --port P --from-scratch` (from scratch: localstripe
    /// otherwise loads the state another instance saved in `/tmp/localstripe.pickle`) and
    /// waits until it answers; installs localstripe first when it is missing. An error, never
    /// a skip, when it cannot be installed: it names [`INSTALL_HINT`].
    pub async fn start() -> Result<Self, String> {
        ensure_installed()?;
        let mut last_failure = String::new();
        for _ in 0..START_ATTEMPTS_MAX {
            let port = rand::rng().random_range(PORT_FIRST..=PORT_LAST);
            // localstripe binds [::]:PORT (IPv4 too); skip a port someone holds.
            if std::net::TcpListener::bind(("::", port)).is_err()
                || std::net::TcpListener::bind(("127.0.0.1", port)).is_err()
            {
                continue;
            }
            match Self::start_on(port).await {
                Ok(started) => return Ok(started),
                Err(Failure::PortTaken(log)) => last_failure = log,
                Err(Failure::Fatal(why)) => return Err(why),
            }
        }
        Err(format!(
            "localstripe did not start in {START_ATTEMPTS_MAX} attempts: {last_failure}"
        ))
    }

    async fn start_on(port: u16) -> Result<Self, Failure> {
        let log_path = std::env::temp_dir().join(format!(
            "boxoffice-localstripe-{}-{port}.log",
            std::process::id()
        ));
        let log = std::fs::File::create(&log_path)
            .map_err(|error| Failure::Fatal(format!("{}: {error}", log_path.display())))?;
        let log_err = log
            .try_clone()
            .map_err(|error| Failure::Fatal(error.to_string()))?;
        let child = Command::new("python3")
            .args([
                "-m",
                "localstripe",
                "--port",
                &port.to_string(),
                "--from-scratch",
            ])
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|error| {
                Failure::Fatal(format!("python3 -m localstripe: {error}; {INSTALL_HINT}"))
            })?;
        let mut started = Self {
            base_url: format!("http://127.0.0.1:{port}"),
            port,
            child,
            log_path,
        };
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_millis(START_WAIT_MS_MAX);
        loop {
            if let Ok(Some(status)) = started.child.try_wait() {
                let log = started.log();
                return Err(if log.contains("Address already in use") {
                    Failure::PortTaken(log)
                } else if log.contains("No module named localstripe") {
                    Failure::Fatal(format!("localstripe is not installed; {INSTALL_HINT}"))
                } else {
                    Failure::Fatal(format!("localstripe exited ({status}): {log}"))
                });
            }
            // Any HTTP answer (401 without a key) means it is serving.
            let probe = http
                .get(format!("{}/v1/payment_intents", started.base_url))
                .timeout(Duration::from_millis(500))
                .send()
                .await;
            if probe.is_ok() {
                return Ok(started);
            }
            if Instant::now() > deadline {
                return Err(Failure::Fatal(format!(
                    "localstripe did not answer on port {port} within {START_WAIT_MS_MAX} ms: {}",
                    started.log()
                )));
            }
            tokio::time::sleep(Duration::from_millis(START_POLL_MS)).await;
        }
    }

    /// Makes localstripe POST every event to `url`, signed with `secret` (its
    /// `/_config/webhooks` API; the signature is Stripe's `t=...,v1=...` scheme).
    pub async fn send_webhooks_to(&self, url: &str, secret: &str) -> Result<(), String> {
        let answer = reqwest::Client::new()
            .post(format!("{}/_config/webhooks/boxoffice", self.base_url))
            .form(&[("url", url), ("secret", secret)])
            .send()
            .await
            .map_err(|error| error.to_string())?;
        if answer.status().is_success() {
            Ok(())
        } else {
            Err(format!(
                "localstripe refused the webhook: {}",
                answer.status()
            ))
        }
    }

    /// What localstripe printed so far (its access log and errors).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}

impl Drop for LocalStripe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log_path);
    }
}

enum Failure {
    /// Another process bound the port first: try another.
    PortTaken(String),
    Fatal(String),
}
