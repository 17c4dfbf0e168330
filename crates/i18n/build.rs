//! Compiles every catalogue under `locales/<locale>/<file>.ftl` into the binary: writes
//! `catalogues.rs`, a list of (locale, file, text) with `include_str!` of each file, so that a
//! new file needs no code.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    // Read when the script runs, not baked in when it was compiled: a target directory copied
    // from another checkout keeps its compiled build script, which must read this checkout's
    // catalogues.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest_dir).join("locales");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut entries = Vec::new();
    for locale in std::fs::read_dir(&root).expect("locales/ is readable") {
        let locale = locale.expect("a locale folder");
        println!("cargo:rerun-if-changed={}", locale.path().display());
        for file in std::fs::read_dir(locale.path()).expect("a locale folder is readable") {
            let path = file.expect("a catalogue").path();
            if path.extension().is_some_and(|ext| ext == "ftl") {
                let locale = locale.file_name().to_string_lossy().into_owned();
                let file = path
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                // Relative to the crate, so that a target folder copied from another checkout
                // still reads this checkout's catalogues.
                let relative = format!("/locales/{locale}/{file}.ftl");
                entries.push((locale, file, relative));
            }
        }
    }
    entries.sort();
    let mut out = String::from("pub(crate) static CATALOGUES: &[(&str, &str, &str)] = &[\n");
    for (locale, file, path) in entries {
        writeln!(
            out,
            "    ({locale:?}, {file:?}, include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), {path:?}))),"
        )
        .unwrap();
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("catalogues.rs");
    std::fs::write(dest, out).expect("OUT_DIR is writable");
}
