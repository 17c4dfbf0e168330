//! `boxoffice token`: a signed account token.

use anyhow::{Context, bail};
use boxoffice_domain::ids::AccountId;
use boxoffice_server::auth::{DEV_JWT_SECRET, mint_token_with_email};

#[derive(Debug, clap::Args)]
pub(crate) struct TokenArgs {
    #[arg(long)]
    account: String,
    /// Mark the token as an operator's (`role: "admin"`).
    #[arg(long)]
    admin: bool,
    /// Lifetime: `90s`, `30m`, `1h`, `7d`.
    #[arg(long, default_value = "1h")]
    ttl: String,
    /// The account's address (the token's `email` claim): mail goes there unless the fan set
    /// another with `PUT /v1/me`.
    #[arg(long)]
    email: Option<String>,
    /// Defaults to the development secret when unset.
    #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
    jwt_secret: Option<String>,
}

impl TokenArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            account,
            admin,
            ttl,
            email,
            jwt_secret,
        } = self;
        if let Some(email) = &email
            && !boxoffice_store::mail::email_is_valid(email)
        {
            bail!("--email {email:?} is not an address");
        }
        let account = AccountId::parse(&account).map_err(|e| anyhow::anyhow!("--account: {e}"))?;
        let secret = jwt_secret.unwrap_or_else(|| {
            eprintln!("note: BOXOFFICE_JWT_SECRET is not set; signing with the development secret");
            DEV_JWT_SECRET.to_owned()
        });
        let token = mint_token_with_email(
            &secret,
            &account,
            admin,
            parse_ttl_s(&ttl)?,
            email.as_deref(),
        )
        .map_err(anyhow::Error::msg)?;
        println!("{token}");
        Ok(())
    }
}

/// Parses `90s`, `30m`, `1h`, `7d` (or bare seconds) into seconds.
fn parse_ttl_s(raw: &str) -> anyhow::Result<u64> {
    let raw = raw.trim();
    let (digits, unit_s) = match raw.char_indices().last() {
        Some((i, 's')) => (&raw[..i], 1),
        Some((i, 'm')) => (&raw[..i], 60),
        Some((i, 'h')) => (&raw[..i], 3600),
        Some((i, 'd')) => (&raw[..i], 86_400),
        _ => (raw, 1),
    };
    let n: u64 = digits
        .parse()
        .with_context(|| format!("bad ttl {raw:?}: use 90s, 30m, 1h or 7d"))?;
    let ttl_s = n.checked_mul(unit_s).context("ttl too large")?;
    if ttl_s == 0 || ttl_s > 366 * 86_400 {
        bail!("ttl must be between 1s and 366d");
    }
    Ok(ttl_s)
}

#[cfg(test)]
mod tests {
    use super::parse_ttl_s;

    #[test]
    fn ttls() {
        assert_eq!(parse_ttl_s("90s").unwrap(), 90);
        assert_eq!(parse_ttl_s("30m").unwrap(), 1800);
        assert_eq!(parse_ttl_s("1h").unwrap(), 3600);
        assert_eq!(parse_ttl_s("7d").unwrap(), 604_800);
        assert_eq!(parse_ttl_s("45").unwrap(), 45);
        for bad in ["", "h", "0s", "-1h", "1y", "99999999999999999999d"] {
            assert!(parse_ttl_s(bad).is_err(), "{bad}");
        }
    }
}
