//! Reading the documents back with the tools a fan's devices stand for: poppler's `pdftotext`
//! and `pdftoppm`, zbar's `zbarimg`, `openssl` and `unzip`. Tests only (feature `readback`):
//! this crate's own tests and the server's story tests use it, so both judge a PDF or a pass
//! the same way. A missing tool is installed with apt-get when running as root; otherwise the
//! call panics saying what to install (a test never skips).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh temporary folder, removed when dropped.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    pub fn new(label: &str) -> Self {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "boxoffice-delivery-{label}-{}-{n}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&path).expect("a temporary folder");
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.path.join(name);
        std::fs::write(&path, bytes).expect("writable temporary folder");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Runs `command`, panicking with its output when it fails.
pub fn run(command: &mut Command, what: &str) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|error| panic!("{what}: could not start it: {error}"));
    assert!(out.status.success(), "{what} failed:\n{}", show(&out));
    out
}

fn show(out: &Output) -> String {
    format!(
        "exit: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Installs Debian's `package` when `path` is missing (as root; otherwise panics saying what
/// to install). One install at a time: two tests installing at once fail on dpkg's lock.
pub fn ensure_debian_package(path: &str, package: &str) {
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    if Path::new(path).exists() {
        return;
    }
    let uid = run(Command::new("id").arg("-u"), "id -u");
    assert!(
        String::from_utf8_lossy(&uid.stdout).trim() == "0",
        "install Debian's {package}: sudo apt-get install -y {package}"
    );
    eprintln!("installing Debian's {package} (apt-get install -y {package})");
    let install = || {
        Command::new("apt-get")
            .args([
                "-o",
                "DPkg::Lock::Timeout=600",
                "install",
                "-y",
                "-q",
                package,
            ])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .expect("apt-get starts")
    };
    let mut out = install();
    if !out.status.success() {
        run(
            Command::new("apt-get").args(["-o", "DPkg::Lock::Timeout=600", "update"]),
            "apt-get update",
        );
        out = install();
    }
    assert!(
        out.status.success() && Path::new(path).exists(),
        "apt-get install -y {package} failed:\n{}",
        show(&out)
    );
}

/// The text of `pdf`, page after page (`pdftotext -layout`; pages split by form feeds).
pub fn pdf_text(pdf: &[u8]) -> String {
    ensure_debian_package("/usr/bin/pdftotext", "poppler-utils");
    let scratch = Scratch::new("text");
    let input = scratch.write("in.pdf", pdf);
    let out = run(
        Command::new("pdftotext")
            .args(["-enc", "UTF-8", "-layout"])
            .arg(&input)
            .arg("-"),
        "pdftotext",
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The QR codes printed on each page of `pdf`, in page order: the page rendered at 150 dpi
/// (`pdftoppm -r 150 -png`) and read by `zbarimg --raw`. A page without a code gives an
/// empty list.
pub fn pdf_qr_codes(pdf: &[u8]) -> Vec<Vec<String>> {
    ensure_debian_package("/usr/bin/pdftoppm", "poppler-utils");
    ensure_debian_package("/usr/bin/zbarimg", "zbar-tools");
    let scratch = Scratch::new("qr");
    let input = scratch.write("in.pdf", pdf);
    run(
        Command::new("pdftoppm")
            .args(["-r", "150", "-png"])
            .arg(&input)
            .arg(scratch.path().join("page")),
        "pdftoppm",
    );
    let mut pages: Vec<PathBuf> = std::fs::read_dir(scratch.path())
        .expect("readable")
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "png"))
        .collect();
    // page-1.png … page-10.png: sort by number, not by name.
    pages.sort_by_key(|path| {
        path.file_stem()
            .and_then(|stem| stem.to_str())
            .and_then(|stem| stem.rsplit('-').next())
            .and_then(|number| number.parse::<u32>().ok())
            .unwrap_or(u32::MAX)
    });
    pages
        .iter()
        .map(|page| {
            let out = Command::new("zbarimg")
                .args(["--raw", "-q", "-Sdisable", "-Sqrcode.enable"])
                .arg(page)
                .output()
                .expect("zbarimg starts");
            // zbarimg exits 4 when the image has no symbol.
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|line| !line.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

/// What a `.pkpass` holds once checked: its `pass.json` and the names of its files.
#[derive(Debug)]
pub struct CheckedPass {
    pub pass_json: serde_json::Value,
    pub files: Vec<String>,
}

/// Unpacks `pkpass` (Python's `zipfile`, another zip reader than the one that wrote it),
/// checks that `manifest.json` lists every other file with its SHA-1 (`sha1sum`) and that
/// `signature` is a detached PKCS #7 signature of the manifest by `certificate_pem`
/// (`openssl smime -verify -binary -inform DER … -CAfile cert.pem -purpose any`). Panics
/// saying what failed.
pub fn check_pkpass(pkpass: &[u8], certificate_pem: &str) -> CheckedPass {
    ensure_debian_package("/usr/bin/openssl", "openssl");
    let scratch = Scratch::new("pkpass");
    let archive = scratch.write("pass.pkpass", pkpass);
    let unpacked = scratch.path().join("unpacked");
    run(
        Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(&archive)
            .arg(&unpacked),
        "python3 -m zipfile -e",
    );
    let mut files: Vec<String> = std::fs::read_dir(&unpacked)
        .expect("unpacked")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let manifest: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(
        &std::fs::read(unpacked.join("manifest.json")).expect("manifest.json in the pass"),
    )
    .expect("manifest.json is a JSON object");
    let listed: Vec<&String> = manifest.keys().collect();
    let expected: Vec<&String> = files
        .iter()
        .filter(|name| *name != "manifest.json" && *name != "signature")
        .collect();
    assert_eq!(listed, expected, "the manifest lists every other file");
    for (name, hash) in &manifest {
        let out = run(Command::new("sha1sum").arg(unpacked.join(name)), "sha1sum");
        let sum = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            Some(sum.split_whitespace().next().unwrap_or_default()),
            hash.as_str(),
            "{name}'s SHA-1"
        );
    }
    let ca = scratch.write("cert.pem", certificate_pem.as_bytes());
    run(
        Command::new("openssl")
            .args(["smime", "-verify", "-binary", "-inform", "DER", "-in"])
            .arg(unpacked.join("signature"))
            .arg("-content")
            .arg(unpacked.join("manifest.json"))
            .arg("-CAfile")
            .arg(&ca)
            .args(["-purpose", "any", "-out", "/dev/null"]),
        "openssl smime -verify",
    );
    let pass_json = serde_json::from_slice(
        &std::fs::read(unpacked.join("pass.json")).expect("pass.json in the pass"),
    )
    .expect("pass.json is JSON");
    CheckedPass { pass_json, files }
}

/// True when `openssl smime -verify` accepts `pkpass`'s signature against `certificate_pem`
/// (for checking that another certificate is refused).
pub fn pkpass_verifies_with(pkpass: &[u8], certificate_pem: &str) -> bool {
    let scratch = Scratch::new("pkpass-other");
    let archive = scratch.write("pass.pkpass", pkpass);
    let unpacked = scratch.path().join("unpacked");
    run(
        Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(&archive)
            .arg(&unpacked),
        "python3 -m zipfile -e",
    );
    let ca = scratch.write("cert.pem", certificate_pem.as_bytes());
    Command::new("openssl")
        .args(["smime", "-verify", "-binary", "-inform", "DER", "-in"])
        .arg(unpacked.join("signature"))
        .arg("-content")
        .arg(unpacked.join("manifest.json"))
        .arg("-CAfile")
        .arg(&ca)
        .args(["-purpose", "any", "-out", "/dev/null"])
        .output()
        .expect("openssl starts")
        .status
        .success()
}

/// The SMTP handler of [`SmtpServer`]: stores each accepted message as `<n>.eml` in its
/// folder; `mode` says what it answers to DATA: `accept`, `451-once` (451 to the first
/// message, then 250) or `550` (refuses every message for good).
const SMTP_HANDLER: &str = r#"
import os, itertools

class Storing:
    def __init__(self, folder, mode="accept"):
        self.folder = folder
        self.mode = mode
        self.seen = itertools.count()

    @classmethod
    def from_cli(cls, parser, *args):
        return cls(*args)

    async def handle_DATA(self, server, session, envelope):
        n = next(self.seen)
        if self.mode == "550":
            return "550 5.7.1 mailbox unavailable for this test"
        if self.mode == "451-once" and n == 0:
            return "451 4.3.0 try again later"
        path = os.path.join(self.folder, "%d.eml" % n)
        with open(path + ".part", "wb") as f:
            f.write(envelope.original_content or envelope.content)
        os.rename(path + ".part", path)
        return "250 OK stored"
"#;

/// Installs aiosmtpd 1.4.6 with pip when Python cannot import it.
fn ensure_aiosmtpd() {
    let present = Command::new("python3")
        .args(["-c", "import aiosmtpd"])
        .status()
        .is_ok_and(|s| s.success());
    if present {
        return;
    }
    let installed = Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--break-system-packages"])
        .arg("aiosmtpd==1.4.6")
        .status()
        .is_ok_and(|s| s.success());
    assert!(installed, "pip install aiosmtpd==1.4.6 failed");
}

/// A real SMTP server (Python's aiosmtpd) on a free port that stores what it accepts, for
/// the mail tests of the server and of the binary; stopped when dropped.
#[derive(Debug)]
pub struct SmtpServer {
    child: std::process::Child,
    url: String,
    received: PathBuf,
    _scratch: Scratch,
}

impl SmtpServer {
    /// Starts one answering DATA as `mode` says (see [`SMTP_HANDLER`]).
    pub fn start(mode: &str) -> Self {
        ensure_aiosmtpd();
        let scratch = Scratch::new("smtp");
        let received = scratch.path().join("received");
        std::fs::create_dir_all(&received).expect("a temporary folder");
        scratch.write("storing.py", SMTP_HANDLER.as_bytes());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("python3")
            .args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}")])
            .args(["-c", "storing.Storing"])
            .arg(&received)
            .arg(mode)
            .env("PYTHONPATH", scratch.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 -m aiosmtpd");
        // Owned at once: a server that never listens is stopped by the drop of the panic.
        let server = Self {
            child,
            url: format!("smtp://127.0.0.1:{port}"),
            received,
            _scratch: scratch,
        };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("aiosmtpd never listened on {port}");
    }

    /// `smtp://127.0.0.1:<port>`, for `--smtp-url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The messages the server accepted, in order.
    pub fn received(&self) -> Vec<Vec<u8>> {
        let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(&self.received)
            .expect("the server's folder")
            .map(|e| e.expect("an entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "eml"))
            .map(|p| {
                let n = p
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(u64::MAX);
                (n, p)
            })
            .collect();
        files.sort();
        files
            .iter()
            .map(|(_, p)| std::fs::read(p).expect("a stored message"))
            .collect()
    }
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
