//! Warm roles (`[role] mode = "warm"`, docs/sidecar.md "Role application"): the app keeps every site
//! of `[role.site.*]` configured, and a switch changes only which one it
//! accepts, without a reload.
//!
//! The first switch (normally the start-up apply) renders the *warm file*:
//! the `[role.idle]` template if any (for nginx the first server block is
//! the default server, so it answers hosts no site has), then every site's
//! template in the order of `sites`, each with `{{gate}}` set to its marker
//! path ([`super::gate`]). It replaces `file` and runs the reload command
//! once, exactly as a cold switch does (same `RENDER_FAILED` /
//! `RELOAD_FAILED` handling and rollback). Every switch then:
//!
//! 1. renames the gate marker to the target's (`active-<site>`, or `idle`):
//!    the old site's block refuses from that instant (nginx answers 421,
//!    which the proxy replays on another node), the new one accepts;
//! 2. probes the target exactly like a cold switch (`VERIFY_FAILED` moves
//!    the marker back, so the old site is open again);
//! 3. returns, and the caller publishes status OK and `ROLE_APPLIED`.
//!
//! Epochs, the state file and the status words are the caller's
//! ([`Applier::apply`]), identical in both modes. A switch that had to load
//! the warm file and then fails restores the previous file and reloads
//! (as a cold switch does), and the next switch loads the warm file again.

use std::path::Path;
use std::sync::atomic::Ordering;

use super::gate::Gate;
use super::{apply, blocking, Applier, RoleConfig, SiteSlot, SwitchError};
use rdmalb_window::RoleStatusCode::{NoTemplate, ReloadFailed, VerifyFailed};

impl Applier {
    /// A switch in warm mode (see the module doc).
    pub(super) async fn warm_switch(
        &self,
        role: &RoleConfig,
        dir: &Path,
        target: SiteSlot,
    ) -> Result<(), SwitchError> {
        if let Some(i) = target.index() {
            if !self
                .cfg
                .sites
                .get(i)
                .is_some_and(|n| role.sites.contains_key(n))
            {
                // Checked before anything changes: the gate stays as it is.
                return Err(SwitchError::new(
                    NoTemplate,
                    format!(
                        "no [role.site.{}] section: a warm node serves only the sites in its warm file",
                        self.site_label(target)
                    ),
                ));
            }
        }
        let gate = Gate::new(dir);
        let loaded_now = if self.warm_loaded.load(Ordering::Acquire) {
            None
        } else {
            Some(self.load_warm_file(role).await?)
        };
        let site = target.index().and_then(|i| self.cfg.sites.get(i)).cloned();
        let g = gate.clone();
        let opened = blocking(move || {
            g.open(site.as_deref())
                .map_err(|e| format!("gate `{}`: {e}", g.dir().display()))
        })
        .await;
        let before = match opened {
            Ok(before) => before,
            Err(reason) => {
                let reason = match &loaded_now {
                    Some(previous) => self.roll_back(role, previous, reason).await,
                    None => reason,
                };
                return Err(SwitchError::new(ReloadFailed, reason));
            }
        };
        if let Err(reason) = self.probe(role, target).await {
            let g = gate.clone();
            let mut reason = match blocking(move || {
                g.restore(before.as_deref()).map_err(|e| {
                    format!("cannot put the gate back in `{}`: {e}", g.dir().display())
                })
            })
            .await
            {
                Ok(()) => reason,
                Err(e) => {
                    tracing::error!(node = %self.cfg.node, error = %e,
                        "restoring the gate failed; the app may be refusing the site it served");
                    format!("{reason}; {e}")
                }
            };
            if let Some(previous) = &loaded_now {
                reason = self.roll_back(role, previous, reason).await;
            }
            return Err(SwitchError::new(VerifyFailed, reason));
        }
        if loaded_now.is_some() {
            self.warm_loaded.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Renders the warm file (idle block, then every site's block in the
    /// order of `sites`), replaces `file` with it and reloads the app.
    /// Returns the file's previous contents for a rollback.
    async fn load_warm_file(&self, role: &RoleConfig) -> Result<apply::Previous, SwitchError> {
        let mut text = String::new();
        if role.idle.is_some() {
            text.push_str(&self.render(role, SiteSlot::Idle)?);
        }
        for (i, name) in self.cfg.sites.iter().enumerate() {
            if !role.sites.contains_key(name) {
                continue;
            }
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&self.render(role, SiteSlot::Site(i as u16))?);
        }
        let previous = self.install(role, text).await?;
        tracing::info!(node = %self.cfg.node, file = %role.file.display(), sites = role.sites.len(),
            "warm file loaded: every site configured, switches move the gate only");
        Ok(previous)
    }
}

#[cfg(test)]
mod tests;
