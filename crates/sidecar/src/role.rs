//! Role application: the sidecar half of reconfiguration (seed 001 section
//! 3: the back-end node rewrites its own configuration once a front end has
//! claimed it; `docs/sidecar.md` "Role application", the contract in
//! `docs/window.md`).
//!
//! The role word (window word 32) is written only by proxies, with remote
//! compare-and-swap; this module only *reads* it from local memory, except
//! once at start-up, before the first load block is published (proxies never
//! claim a node whose load block is unknown) and before tcp/verbs serve the
//! window. On verbs the
//! NIC's atomics are not atomic with the CPU's own stores, so a local write
//! racing a remote CAS could lose a claim. What the sidecar did is published
//! in two words it alone writes with plain stores: `ROLE_STATUS` (a
//! [`RoleStatus`]: epoch, site actually served, code) and `ROLE_APPLIED` (the
//! epoch applied and verified).
//!
//! A switch: status APPLYING → render the site's template → atomically
//! replace the app's config file → reload command (timeout) → HTTP probe of
//! the site's health path (timeout) → status OK (serving the new site) →
//! `ROLE_APPLIED = epoch`. On any failure the previous file is restored, the
//! app reloaded, and the status carries the failure code with the old site
//! as `serving`; `ROLE_APPLIED` is left alone and the epoch is not retried
//! (a proxy rolls the node back by claiming it for the site it serves).
//!
//! Before it acts on a new epoch, and after each switch ends, the sidecar
//! records the role in its state file ([`state`]); a restart resumes that
//! role (finishing an apply it died in) at an epoch past every one it saw.
//!
//! - [`crate::template`]: the `{{var}}` template syntax (shared with config validation).
//! - [`apply`]: file replacement, reload command, verification probe.
//! - [`state`]: the role kept on disk across restarts.
//! - [`warm`] and [`gate`]: warm roles (`[role] mode = "warm"`): every site
//!   configured in the app at once, a switch renames the gate marker the
//!   app checks per request instead of reloading.

pub mod apply;
pub mod gate;
pub mod state;
mod warm;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};

use super::config::{RoleConfig, RoleTemplate};
use super::SidecarConfig;
use crate::template::Vars;
use rdmalb_window::layout::word;
use rdmalb_window::{RoleState, RoleStatus, RoleStatusCode, RoleWord, SiteSlot, WindowMemory};
use state::Start;

/// The variables for rendering `slot` (`None`: no template for it).
pub fn variables<'a>(
    cfg: &SidecarConfig,
    role: &'a RoleConfig,
    slot: SiteSlot,
) -> Option<(&'a RoleTemplate, Vars)> {
    let mut v = Vars::default();
    v.set("node", cfg.node.clone())
        .set("node_id", cfg.node_id.to_string())
        .set("listen", role.verify.to_string())
        .set("port", role.verify.port().to_string());
    let t = match slot.index() {
        None => {
            v.set("site", "idle");
            role.idle.as_ref()?
        }
        Some(i) => {
            let name = cfg.sites.get(i)?;
            let s = role.sites.get(name)?;
            let quoted: Vec<String> = s.hosts.iter().map(|h| format!("\"{h}\"")).collect();
            if let Some(dir) = role.mode.gate() {
                let marker = gate::Gate::new(dir).marker(Some(name));
                v.set("gate", marker.display().to_string());
            }
            v.set("site", name.clone())
                .set("hosts", s.hosts.join(" "))
                .set("hosts_quoted", quoted.join(", "))
                .set("primary_host", s.hosts[0].clone())
                .set("health_path", s.health_path.clone());
            &s.template
        }
    };
    for (k, val) in &t.vars {
        v.set(k, val.clone());
    }
    Some((t, v))
}

/// The last successful switch, for /status.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchRecord {
    pub epoch: u64,
    pub site: String,
    /// Role word change seen → applied and verified.
    pub duration: Duration,
    pub at_unix_ms: u64,
}

/// The last failed switch, for /status.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureRecord {
    pub epoch: u64,
    /// The site the role asked for.
    pub site: String,
    pub code: RoleStatusCode,
    pub reason: String,
    pub at_unix_ms: u64,
}

/// What /status shows about role application.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoleReport {
    pub switches_total: u64,
    pub failures_total: u64,
    pub last_switch: Option<SwitchRecord>,
    pub last_failure: Option<FailureRecord>,
}

/// A failed switch: the status code and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchError {
    pub code: RoleStatusCode,
    pub reason: String,
}

impl SwitchError {
    fn new(code: RoleStatusCode, reason: impl Into<String>) -> Self {
        SwitchError {
            code,
            reason: reason.into(),
        }
    }
}

/// The sidecar's role applier: owns `ROLE_APPLIED` and `ROLE_STATUS`.
pub struct Applier {
    cfg: Arc<SidecarConfig>,
    memory: Arc<WindowMemory>,
    /// The site the app really serves (after the last successful switch).
    serving: SiteSlot,
    /// Epoch in `ROLE_APPLIED`.
    applied: u64,
    /// Last epoch acted on (applied, failed or ignored): never retried.
    handled: u64,
    /// Last undecodable role word logged (logged once per value).
    bad_word: Option<u64>,
    /// How this run started (first start or resumed role).
    start: state::Start,
    /// Where the role is kept across restarts.
    state: state::StateFile,
    /// Highest epoch recorded in the state file.
    recorded: u64,
    /// Warm mode: the app has loaded the file with every site's block (done
    /// by the first switch, normally the start-up apply; undone when a
    /// switch had to restore the previous file).
    warm_loaded: AtomicBool,
    client: hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        http_body_util::Empty<bytes::Bytes>,
    >,
    report: Arc<Mutex<RoleReport>>,
}

impl Applier {
    /// Initialises the role word: on a first start to the configured initial
    /// site (ACTIVE, epoch 1); on a restart to the role recorded in the
    /// state file (the site being applied when the sidecar stopped, else the
    /// site it served) at an epoch [`state::RESTART_GAP`] past the last one
    /// recorded. Call once, before any transport serves the window and
    /// before the first load block is published (proxies never claim a node
    /// whose load block is unknown, so nobody CASes the word before this).
    pub fn init(
        cfg: Arc<SidecarConfig>,
        memory: Arc<WindowMemory>,
    ) -> Result<Applier, state::StateError> {
        let file = state::StateFile::new(cfg.state_file.clone(), cfg.node.clone());
        let start = file.start(cfg.site, |name| state::site_slot(&cfg.sites, name))?;
        let role = RoleWord {
            site: start.target,
            state: RoleState::Active,
            epoch: start.epoch,
        };
        if start.restarted {
            tracing::info!(node = %cfg.node, role = %role, file = %file.path().display(),
                "resuming the role recorded before the restart");
        }
        let mut a = Applier {
            serving: start.serving.unwrap_or(SiteSlot::Idle),
            start,
            cfg,
            memory,
            applied: 0,
            handled: 0,
            recorded: 0,
            warm_loaded: AtomicBool::new(false),
            state: file,
            bad_word: None,
            client: apply::probe_client(),
            report: Arc::new(Mutex::new(RoleReport::default())),
        };
        // Recorded before the word is written: a crash from here on
        // restarts past this epoch too.
        a.state.store(&a.persisted(role.epoch, Some(role.site)))?;
        a.recorded = role.epoch;
        a.memory.words()[word::ROLE].store(role.encode(), Ordering::Release);
        Ok(a)
    }

    /// Shared report for /status.
    pub fn report(&self) -> Arc<Mutex<RoleReport>> {
        self.report.clone()
    }

    /// The site the app serves now.
    pub fn serving(&self) -> SiteSlot {
        self.serving
    }

    /// Applies and verifies the start-up role, so the running app matches
    /// the role word, then publishes applied/OK. Without `[role]` the app is
    /// taken as configured by hand and published right away.
    ///
    /// On a first start a failure is an error (the sidecar does not start).
    /// On a restart it is published as FAILED, with the site the app served
    /// before, and the sidecar keeps running: a proxy rolls the node back,
    /// as after any failed switch (a node that died mid-apply is resolved
    /// either way, never left SWITCHING).
    pub async fn start_up(&mut self) -> Result<(), SwitchError> {
        let Start {
            epoch,
            target,
            restarted,
            ..
        } = self.start.clone();
        self.handled = epoch;
        if self.cfg.role.is_none() && !restarted {
            self.serving = target;
            self.publish(epoch, target, RoleStatusCode::Ok);
            self.set_applied(epoch);
            self.record(epoch, None);
            return Ok(());
        }
        match self.apply(epoch, target, Instant::now()).await {
            Err(e) if restarted => {
                tracing::error!(node = %self.cfg.node, epoch, code = %e.code,
                    "the role resumed after a restart could not be applied; published as failed for a proxy to roll back");
                Ok(())
            }
            r => r,
        }
    }

    /// Watches the role word until `shutdown` and applies each new epoch.
    /// Without `[role] poll` it waits for `role_changed` (notified by the
    /// publisher thread, which compares the word on every publish tick) and
    /// rechecks every [`ROLE_RECHECK`](super::config::ROLE_RECHECK) as a
    /// safety net; with it, it reads the word on its own timer. A switch in
    /// progress is finished before shutdown is honoured.
    pub async fn run(mut self, role_changed: Arc<Notify>, mut shutdown: watch::Receiver<bool>) {
        let poll = self.cfg.role.as_ref().and_then(|r| r.poll);
        let mut tick = tokio::time::interval(poll.unwrap_or(super::config::ROLE_RECHECK));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
                _ = role_changed.notified(), if poll.is_none() => {}
                _ = tick.tick() => {}
            }
            self.step().await;
        }
    }

    /// One poll: reads the role word and acts on a new epoch. Returns the
    /// epoch acted on, if any.
    pub async fn step(&mut self) -> Option<u64> {
        let seen = Instant::now();
        let raw = self.memory.load(word::ROLE)?;
        let role = match RoleWord::decode(raw) {
            Ok(r) => r,
            Err(e) => {
                if self.bad_word != Some(raw) {
                    tracing::warn!(node = %self.cfg.node, error = %e, "role word does not decode; ignored");
                    self.bad_word = Some(raw);
                }
                return None;
            }
        };
        if role.epoch <= self.applied || role.epoch == self.handled {
            return None;
        }
        self.handled = role.epoch;
        let applying = match role.state {
            RoleState::Switching | RoleState::Active if role.site != self.serving => {
                Some(role.site)
            }
            _ => None,
        };
        self.record(role.epoch, applying);
        match role.state {
            RoleState::Switching => {}
            RoleState::Active if role.site != self.serving => {}
            RoleState::Active => {
                // Same site, new epoch: nothing to change, acknowledge.
                self.publish(role.epoch, self.serving, RoleStatusCode::Ok);
                self.set_applied(role.epoch);
                return Some(role.epoch);
            }
            other => {
                tracing::debug!(node = %self.cfg.node, epoch = role.epoch, state = %other,
                    "role word state is not one the sidecar applies; ignored");
                return None;
            }
        }
        let _ = self.apply(role.epoch, role.site, seen).await;
        Some(role.epoch)
    }

    fn site_label(&self, slot: SiteSlot) -> String {
        self.cfg
            .site_name(slot)
            .map_or_else(|| format!("{slot} (not in the site table)"), str::to_string)
    }

    /// Switches to `target` for `epoch`, publishing the status words.
    pub async fn apply(
        &mut self,
        epoch: u64,
        target: SiteSlot,
        seen: Instant,
    ) -> Result<(), SwitchError> {
        let node = self.cfg.node.clone();
        let site = self.site_label(target);
        let from = self.site_label(self.serving);
        tracing::info!(node = %node, epoch, site = %site, from = %from, "applying role");
        self.publish(epoch, self.serving, RoleStatusCode::Applying);
        match self.switch(target).await {
            Ok(()) => {
                let took = seen.elapsed();
                self.serving = target;
                self.publish(epoch, target, RoleStatusCode::Ok);
                self.set_applied(epoch);
                // Recorded after publishing, off the switch's critical
                // path (the state file's two fsyncs took ~4 ms each on a
                // loaded disk: most of a warm switch). Until then the file
                // names `target` as being applied, so a crash in between
                // restarts on `target` too, finishing the apply, at an
                // epoch past this one: the same outcome.
                self.record(epoch, None);
                metrics::histogram!("rdmalb_sidecar_role_switch_seconds", "node" => node.clone())
                    .record(took.as_secs_f64());
                metrics::gauge!("rdmalb_sidecar_role_switch_last_seconds", "node" => node.clone())
                    .set(took.as_secs_f64());
                metrics::counter!("rdmalb_sidecar_role_switches_total", "node" => node.clone(), "result" => "ok")
                    .increment(1);
                tracing::info!(node = %node, epoch, site = %site, took_ms = took.as_secs_f64() * 1e3, "role applied");
                if let Ok(mut r) = self.report.lock() {
                    r.switches_total += 1;
                    r.last_switch = Some(SwitchRecord {
                        epoch,
                        site,
                        duration: took,
                        at_unix_ms: rdmalb_base::time::unix_now_ms(),
                    });
                }
                Ok(())
            }
            Err(e) => {
                self.record(epoch, None);
                self.publish(epoch, self.serving, e.code);
                metrics::counter!("rdmalb_sidecar_role_switches_total", "node" => node.clone(), "result" => e.code.as_str())
                    .increment(1);
                tracing::error!(node = %node, epoch, site = %site, serving = %from, code = %e.code,
                    reason = %e.reason, "role not applied; previous config restored");
                if let Ok(mut r) = self.report.lock() {
                    r.failures_total += 1;
                    r.last_failure = Some(FailureRecord {
                        epoch,
                        site,
                        code: e.code,
                        reason: e.reason.clone(),
                        at_unix_ms: rdmalb_base::time::unix_now_ms(),
                    });
                }
                Err(e)
            }
        }
    }

    /// Render, replace, reload, verify; restores the previous file on a
    /// reload or verification failure. Warm mode: [`warm`].
    async fn switch(&self, target: SiteSlot) -> Result<(), SwitchError> {
        use RoleStatusCode::{NoTemplate, VerifyFailed};
        let Some(role) = &self.cfg.role else {
            if target == self.serving {
                return Ok(());
            }
            return Err(SwitchError::new(
                NoTemplate,
                "role application is off (the sidecar config has no [role] section)",
            ));
        };
        if let Some(dir) = role.mode.gate() {
            return self.warm_switch(role, dir, target).await;
        }
        if target == SiteSlot::Idle && role.idle.is_none() {
            // Idle without an idle template: the app config stays as it is;
            // proxies stop routing the old site here from the role word.
            return Ok(());
        }
        let text = self.render(role, target)?;
        let previous = self.install(role, text).await?;
        if let Err(e) = self.probe(role, target).await {
            let reason = self.roll_back(role, &previous, e).await;
            return Err(SwitchError::new(VerifyFailed, reason));
        }
        Ok(())
    }

    /// `target`'s template rendered (`NO_TEMPLATE` without one,
    /// `RENDER_FAILED` when it does not render).
    fn render(&self, role: &RoleConfig, target: SiteSlot) -> Result<String, SwitchError> {
        let Some((template, vars)) = variables(&self.cfg, role, target) else {
            return Err(SwitchError::new(
                RoleStatusCode::NoTemplate,
                format!("no [role.site.{}] template", self.site_label(target)),
            ));
        };
        template.template.render(&vars).map_err(|e| {
            SwitchError::new(
                RoleStatusCode::RenderFailed,
                format!("template `{}`: {e}", template.path.display()),
            )
        })
    }

    /// Replaces the app's config file with `text` and reloads the app,
    /// putting the previous file back when the reload fails
    /// (`RELOAD_FAILED`). Returns the previous file, for a later rollback.
    async fn install(
        &self,
        role: &RoleConfig,
        text: String,
    ) -> Result<apply::Previous, SwitchError> {
        let previous = self
            .replace_file(role, text)
            .await
            .map_err(|e| SwitchError::new(RoleStatusCode::RenderFailed, e))?;
        if let Err(e) = apply::reload(&role.reload, role.reload_timeout).await {
            let reason = self.roll_back(role, &previous, e.to_string()).await;
            return Err(SwitchError::new(RoleStatusCode::ReloadFailed, reason));
        }
        Ok(previous)
    }

    /// Replaces the app's config file with `text` (atomically); returns
    /// what it held before, for a rollback.
    async fn replace_file(
        &self,
        role: &RoleConfig,
        text: String,
    ) -> Result<apply::Previous, String> {
        let f = role.file.clone();
        blocking(move || {
            let previous =
                apply::snapshot(&f).map_err(|e| format!("cannot read `{}`: {e}", f.display()))?;
            apply::replace(&f, text.as_bytes(), apply::mode_of(&previous))
                .map_err(|e| format!("cannot write `{}`: {e}", f.display()))?;
            Ok(previous)
        })
        .await
    }

    /// The verification probe of `target` (nothing to verify for idle or a
    /// site without a `[role.site.*]` section). `Err` is the reason.
    async fn probe(&self, role: &RoleConfig, target: SiteSlot) -> Result<(), String> {
        let Some(i) = target.index() else {
            return Ok(()); // idle: nothing to verify
        };
        let Some((name, site)) = self
            .cfg
            .sites
            .get(i)
            .and_then(|n| role.sites.get(n).map(|s| (n, s)))
        else {
            return Ok(());
        };
        let probe = apply::Probe {
            addr: role.verify,
            host: &site.hosts[0],
            path: &site.health_path,
            header: role.verify_header.as_ref(),
            site: name,
        };
        apply::verify(&self.client, &probe, role.verify_timeout)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// Puts the previous file back and reloads; returns `reason` extended
    /// with any trouble restoring (the app may then be serving the broken
    /// config, which the log says loudly).
    async fn roll_back(
        &self,
        role: &RoleConfig,
        previous: &apply::Previous,
        reason: String,
    ) -> String {
        let (f, p) = (role.file.clone(), previous.clone());
        if let Err(e) = blocking(move || {
            apply::restore(&f, &p).map_err(|e| format!("cannot restore `{}`: {e}", f.display()))
        })
        .await
        {
            tracing::error!(node = %self.cfg.node, error = %e, "restoring the previous app config failed");
            return format!("{reason}; {e}");
        }
        if let Err(e) = apply::reload(&role.reload, role.reload_timeout).await {
            tracing::error!(node = %self.cfg.node, error = %e,
                "reload after restoring the previous app config failed; the app may not be serving");
            return format!("{reason}; reload after restore failed: {e}");
        }
        reason
    }

    /// The state file's contents for `epoch` (`applying`: the site a switch
    /// in progress goes to).
    fn persisted(&self, epoch: u64, applying: Option<SiteSlot>) -> state::Persisted {
        state::Persisted {
            node: self.cfg.node.clone(),
            epoch,
            serving: state::site_name(&self.cfg.sites, self.serving),
            applying: applying
                .filter(|a| *a != self.serving)
                .map(|a| state::site_name(&self.cfg.sites, a)),
        }
    }

    /// Records the role in the state file. A write that fails is logged and
    /// counted, and the sidecar goes on: the node keeps serving, but a
    /// restart before the next good write could resume an older role.
    fn record(&mut self, epoch: u64, applying: Option<SiteSlot>) {
        let p = self.persisted(epoch.max(self.recorded), applying);
        match self.state.store(&p) {
            Ok(()) => self.recorded = p.epoch,
            Err(e) => {
                metrics::counter!("rdmalb_sidecar_role_state_write_errors_total", "node" => self.cfg.node.clone())
                    .increment(1);
                tracing::error!(node = %self.cfg.node, error = %e,
                    "could not record the role; a restart now could resume an older role");
            }
        }
    }

    fn publish(&self, epoch: u64, serving: SiteSlot, code: RoleStatusCode) {
        let s = RoleStatus {
            epoch,
            serving,
            code,
        };
        self.memory.words()[word::ROLE_STATUS].store(s.encode(), Ordering::Release);
    }

    fn set_applied(&mut self, epoch: u64) {
        self.applied = epoch;
        self.memory.words()[word::ROLE_APPLIED].store(epoch, Ordering::Release);
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(format!("file task failed: {e}")))
}

#[cfg(test)]
mod tests;
