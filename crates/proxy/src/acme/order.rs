//! One ACME order with `instant-acme`: the account (created once and kept
//! in the storage folder), then new order → one challenge per name
//! answered ([`super::challenge`]) → ready → finalize (a new P-256 key and
//! its CSR) → the certificate chain.

use std::time::Duration;

use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, ChallengeType, Identifier, NewAccount,
    NewOrder, OrderStatus, RetryPolicy,
};

use super::challenge::Challenges;
use super::store::{write_private, Store};
use crate::config::acme::{Acme as Settings, ChallengeKind};

/// A certificate as issued: the chain, then the private key, both PEM.
pub struct Issued {
    pub chain_pem: String,
    pub key_pem: String,
}

/// How long an order may wait for the server's validation, then for the
/// certificate.
const POLL: RetryPolicy = RetryPolicy::new()
    .initial_delay(Duration::from_millis(250))
    .backoff(1.5)
    .timeout(Duration::from_secs(60));

fn builder(settings: &Settings) -> Result<instant_acme::AccountBuilder, String> {
    match &settings.ca_root {
        Some(root) => Account::builder_with_root(root)
            .map_err(|e| format!("ACME server root {}: {e}", root.display())),
        None => Account::builder().map_err(|e| format!("system roots: {e}")),
    }
}

/// The account: from `account.json`, else created at the server and saved
/// there (the caller holds the `account` lock, so proxies sharing the
/// folder create one).
pub async fn account(settings: &Settings, store: &Store) -> Result<Account, String> {
    let path = store.account();
    if let Ok(text) = std::fs::read_to_string(&path) {
        let credentials: AccountCredentials = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not ACME account credentials: {e}", path.display()))?;
        return builder(settings)?
            .from_credentials(credentials)
            .await
            .map_err(|e| format!("ACME server {}: {e}", settings.directory));
    }
    let contact: Vec<&str> = settings.contact.iter().map(String::as_str).collect();
    let (account, credentials) = builder(settings)?
        .create(
            &NewAccount {
                contact: &contact,
                terms_of_service_agreed: true,
                only_return_existing: false,
            },
            settings.directory.clone(),
            None,
        )
        .await
        .map_err(|e| {
            format!(
                "cannot create the ACME account at {}: {e}",
                settings.directory
            )
        })?;
    let json = serde_json::to_vec_pretty(&credentials).map_err(|e| e.to_string())?;
    write_private(&path, &json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    tracing::info!(directory = %settings.directory, account = %account.id(), "ACME account created");
    Ok(account)
}

/// Orders a certificate for `names`, answering with `kind`. The answers
/// published for the order are withdrawn whatever the outcome.
pub async fn issue(
    account: &Account,
    names: &[String],
    kind: ChallengeKind,
    challenges: &Challenges,
) -> Result<Issued, String> {
    let mut tokens = Vec::new();
    let result = run(account, names, kind, challenges, &mut tokens).await;
    challenges.remove(&tokens, names);
    result
}

async fn run(
    account: &Account,
    names: &[String],
    kind: ChallengeKind,
    challenges: &Challenges,
    tokens: &mut Vec<String>,
) -> Result<Issued, String> {
    let identifiers: Vec<Identifier> = names.iter().cloned().map(Identifier::Dns).collect();
    let mut order = account
        .new_order(&NewOrder::new(&identifiers))
        .await
        .map_err(|e| format!("new order: {e}"))?;
    let wanted = match kind {
        ChallengeKind::Http01 => ChallengeType::Http01,
        ChallengeKind::TlsAlpn01 => ChallengeType::TlsAlpn01,
    };
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let mut authz = authz.map_err(|e| format!("authorization: {e}"))?;
        match authz.status {
            AuthorizationStatus::Pending => {}
            AuthorizationStatus::Valid => continue,
            other => {
                return Err(format!(
                    "authorization for {} is {other:?}",
                    authz.identifier()
                ))
            }
        }
        let name = authz.identifier().to_string();
        let mut challenge = authz.challenge(wanted.clone()).ok_or_else(|| {
            format!(
                "the server offers no {} challenge for {name}",
                kind.as_str()
            )
        })?;
        let key_authorization = challenge.key_authorization();
        match kind {
            ChallengeKind::Http01 => {
                tokens.push(challenge.token.clone());
                challenges
                    .put_http(&challenge.token, key_authorization.as_str())
                    .map_err(|e| format!("cannot publish the http-01 answer: {e}"))?;
            }
            ChallengeKind::TlsAlpn01 => challenges
                .put_alpn(&name, key_authorization.digest().as_ref())
                .map_err(|e| format!("cannot make the tls-alpn-01 certificate: {e}"))?,
        }
        challenge
            .set_ready()
            .await
            .map_err(|e| format!("challenge for {name}: {e}"))?;
    }
    let status = order.poll_ready(&POLL).await.map_err(|e| match e {
        instant_acme::Error::Api(p) => format!("order refused: {p}"),
        e => format!("waiting for validation: {e}"),
    })?;
    if status != OrderStatus::Ready {
        return Err(refusal(&mut order, status).await);
    }
    let key_pem = order
        .finalize()
        .await
        .map_err(|e| format!("finalize: {e}"))?;
    let chain_pem = order
        .poll_certificate(&POLL)
        .await
        .map_err(|e| format!("certificate: {e}"))?;
    Ok(Issued { chain_pem, key_pem })
}

/// Why the server did not validate the order: the order's problem, else
/// the first failed challenge's.
async fn refusal(order: &mut instant_acme::Order, status: OrderStatus) -> String {
    if let Some(p) = &order.state().error {
        return format!("order refused ({status:?}): {p}");
    }
    let mut authorizations = order.authorizations();
    while let Some(Ok(mut authz)) = authorizations.next().await {
        if authz.refresh().await.is_err() {
            continue;
        }
        let name = authz.identifier().to_string();
        for c in &authz.challenges {
            if let Some(p) = &c.error {
                return format!("order refused ({status:?}): {name}: {p}");
            }
        }
    }
    format!("order refused ({status:?})")
}
