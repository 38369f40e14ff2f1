//! HAProxy 3.2's ACME commands: `acme status` (its tab-separated columns:
//! certificate, section, state, expiration date, expires in, scheduled
//! date, scheduled in; then two of ours: failures in a row and the last
//! error) and `acme renew <certificate>` (order now, whatever the
//! schedule or the backoff).

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use http::StatusCode;

use super::super::AdminState as Admin;
use super::Outcome;

fn acme(state: &Admin) -> Result<&crate::acme::Acme, (StatusCode, String)> {
    state.acme.as_deref().ok_or((
        StatusCode::NOT_FOUND,
        "No ACME section configured.\n".to_string(),
    ))
}

/// `364d 23h50m02s`, as HAProxy prints a delay.
fn delay(d: Duration) -> String {
    let s = d.as_secs();
    format!(
        "{}d {}h{:02}m{:02}s",
        s / 86400,
        s / 3600 % 24,
        s / 60 % 60,
        s % 60
    )
}

/// ISO 8601 in UTC, as HAProxy prints a date.
fn date(t: SystemTime) -> String {
    let secs = rdmalb_base::time::unix_secs(t) as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let (year, month, day) = super::info::civil(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

pub fn status(state: &Admin) -> Outcome {
    let acme = acme(state)?;
    let now = SystemTime::now();
    let mut out = String::from(
        "# certificate\tsection\tstate\texpiration date (UTC)\texpires in\tscheduled date (UTC)\tscheduled in\tfailures\tlast error\n",
    );
    for m in acme.snapshot() {
        let s = &m.state;
        let status = crate::acme::CertStatus::state_of(s);
        let (expires, expires_in) = match s.not_after {
            Some(t) => (date(t), delay(t.duration_since(now).unwrap_or_default())),
            None => ("-".into(), "-".into()),
        };
        let scheduled = if s.running {
            None
        } else {
            match (s.retry_at, s.renew_at) {
                (Some(r), _) => Some(r),
                (None, Some(r)) => Some(r),
                (None, None) => None,
            }
        };
        let (sched, sched_in) = match scheduled {
            Some(t) => (date(t), delay(t.duration_since(now).unwrap_or_default())),
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            "{}\t{}\t{status}\t{expires}\t{expires_in}\t{sched}\t{sched_in}\t{}\t{}",
            m.id,
            match &m.source {
                crate::acme::Source::Site(name) => format!("site:{name}"),
                crate::acme::Source::OnDemand => "on-demand".into(),
            },
            s.failures,
            s.last_error
                .as_deref()
                .unwrap_or("-")
                .replace(['\t', '\n'], " "),
        );
    }
    Ok(out)
}

pub fn renew(state: &Admin, certificate: &str) -> Outcome {
    if acme(state)?.force(certificate) {
        Ok(format!("Renewal of '{certificate}' scheduled.\n"))
    } else {
        Err((
            StatusCode::NOT_FOUND,
            format!("Couldn't find the certificate '{certificate}'.\n"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_delays_as_haproxy_prints_them() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_800_664);
        assert_eq!(date(t), "2026-09-30T20:37:44Z");
        assert_eq!(
            delay(Duration::from_secs(364 * 86400 + 23 * 3600 + 50 * 60 + 2)),
            "364d 23h50m02s"
        );
    }
}
