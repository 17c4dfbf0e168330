//! `boxoffice openapi`: the OpenAPI document the server serves, on stdout.

use anyhow::Context;

/// Prints the document.
pub(crate) fn run() -> anyhow::Result<()> {
    use std::io::Write as _;
    let document = boxoffice_server::openapi()
        .to_pretty_json()
        .context("rendering the OpenAPI document")?;
    // A reader that stops early (`| head`) is not an error.
    match writeln!(std::io::stdout().lock(), "{document}") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
