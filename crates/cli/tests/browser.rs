//! The storefront in a real browser: `boxoffice serve --dev-auth` on a fresh SQLite file, then
//! `node e2e/storefront.mjs` drives headless Chromium (Debian's `chromium` through
//! `playwright-core`) through the admin page, the waiting room, the canvas seat map, a hold,
//! a card payment and a 3-D Secure payment, the order page with QR codes, and a second
//! browser that sees the seats turn SOLD live, then the operator's report of the sale.
//! Screenshots land in `docs/screenshots/`. `e2e/languages.mjs` shows the storefront in German
//! and in Chinese (issue 39), and the door app's story runs in German.
//!
//! Missing tools are installed when that is possible (`npm ci` in `e2e/`; `apt-get install
//! chromium` as root), otherwise the test fails saying what to install. It never skips.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_boxoffice");
const CHROMIUM: &str = "/usr/bin/chromium";
/// How long the server may take to print its address and answer `/healthz`.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

fn show(output: &Output) -> String {
    format!(
        "exit: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn run(command: &mut Command, what: &str) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("{what}: could not start it: {e}"))
}

/// Node.js must be there; `playwright-core` is installed from `e2e/package-lock.json` when
/// `e2e/node_modules` lacks it.
fn ensure_node_modules(e2e: &Path) {
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.as_ref().is_ok_and(|o| o.status.success()),
        "Node.js is needed to drive the browser: install it (Debian: sudo apt-get install -y nodejs npm)"
    );
    let installed = ["playwright-core", "qrcode-generator"]
        .iter()
        .all(|module| {
            e2e.join(format!("node_modules/{module}/package.json"))
                .exists()
        });
    if installed {
        return;
    }
    eprintln!(
        "installing the e2e dependencies: npm ci in {}",
        e2e.display()
    );
    let out = run(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(e2e),
        "npm ci",
    );
    assert!(
        out.status.success(),
        "npm ci in {} failed (is the npm registry reachable?):\n{}",
        e2e.display(),
        show(&out)
    );
}

/// Debian's `chromium` at /usr/bin/chromium; installed with apt-get when running as root.
fn ensure_chromium() {
    support::ensure_debian_package(CHROMIUM, "chromium");
}

/// A font with Chinese glyphs, or the Chinese storefront renders as empty boxes in the
/// screenshot: any that fontconfig lists for `zh`, else Debian's `fonts-droid-fallback` (small,
/// and enough for the pages).
fn ensure_cjk_font() {
    let listed = Command::new("fc-list").arg(":lang=zh").output();
    if listed
        .as_ref()
        .is_ok_and(|o| o.status.success() && !o.stdout.trim_ascii().is_empty())
    {
        return;
    }
    support::ensure_debian_package(
        "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
        "fonts-droid-fallback",
    );
}

/// A running `boxoffice serve --dev-auth`, its files in a temporary directory; killed and
/// cleaned up on drop.
struct Server {
    child: Child,
    base: String,
    dir: PathBuf,
}

impl Server {
    fn start() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "boxoffice-browser-{}",
            uuid::Uuid::now_v7().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        let mut child = Command::new(BIN)
            .arg("serve")
            .arg("--dev-auth")
            .arg("--database-url")
            .arg(format!("sqlite://{}", dir.join("b.db").display()))
            .args(["--listen", "127.0.0.1:0"])
            .arg("--ticket-key")
            .arg(dir.join("ticket-key.pem"))
            .arg("--waitroom-state")
            .arg(dir.join("rooms"))
            // --dev-auth only applies when no secret is configured.
            .env_remove("BOXOFFICE_JWT_SECRET")
            .env_remove("BOXOFFICE_WAITROOM_SECRET")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Built before waiting, so that a failure below still kills the child and removes
        // its directory.
        let mut server = Self {
            child,
            base: String::new(),
            dir,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        // Read lines until the address, then keep draining so the server never blocks on a
        // full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(base) = line.trim().strip_prefix("listening on ") {
                    let _ = tx.send(base.to_owned());
                }
            }
        });
        server.base = rx.recv_timeout(STARTUP_TIMEOUT).unwrap_or_default();
        server
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `GET path` with a bare HTTP/1.1 request; the status code, if any answer came.
fn http_status(base: &str, path: &str) -> Option<u16> {
    let address = base.strip_prefix("http://")?;
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

#[test]
fn storefront_end_to_end_in_headless_chromium() {
    story(
        "storefront.mjs",
        &[
            "seatmap.png",
            "seatmap-phone.png",
            "ticket.png",
            "transfer.png",
            "waitlist.png",
            "reports.png",
        ],
    );
}

/// The door app (issue 19): set up online, installed by its service worker, reloaded and
/// scanning offline (a live code admitted, again a duplicate, a given-away ticket revoked, a
/// forged and an old code refused), two devices syncing, the second's scan reported as a
/// duplicate. The devices' browsers speak German, and the app with them (issue 39).
#[test]
fn door_app_offline_in_headless_chromium() {
    story("door.mjs", &["door.png"]);
}

/// Ticket holders (issue 39): asked per ticket before payment (the server's
/// `HOLDERS_REQUIRED` shown when one is missing), shown and changed on the order page (a
/// change after the event's cutoff refused), by seat and by standing unit, and named by the
/// door app on a scan; the order's PDF tickets downloaded in the page's language (read back
/// with poppler's `pdftotext`) and the wallet buttons.
#[test]
fn ticket_holders_and_delivery_in_headless_chromium() {
    support::ensure_debian_package("/usr/bin/pdftotext", "poppler-utils");
    story("delivery.mjs", &["holders.png"]);
}

/// The storefront in five languages (issue 39): the server's `<html lang>` from
/// Accept-Language and its catalogues, a German browser's sale in German (money and dates the
/// German way), an English browser switching to Chinese in the page (no reload, remembered),
/// a Chinese browser's page in Chinese at once.
#[test]
fn storefront_in_german_and_chinese_in_headless_chromium() {
    ensure_cjk_font();
    story("languages.mjs", &["storefront-de.png", "storefront-zh.png"]);
}

/// Allocations, comps and the box office on the admin page (issue 40): the seats an event
/// keeps back listed, kept and released in the page (a fan refused, then holding the
/// released seat), a comp issued to an account, and a sale in cash whose tickets' QR codes
/// the page shows and whose PDF it opens.
#[test]
fn allocations_and_box_office_in_headless_chromium() {
    story("boxoffice.mjs", &["boxoffice.png"]);
}

/// Sale phases and access codes (issue 40): the operator's phases panel generates codes (a
/// CSV download) and downloads them with uses left; a fan sees the phases and their windows,
/// a wrong code refused, the right one unlocking the presale, and holds a seat in it; the
/// single-use code is used up for the next fan.
#[test]
fn sale_phases_and_access_codes_in_headless_chromium() {
    story("phases.mjs", &["phases.png", "phases-admin.png"]);
}

/// Ticket types, all-in prices and promo codes (issue 40): the type picker before holding,
/// each seat's all-in price and the hold's breakdown, a promo code at checkout, the order's
/// re-priced total to the cent.
#[test]
fn ticket_types_all_in_prices_and_a_promo_code_in_headless_chromium() {
    story("pricing.mjs", &["pricing.png"]);
}

/// Runs `node e2e/<script>` against a fresh `serve --dev-auth`; each of `shots` must be
/// written by the run.
fn story(script: &str, shots: &[&str]) {
    let _heavy = support::heavy();
    let root = workspace();
    let e2e = root.join("e2e");
    ensure_node_modules(&e2e);
    ensure_chromium();

    let server = Server::start();
    assert!(
        !server.base.is_empty(),
        "the server did not print its address within {STARTUP_TIMEOUT:?}:\n{}",
        server.log()
    );
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    while http_status(&server.base, "/healthz") != Some(200) {
        assert!(
            Instant::now() < deadline,
            "{}/healthz did not answer 200:\n{}",
            server.base,
            server.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let screenshots = root.join("docs/screenshots");
    std::fs::create_dir_all(&screenshots).unwrap();
    let started = Instant::now();
    // File times have a coarse resolution on some filesystems: a second's margin.
    let run_started = std::time::SystemTime::now() - Duration::from_secs(1);
    let out = run(
        Command::new("node")
            .arg(script)
            .current_dir(&e2e)
            .env("BASE_URL", &server.base)
            .env("SCREENSHOT_DIR", &screenshots)
            .env("CHROMIUM_PATH", CHROMIUM),
        &format!("node e2e/{script}"),
    );
    assert!(
        out.status.success(),
        "the browser test failed after {:?}\n{}\n--- server log ---\n{}",
        started.elapsed(),
        show(&out),
        server.log()
    );
    println!("{}", String::from_utf8_lossy(&out.stdout));
    // The screenshots are committed (README shows them): each must have been written by this
    // run, not merely be there from an earlier one.
    for shot in shots {
        let meta = std::fs::metadata(screenshots.join(shot))
            .unwrap_or_else(|e| panic!("screenshot {shot}: {e}"));
        let written = meta.modified().expect("a modification time");
        assert!(
            written >= run_started,
            "screenshot {shot} was not written by this run"
        );
        assert!(meta.len() > 1000, "screenshot {shot} is empty");
    }
}
