//! The renewal loop: every `check_interval` (or when woken) each managed
//! certificate is re-read from the storage folder and, when due, ordered
//! under the folder's lock. Due: none yet, past its `renew_at`, or forced
//! by `acme renew`; never before `retry_at`, the backoff after a failure
//! (`retry_min` doubled per failure in a row, at most `retry_max`), unless
//! forced. While another proxy holds the lock this one waits and picks up
//! its certificate from the folder.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::{order, Acme};

/// Runs until `shutdown` turns true.
pub async fn run(acme: Arc<Acme>, mut shutdown: watch::Receiver<bool>) {
    let mut account = None;
    loop {
        for id in acme.ids() {
            acme.reload(&id);
            if due(&acme, &id, SystemTime::now()) {
                attempt(&acme, &id, &mut account).await;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(acme.settings.check_interval) => {}
            _ = acme.wake.notified() => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
    }
}

fn due(acme: &Acme, id: &str, now: SystemTime) -> bool {
    acme.with(id, |m| {
        let s = &m.state;
        if s.forced {
            return true;
        }
        if s.retry_at.is_some_and(|t| now < t) {
            return false;
        }
        s.renew_at.is_none_or(|t| now >= t)
    })
    .unwrap_or(false)
}

/// The wait after `failures` failed orders in a row.
pub fn backoff(failures: u32, min: Duration, max: Duration) -> Duration {
    let doubled = min.saturating_mul(1u32 << failures.saturating_sub(1).min(30));
    doubled.min(max)
}

/// One order for `id`, if this proxy gets the lock.
async fn attempt(acme: &Acme, id: &str, account: &mut Option<instant_acme::Account>) {
    let lock = match acme.store.lock(id, acme.settings.lock_lease) {
        Ok(Some(lock)) => lock,
        Ok(None) => {
            tracing::debug!(certificate = %id, "another proxy is ordering this certificate");
            return;
        }
        Err(e) => {
            failed(acme, id, format!("cannot take the lock: {e}"));
            return;
        }
    };
    // The holder before us may have just written it.
    if acme.reload(id) && acme.with(id, |m| m.state.forced) != Some(true) {
        return;
    }
    let names = acme
        .with(id, |m| {
            m.state.running = true;
            m.state.forced = false;
            m.state.last_attempt = Some(SystemTime::now());
            m.names.clone()
        })
        .unwrap_or_default();
    tracing::info!(certificate = %id, names = ?names, "ordering an ACME certificate");
    let result = async {
        if account.is_none() {
            let _account_lock = loop {
                match acme.store.lock("account", acme.settings.lock_lease) {
                    Ok(Some(l)) => break l,
                    Ok(None) => tokio::time::sleep(Duration::from_millis(200)).await,
                    Err(e) => return Err(format!("cannot take the account lock: {e}")),
                }
            };
            *account = Some(order::account(&acme.settings, &acme.store).await?);
        }
        let Some(account) = account.as_ref() else {
            return Err("no account".to_string());
        };
        order::issue(account, &names, acme.settings.challenge, &acme.challenges).await
    }
    .await;
    match result {
        Ok(issued) => {
            let pem = format!("{}{}", issued.chain_pem, issued.key_pem);
            let path = acme.store.cert(id);
            match super::store::write_private(&path, pem.as_bytes()) {
                Ok(()) => {
                    acme.with(id, |m| {
                        let s = &mut m.state;
                        s.running = false;
                        s.failures = 0;
                        s.retry_at = None;
                        s.last_error = None;
                        s.loaded_mtime = None;
                    });
                    acme.reload(id);
                }
                Err(e) => failed(acme, id, format!("cannot write {}: {e}", path.display())),
            }
        }
        Err(e) => failed(acme, id, e),
    }
    drop(lock);
}

fn failed(acme: &Acme, id: &str, error: String) {
    let (min, max) = (acme.settings.retry_min, acme.settings.retry_max);
    let wait = acme.with(id, |m| {
        let s = &mut m.state;
        s.running = false;
        s.failures += 1;
        let wait = backoff(s.failures, min, max);
        s.retry_at = Some(SystemTime::now() + wait);
        s.last_error = Some(error.clone());
        wait
    });
    tracing::warn!(certificate = %id, error = %error, retry_in_s = wait.unwrap_or_default().as_secs(), "ACME order failed; the certificate in force (if any) keeps serving");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let (min, max) = (Duration::from_secs(60), Duration::from_secs(3600));
        let waits: Vec<u64> = (1..=8).map(|n| backoff(n, min, max).as_secs()).collect();
        assert_eq!(waits, [60, 120, 240, 480, 960, 1920, 3600, 3600]);
        assert_eq!(backoff(200, min, max), max);
    }
}
