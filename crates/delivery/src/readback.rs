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
