//! The wallet keys of `serve` (flags, read at start: a bad file stops the server with the
//! reason) and the demo's own, made in its data folder on first run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use boxoffice_delivery::apple::{ApplePassSigner, self_signed_pass_certificate};
use boxoffice_delivery::google::{GoogleWalletIssuer, generate_service_account_key};
use boxoffice_server::WalletConfig;

/// Largest key or certificate file read, in bytes.
const KEY_FILE_LEN_MAX: u64 = 64 * 1024;
/// The demo's pass type, team and Google issuer: stand-ins that Apple and Google would not
/// accept, enough to make and check passes locally.
const DEMO_PASS_TYPE_ID: &str = "pass.dev.boxoffice.demo";
const DEMO_TEAM_ID: &str = "DEMO000000";
const DEMO_ISSUER_ID: &str = "3388000000000000000";
const DEMO_SERVICE_ACCOUNT: &str = "wallet@boxoffice-demo.iam.gserviceaccount.com";
const DEMO_ORGANIZATION: &str = "boxoffice demo";

/// Apple Wallet: the pass type certificate (from the Apple developer account), its key and
/// Apple's WWDR intermediate certificate; Google Wallet: the service-account key file and the
/// issuer id. Each wallet is off until all its required flags are given.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct WalletArgs {
    /// The Apple pass type certificate, PEM.
    #[arg(long, env = "BOXOFFICE_PASS_CERT")]
    pub(crate) pass_cert: Option<PathBuf>,
    /// The pass certificate's private key, PEM (unencrypted).
    #[arg(long, env = "BOXOFFICE_PASS_KEY")]
    pub(crate) pass_key: Option<PathBuf>,
    /// Apple's WWDR intermediate certificate, PEM, sent inside every pass signature.
    #[arg(long, env = "BOXOFFICE_PASS_WWDR_CERT")]
    pub(crate) pass_wwdr_cert: Option<PathBuf>,
    /// The pass type identifier (`pass.com.example.tickets`), as in the certificate.
    #[arg(long, env = "BOXOFFICE_PASS_TYPE_ID")]
    pub(crate) pass_type_id: Option<String>,
    /// The Apple developer team identifier.
    #[arg(long, env = "BOXOFFICE_PASS_TEAM_ID")]
    pub(crate) pass_team_id: Option<String>,
    /// The organisation named on passes (Apple's `organizationName`, Google's issuer name).
    #[arg(long, env = "BOXOFFICE_PASS_ORGANIZATION", default_value = "boxoffice")]
    pub(crate) pass_organization: String,
    /// The Google service-account key file (JSON) that signs "Save to Google Wallet" links.
    #[arg(long, env = "BOXOFFICE_GOOGLE_WALLET_KEY")]
    pub(crate) google_wallet_key: Option<PathBuf>,
    /// The Google Wallet issuer id (digits, from the Google Pay & Wallet console).
    #[arg(long, env = "BOXOFFICE_GOOGLE_WALLET_ISSUER_ID")]
    pub(crate) google_wallet_issuer_id: Option<String>,
}

fn read(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    let length = std::fs::metadata(path)
        .with_context(|| format!("reading the {what} {}", path.display()))?
        .len();
    if length > KEY_FILE_LEN_MAX {
        bail!(
            "the {what} {} is larger than {KEY_FILE_LEN_MAX} bytes",
            path.display()
        );
    }
    std::fs::read(path).with_context(|| format!("reading the {what} {}", path.display()))
}

impl WalletArgs {
    /// The signers these flags configure. A wallet given only in part is an error naming
    /// what is missing, never a wallet silently off.
    pub(crate) fn config(&self, origins: &[String]) -> anyhow::Result<WalletConfig> {
        let apple = match (
            &self.pass_cert,
            &self.pass_key,
            &self.pass_type_id,
            &self.pass_team_id,
        ) {
            (None, None, None, None) if self.pass_wwdr_cert.is_none() => None,
            (Some(cert), Some(key), Some(type_id), Some(team_id)) => {
                let wwdr = self
                    .pass_wwdr_cert
                    .as_deref()
                    .map(|path| read(path, "WWDR certificate"))
                    .transpose()?;
                let signer = ApplePassSigner::from_pem(
                    type_id,
                    team_id,
                    &self.pass_organization,
                    &read(cert, "pass certificate")?,
                    &read(key, "pass key")?,
                    wwdr.as_deref(),
                )
                .context("the Apple Wallet pass certificate")?;
                Some(Arc::new(signer))
            }
            _ => bail!(
                "Apple Wallet needs --pass-cert, --pass-key, --pass-type-id and --pass-team-id \
                 together (and optionally --pass-wwdr-cert)"
            ),
        };
        let google = match (&self.google_wallet_key, &self.google_wallet_issuer_id) {
            (None, None) => None,
            (Some(key), Some(issuer_id)) => {
                let issuer = GoogleWalletIssuer::from_key_json(
                    issuer_id,
                    &self.pass_organization,
                    &read(key, "Google Wallet key")?,
                    origins.to_vec(),
                )
                .context("the Google Wallet key")?;
                Some(Arc::new(issuer))
            }
            _ => bail!(
                "Google Wallet needs --google-wallet-key and --google-wallet-issuer-id together"
            ),
        };
        Ok(WalletConfig { apple, google })
    }

    /// The demo's wallet: a self-signed pass certificate and a Google-like service-account
    /// key under `data_dir/wallet/`, made on first run and reused after.
    pub(crate) fn demo(data_dir: &Path) -> anyhow::Result<Self> {
        let folder = data_dir.join("wallet");
        std::fs::create_dir_all(&folder)
            .with_context(|| format!("creating {}", folder.display()))?;
        let cert = folder.join("pass-cert.pem");
        let key = folder.join("pass-key.pem");
        if !cert.exists() || !key.exists() {
            let made =
                self_signed_pass_certificate(DEMO_PASS_TYPE_ID, DEMO_TEAM_ID, DEMO_ORGANIZATION)?;
            write_private(&key, made.key_pem.as_bytes())?;
            std::fs::write(&cert, made.certificate_pem)
                .with_context(|| format!("writing {}", cert.display()))?;
        }
        let google = folder.join("google-wallet-key.json");
        if !google.exists() {
            write_private(
                &google,
                generate_service_account_key(DEMO_SERVICE_ACCOUNT)?.as_bytes(),
            )?;
        }
        Ok(Self {
            pass_cert: Some(cert),
            pass_key: Some(key),
            pass_wwdr_cert: None,
            pass_type_id: Some(DEMO_PASS_TYPE_ID.into()),
            pass_team_id: Some(DEMO_TEAM_ID.into()),
            pass_organization: DEMO_ORGANIZATION.into(),
            google_wallet_key: Some(google),
            google_wallet_issuer_id: Some(DEMO_ISSUER_ID.into()),
        })
    }
}

/// Writes a private key readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wallet_given_in_part_is_refused() {
        let args = WalletArgs {
            pass_cert: Some("cert.pem".into()),
            ..WalletArgs::default()
        };
        let refused = args.config(&[]).unwrap_err().to_string();
        assert!(refused.contains("--pass-key"), "{refused}");
        let args = WalletArgs {
            google_wallet_issuer_id: Some("123".into()),
            ..WalletArgs::default()
        };
        let refused = args.config(&[]).unwrap_err().to_string();
        assert!(refused.contains("--google-wallet-key"), "{refused}");
        let none = WalletArgs::default().config(&[]).unwrap();
        assert!(none.apple.is_none() && none.google.is_none());
    }

    #[test]
    fn the_demo_makes_its_keys_once_and_they_load() {
        let folder = std::env::temp_dir().join(format!(
            "boxoffice-demo-wallet-{}",
            uuid::Uuid::now_v7().simple()
        ));
        let first = WalletArgs::demo(&folder).unwrap();
        let config = first.config(&[]).unwrap();
        assert!(config.apple.is_some() && config.google.is_some());
        let cert = std::fs::read(folder.join("wallet/pass-cert.pem")).unwrap();
        WalletArgs::demo(&folder).unwrap();
        assert_eq!(
            std::fs::read(folder.join("wallet/pass-cert.pem")).unwrap(),
            cert,
            "kept, not made again"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(folder.join("wallet/pass-key.pem"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "the key is the owner's only");
        }
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
