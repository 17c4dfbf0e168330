//! `boxoffice demo`: the embedded store under a data folder, a 50,000-seat stadium (10
//! sections x 50 rows x 100 seats) plus a general-admission floor, dev auth, and a printed
//! guide with ready-made tokens.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;
use boxoffice_domain::event::{EventSpec, Section, Tier, WaitingRoomSettings};
use boxoffice_domain::idempotency::{IdempotencyScope, StoredResponse, request_digest};
use boxoffice_domain::ids::AccountId;
use boxoffice_server::auth::{DEV_JWT_SECRET, mint_token};

use crate::cmd::serve;

/// The demo fan's address (its token's `email` claim).
const DEMO_FAN_EMAIL: &str = "fan@demo.boxoffice.invalid";
/// Account that owns the demo event's creation record.
const DEMO_ADMIN: &str = "demo-admin";
/// Account whose token the demo prints for trying holds.
const DEMO_FAN: &str = "demo-fan";
/// Demo tokens last a day.
const DEMO_TOKEN_TTL_S: u64 = 86_400;

fn stadium(now: time::OffsetDateTime) -> EventSpec {
    EventSpec {
        name: "Demo Stadium Night".into(),
        starts_at: now + time::Duration::days(30),
        on_sale_at: None,
        currency: "EUR".into(),
        hold_ttl_s: 300,
        payment_grace_s: 120,
        max_seats_per_hold: 6,
        max_tickets_per_account: 6,
        exchange_cutoff_s: 3600,
        transfer_cutoff_s: 0,
        waitlist_offer_ttl_s: 600,
        refund_policy: None,
        holder_policy: None,
        sale: Default::default(),
        chart: None,
        waiting_room: WaitingRoomSettings::default(),
        sections: ('A'..='J')
            .enumerate()
            .map(|(i, name)| Section {
                name: name.to_string(),
                rows: 50,
                seats_per_row: 100,
                price_minor: 12_900 - 1_000 * i as i64,
                row_lengths: Vec::new(),
            })
            .collect(),
        tiers: vec![Tier {
            tier_id: "FLOOR".into(),
            name: "Floor standing".into(),
            capacity: 5_000,
            price_minor: 5_900,
        }],
    }
}

pub async fn run(data_dir: &Path, listen: SocketAddr) -> anyhow::Result<()> {
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let url = format!("sqlite://{}", data_dir.join("boxoffice.db").display());
    let store = crate::stores::open_store(&url).await?;
    store.migrate().await?;
    let secret =
        std::env::var("BOXOFFICE_JWT_SECRET").unwrap_or_else(|_| DEV_JWT_SECRET.to_owned());

    // Created once: the same idempotency key replays the first creation on later runs.
    let spec = stadium(store.now().await?);
    let scope = IdempotencyScope {
        account_id: DEMO_ADMIN.into(),
        endpoint: "POST /v1/admin/events".into(),
        key: "demo-stadium".into(),
    };
    let digest = request_digest("POST", "demo", &serde_json::json!({"demo": "stadium"}));
    let event_id = uuid::Uuid::now_v7().to_string();
    let render = |event: &boxoffice_store::EventRecord| StoredResponse {
        status: 201,
        body: event.event_id.clone().into_bytes(),
    };
    eprintln!(
        "preparing the demo stadium (50,000 seats) in {} ...",
        data_dir.display()
    );
    let answer = store
        .create_event(&scope, &digest, &event_id, &spec, &render)
        .await?;
    let event_id = match answer {
        boxoffice_domain::idempotency::Idempotent::Fresh(r)
        | boxoffice_domain::idempotency::Idempotent::Replayed(r) => {
            String::from_utf8(r.body).context("demo event id")?
        }
        boxoffice_domain::idempotency::Idempotent::KeyReusedWithOtherRequest => {
            anyhow::bail!(
                "the demo data folder holds another demo; remove {} and retry",
                data_dir.display()
            )
        }
    };

    // The fan's token carries an address: the demo's mail (data folder's mail/) goes there.
    let fan = boxoffice_server::auth::mint_token_with_email(
        &secret,
        &AccountId::parse(DEMO_FAN)?,
        false,
        DEMO_TOKEN_TTL_S,
        Some(DEMO_FAN_EMAIL),
    )
    .map_err(anyhow::Error::msg)?;
    let admin = mint_token(
        &secret,
        &AccountId::parse(DEMO_ADMIN)?,
        true,
        DEMO_TOKEN_TTL_S,
    )
    .map_err(anyhow::Error::msg)?;
    let base = format!("http://{listen}");
    println!(
        "\nboxoffice demo — embedded SQLite at {url}\n\n\
         Storefront {base}/   (sign in with any account name)\n\
         Admin      {base}/admin\n\
         API        {base}/v1/events\n\
         OpenAPI    {base}/openapi.json\n\
         Metrics    {base}/metrics\n\n\
         Demo event {event_id} (sections A-J, 50 rows x 100 seats, tier FLOOR)\n\n\
         Fan token (account {DEMO_FAN}, 24 h):\n  export TOKEN={fan}\n\
         Admin token (account {DEMO_ADMIN}, 24 h):\n  export ADMIN_TOKEN={admin}\n\n\
         Try:\n  curl -s -H \"Authorization: Bearer $TOKEN\" {base}/v1/events/{event_id}\n  \
         curl -s -X POST -H \"Authorization: Bearer $TOKEN\" -H 'Idempotency-Key: try-1' \\\n       \
         -H 'Content-Type: application/json' -d '{{\"seatIds\":[\"A-1-1\",\"A-1-2\"]}}' \\\n       \
         {base}/v1/events/{event_id}/holds\n"
    );
    let payments = serve::PaymentsArgs {
        payments: "sim".into(),
        stripe_api_base: String::new(),
        stripe_secret_key: None,
        stripe_webhook_secret: None,
        sim_auth_latency_ms: (0, 0),
        sim_refund_latency_ms: (0, 0),
    };
    println!(
        "wallet passes: signed with a self-signed certificate and a stand-in Google key in {}\n  \
         (GET /v1/orders/ORDER/tickets.pdf, /v1/tickets/TICKET/wallet/apple, /v1/tickets/TICKET/wallet/google)",
        data_dir.join("wallet").display()
    );
    println!(
        "payments: the built-in simulator (cards pm_card_visa, pm_card_chargeDeclined, pm_card_threeDSecure2Required)"
    );
    serve::serve_with(
        store,
        serve::SideStores {
            limits: serve::limits_of(&serve::limits_from_env())?,
            // Mail to a folder the admin page lists: nothing to install.
            mail: Some(
                boxoffice_workers::mail::MailConfig::folder(
                    data_dir.join("mail"),
                    boxoffice_workers::mail::DEFAULT_MAIL_FROM,
                )
                .map_err(anyhow::Error::msg)?,
            ),
            wallet: crate::cmd::wallet::WalletArgs::demo(data_dir)?.config(&[])?,
            ..serve::SideStores::default()
        },
        secret,
        listen,
        &payments,
        &data_dir.join("ticket-key.pem"),
        &serve::WaitroomArgs {
            waitroom_state: data_dir.join("waitroom").display().to_string(),
            waitroom_secret: None,
        },
    )
    .await
}

#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    #[arg(long, default_value = "./data")]
    data_dir: std::path::PathBuf,
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
}

impl DemoArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        run(&self.data_dir, self.listen).await
    }
}
