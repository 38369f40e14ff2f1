//! The claim path of the agent (seed 001 section 3.2): site lock, fresh
//! view under it, fence, counters, role CAS, claim record, and the
//! settling of claims whose reply was lost.

use super::*;

/// Which node a claim moves: chosen under the lock by the agent's rules,
/// or named by an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pick {
    /// A donor for a hot site ([`choose_donor`]).
    Donor,
    /// A node on loan going home to the site ([`choose_return`]).
    Return,
    /// This node (an admin move).
    Node(usize),
}

/// Who a move is for: the label of `rdmalb_reconfig_claims_total{by}`,
/// the event kind, and whether the claim is judged (adaptive T).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum By {
    /// The agent, for a hot site.
    Agent,
    /// The agent, bringing a loaned node home.
    Return,
    /// An operator.
    Admin,
}

impl By {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            By::Agent => "agent",
            By::Return => "return",
            By::Admin => "admin",
        }
    }
}

impl Pick {
    fn by(self) -> By {
        match self {
            Pick::Donor => By::Agent,
            Pick::Return => By::Return,
            Pick::Node(_) => By::Admin,
        }
    }
}

/// One claim in the making: the role's site, the site whose lock is held,
/// who it is for, and the locks held for it (the site's and, when the node
/// leaves another site, that site's), each re-validated before every write
/// ([`protocol::fence`]).
#[derive(Debug, Clone)]
struct Claim {
    to: SiteSlot,
    site: usize,
    by: By,
    locks: Vec<HeldLock>,
}

/// What [`Agent::choose`] found on its fresh view.
enum Choice {
    /// Move this node (view as read).
    Node(usize, NodeView),
    /// Nothing fits the donor rules (or the admin's node is gone).
    NoDonor,
    /// A live node is already SWITCHING towards the site (another proxy's
    /// claim whose counter bump has not reached us yet).
    Coming(usize),
}

impl Agent {
    pub(super) fn lock_home(&self) -> Option<Arc<dyn RemoteWindow>> {
        let home = self.settings.reconfig.lock_home;
        if home == self.settings.proxy_id {
            Some(Arc::new(self.own.clone()))
        } else {
            self.source.proxy(home)
        }
    }

    /// Moves a node to `to` under site `lock_site`'s lock: the agent's
    /// choice (a donor, or a loaned node going home; with the dual-counter
    /// check), or the node an operator named.
    pub(super) async fn claim(
        &self,
        work: &mut Work,
        to: SiteSlot,
        lock_site: usize,
        pick: Pick,
    ) -> Result<ClaimOutcome, ProtocolError> {
        let agent = !matches!(pick, Pick::Node(_));
        if agent && self.adopt_counter(work, lock_site) {
            return Ok(ClaimOutcome::Skipped);
        }
        let home = self.lock_home().ok_or_else(|| ProtocolError::Window {
            step: "reaching the lock home",
            peer: format!("proxy {}", self.settings.reconfig.lock_home),
            source: rdmalb_window::WindowError::Closed {
                peer: format!("proxy {}", self.settings.reconfig.lock_home),
            },
        })?;
        let held = match self.lock(home.as_ref(), lock_site).await? {
            Ok(h) => h,
            Err(busy) => return Ok(busy),
        };
        let since = std::time::Instant::now();
        let claim = Claim {
            to,
            site: lock_site,
            by: pick.by(),
            locks: vec![held],
        };
        let outcome = self.claim_locked(work, home.as_ref(), claim, pick).await;
        self.unlock(home.as_ref(), held, since).await;
        outcome
    }

    /// Tries site `site`'s lock once; `Err(LockBusy)` when someone holds it.
    pub(super) async fn lock(
        &self,
        home: &dyn RemoteWindow,
        site: usize,
    ) -> Result<Result<HeldLock, ClaimOutcome>, ProtocolError> {
        let r = &self.settings.reconfig;
        let label = self.settings.sites[site].name.clone();
        Counters::bump(&self.counters.lock_attempts);
        metrics::counter!(status::LOCK_ATTEMPTS, "site" => label.clone()).increment(1);
        Ok(
            match protocol::try_lock(
                home,
                site,
                self.settings.proxy_id,
                r.lock_lease,
                r.lock_skew,
            )
            .await?
            {
                LockAttempt::Acquired(h) => Ok(h),
                LockAttempt::Stolen { held, from } => {
                    Counters::bump(&self.counters.lock_steals);
                    metrics::counter!(status::LOCK_STEALS, "site" => label.clone()).increment(1);
                    tracing::warn!(site = %label, from, "took over an expired site lock");
                    Ok(held)
                }
                LockAttempt::Busy { owner } => {
                    Counters::bump(&self.counters.lock_busy);
                    metrics::counter!(status::LOCK_BUSY, "site" => label).increment(1);
                    Err(ClaimOutcome::LockBusy { owner })
                }
            },
        )
    }

    /// Releases `held`, taken at `since` (counted as lock hold time).
    pub(super) async fn unlock(
        &self,
        home: &dyn RemoteWindow,
        held: HeldLock,
        since: std::time::Instant,
    ) {
        let result = protocol::unlock(home, held).await;
        let for_ = since.elapsed();
        self.counters
            .lock_held_ns
            .fetch_add(for_.as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
        metrics::histogram!(status::LOCK_HELD).record(for_.as_secs_f64());
        match result {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(site = %self.settings.sites[held.site].name, "site lock lease ran out while held; another proxy took it")
            }
            Err(e) => {
                self.error("unlock");
                tracing::warn!(error = %e, "could not release the site lock; it frees itself when the lease runs out");
            }
        }
    }

    /// Dual update counters: true (and adopt) when another proxy acted for
    /// `site` since we last looked.
    pub(super) fn adopt_counter(&self, work: &mut Work, site: usize) -> bool {
        let shared = shared_counter(&self.own, site);
        if shared == work.local[site] {
            return false;
        }
        work.local[site] = shared;
        work.hot.reset(site);
        Counters::bump(&self.counters.skipped_rounds);
        metrics::counter!(status::SKIPPED, "site" => self.settings.sites[site].name.clone())
            .increment(1);
        true
    }

    async fn claim_locked(
        &self,
        work: &mut Work,
        home: &dyn RemoteWindow,
        mut claim: Claim,
        pick: Pick,
    ) -> Result<ClaimOutcome, ProtocolError> {
        let (to, site) = (claim.to, claim.site);
        // Re-check under the lock: a proxy that claimed before we locked
        // bumped our counter before it unlocked.
        if !matches!(pick, Pick::Node(_)) && self.adopt_counter(work, site) {
            return Ok(ClaimOutcome::Skipped);
        }
        // The view before the lock may be stale: decide on a fresh one.
        let (chosen, v) = match self.choose(work, site, to, pick).await? {
            Choice::Node(i, v) => (i, v),
            Choice::NoDonor => return Ok(ClaimOutcome::NoDonor),
            Choice::Coming(i) => return Ok(self.coming(site, i)),
        };
        // Taking a node out of another site also takes that site's lock, so
        // two hot sites cannot both take the donor site's last spare node
        // (min_nodes). Decide again on a view read under both locks.
        let donor_site = v.role.site.index().filter(|d| *d != site);
        let Some(d) = donor_site else {
            return self.cas_claim(work, home, claim, chosen, v).await;
        };
        let held = match self.lock(home, d).await? {
            Ok(h) => h,
            Err(busy) => return Ok(busy),
        };
        let since = std::time::Instant::now();
        claim.locks.push(held);
        let outcome = match self.choose(work, site, to, pick).await {
            Ok(Choice::Node(i, v)) if v.role.site.index().is_none_or(|s| s == d) => {
                self.cas_claim(work, home, claim, i, v).await
            }
            Ok(Choice::Coming(i)) => Ok(self.coming(site, i)),
            Ok(_) => Ok(ClaimOutcome::NoDonor),
            Err(e) => Err(e),
        };
        self.unlock(home, held, since).await;
        outcome
    }

    fn coming(&self, site: usize, node: usize) -> ClaimOutcome {
        let name = self.settings.nodes[node].name.clone();
        tracing::debug!(site = %self.settings.sites[site].name, node = %name,
            "a node is already switching to the site: no second claim");
        ClaimOutcome::Coming { node: name }
    }

    /// Reads every node and picks the node to move: the donor or loan
    /// rules for the agent, the given node (checked movable) for an admin
    /// move.
    async fn choose(
        &self,
        work: &Work,
        site: usize,
        to: SiteSlot,
        pick: Pick,
    ) -> Result<Choice, ProtocolError> {
        let views: Vec<Option<NodeView>> =
            self.read_all().await.into_iter().map(Result::ok).collect();
        let now = Instant::now();
        let node = match pick {
            Pick::Node(i) => Some(i),
            Pick::Donor | Pick::Return => None,
        };
        let chosen = match node {
            Some(i) => i,
            None => {
                // A live node on its way to the site is capacity already
                // claimed for this hot event (a switch past its deadline
                // does not count).
                let timeout = self.settings.reconfig.switch_timeout;
                // Nodes this batch claimed are not another claim's.
                if let Some(v) = views.iter().flatten().find(|v| {
                    v.role.site == to
                        && !work.batch.contains(&v.index)
                        && v.is_live()
                        && v.effective() == Effective::Switching
                        && work.track[v.index]
                            .switching_for(now)
                            .is_none_or(|d| d < timeout)
                }) {
                    return Ok(Choice::Coming(v.index));
                }
                let chosen = match pick {
                    Pick::Return => self.loan_to_return(work, site, &views, now),
                    _ => self.donor_for(work, site, &views, now),
                };
                match chosen {
                    Some(i) => i,
                    None => return Ok(Choice::NoDonor),
                }
            }
        };
        let Some(v) = views.get(chosen).cloned().flatten() else {
            return Ok(Choice::NoDonor);
        };
        if node.is_some() {
            let name = self.settings.nodes[chosen].name.clone();
            manual::movable(&v, to).map_err(|reason| ProtocolError::Window {
                step: "checking the node",
                peer: name.clone(),
                source: rdmalb_window::WindowError::Refused {
                    peer: name,
                    word: rdmalb_window::layout::word::ROLE,
                    reason,
                },
            })?;
        }
        Ok(Choice::Node(chosen, v))
    }

    /// Runs `f` on the donor rules' view of this round for `site`:
    /// limits, priorities, QoS, fixed nodes and cool-downs.
    pub(super) fn with_donor_query<R>(
        &self,
        work: &Work,
        site: usize,
        views: &[Option<NodeView>],
        now: Instant,
        f: impl FnOnce(&DonorQuery<'_>) -> R,
    ) -> R {
        let fixed = self.fixed_nodes();
        let limits: Vec<SiteLimits> = self.settings.sites.iter().map(|s| s.limits).collect();
        let cooling = |i: usize| self.cooling(work, i, now);
        let reserve: Vec<usize> = match self.settings.reconfig.guarantee_hold() {
            Some(_) => work.reserve.iter().map(|(n, _)| *n).collect(),
            None => Vec::new(),
        };
        let homes = self.homes();
        // A donor site is spare once its work fitted on one node fewer in
        // every round of T: the longer of the hot site's T (how long it
        // had to be hot) and the donor's own.
        let t_hot = work.hot.history_of(site);
        let spare: Vec<bool> = (0..self.settings.sites.len())
            .map(|s| {
                let t = t_hot.max(work.hot.history_of(s));
                work.hot.spare_for(s, now).is_some_and(|d| d >= t)
            })
            .collect();
        // Take-back: the site each node left within two cool-downs (it
        // cannot move in the first).
        let window = self.settings.reconfig.cooldown * 2;
        let given: Vec<Option<usize>> = work
            .left
            .iter()
            .map(|l| l.filter(|(_, at)| now.saturating_duration_since(*at) < window))
            .map(|l| l.map(|(s, _)| s))
            .collect();
        f(&DonorQuery {
            hot_site: site,
            views,
            sites: &limits,
            priorities: &self.qos.priorities,
            qos: work.qos.sites(),
            fixed: &fixed,
            low_watermark: self.settings.reconfig.low_watermark,
            high_watermark: self.settings.reconfig.high_watermark,
            cooling: &cooling,
            reserve: &reserve,
            homes: &homes,
            spare: &spare,
            given: &given,
        })
    }

    /// Each node's home site (its `[[node]]` entry's), by node index.
    pub(super) fn homes(&self) -> Vec<Option<usize>> {
        self.settings
            .nodes
            .iter()
            .map(|n| n.configured_site)
            .collect()
    }

    /// Nodes each site's `[[node]]` entries give it (its configured
    /// share), by site index.
    pub(super) fn shares(&self) -> Vec<usize> {
        let mut shares = vec![0usize; self.settings.sites.len()];
        for s in self.homes().iter().flatten() {
            if let Some(n) = shares.get_mut(*s) {
                *n += 1;
            }
        }
        shares
    }

    /// Nodes without a window per site (they count, never move).
    fn fixed_nodes(&self) -> Vec<usize> {
        // One pass over the nodes (the agent runs this under a site lock,
        // with up to 1024 nodes).
        let mut fixed = vec![0usize; self.settings.sites.len()];
        for n in self.settings.nodes.iter().filter(|n| !n.has_window) {
            if let Some(f) = n.configured_site.and_then(|s| fixed.get_mut(s)) {
                *f += 1;
            }
        }
        fixed
    }

    /// The donor for hot site `site` on `views` ([`choose_donor`]).
    fn donor_for(
        &self,
        work: &Work,
        site: usize,
        views: &[Option<NodeView>],
        now: Instant,
    ) -> Option<usize> {
        self.with_donor_query(work, site, views, now, choose_donor)
    }

    /// The loaned node that should go home to `site` now, on `views`
    /// ([`choose_return`]); `None` also when loans are off.
    pub(super) fn loan_to_return(
        &self,
        work: &Work,
        site: usize,
        views: &[Option<NodeView>],
        now: Instant,
    ) -> Option<usize> {
        let after = self.settings.reconfig.loan_return()?;
        let homes = self.homes();
        let shares = self.shares();
        let cool = |s: usize| work.hot.cool_for(s, now).is_some_and(|d| d >= after);
        let r = ReturnQuery {
            homes: &homes,
            shares: &shares,
            cool: &cool,
        };
        self.with_donor_query(work, site, views, now, |q| choose_return(q, &r))
    }

    /// Re-validates every lock of `claim` before a write (fencing). `None`:
    /// write; `Some(outcome)`: stop, nothing more is written.
    async fn fence(
        &self,
        home: &dyn RemoteWindow,
        claim: &Claim,
        step: &'static str,
    ) -> Result<Option<ClaimOutcome>, ProtocolError> {
        for held in &claim.locks {
            let reason = match protocol::fence(home, held).await? {
                Fence::Held => continue,
                Fence::LeaseShort => return Ok(Some(ClaimOutcome::LeaseExpired)),
                Fence::TakenOver => "the lock was taken over after its lease ran out",
                Fence::HomeRestarted => "the lock home restarted (its window generation changed)",
            };
            Counters::bump(&self.counters.fenced);
            metrics::counter!(status::FENCED, "step" => step).increment(1);
            tracing::warn!(site = %self.settings.sites[held.site].name, step, reason,
                "site lock lost while claiming: nothing more written");
            return Ok(Some(ClaimOutcome::LockLost {
                reason: reason.to_string(),
            }));
        }
        Ok(None)
    }

    /// The second-level CAS, fenced. The other proxies' counters are bumped
    /// first, under the lock: a claim that then loses its CAS costs them a
    /// skipped round, while one whose bump came after the lease could let
    /// another proxy claim twice for one hot event.
    async fn cas_claim(
        &self,
        work: &mut Work,
        home: &dyn RemoteWindow,
        claim: Claim,
        chosen: usize,
        v: NodeView,
    ) -> Result<ClaimOutcome, ProtocolError> {
        let (to, site, by) = (claim.to, claim.site, claim.by);
        let name = self.settings.nodes[chosen].name.clone();
        let Some(w) = self.source.node(chosen) else {
            return Ok(ClaimOutcome::NoDonor);
        };
        if let Some(stop) = self.fence(home, &claim, "counters").await? {
            return Ok(stop);
        }
        self.bump_peers(site).await;
        if let Some(stop) = self.fence(home, &claim, "role").await? {
            return Ok(stop);
        }
        let new = v.role.next(to, RoleState::Switching);
        let now = Instant::now();
        let won = match protocol::claim(w.as_ref(), v.raw_role, new).await {
            Ok(won) => won,
            Err(e @ ProtocolError::Unresolved { .. }) => {
                // It may have landed: count on it for the hot event (the
                // peers know already), settle it from the word later.
                Counters::bump(&self.counters.unresolved);
                metrics::counter!(status::UNRESOLVED, "step" => "claim").increment(1);
                tracing::warn!(node = %name, error = %e, "claim outcome unknown; settled from the role word in the next rounds");
                note_left(work, chosen, Some(v.role.site), new.site, now);
                self.landed(work, chosen, new, site, by, now);
                self.claim_event(chosen, v.role.site, new, by, Some("reply lost"));
                work.pending.push(Pending {
                    node: chosen,
                    word: new,
                    by,
                });
                work.local[site] = protocol::bump_counter(&self.own, site).await?;
                return Ok(ClaimOutcome::Unresolved {
                    node: name,
                    epoch: new.epoch,
                });
            }
            Err(e) => return Err(e),
        };
        if !won {
            Counters::bump(&self.counters.lost_cas);
            metrics::counter!(status::LOST_CAS).increment(1);
            return Ok(ClaimOutcome::LostCas { node: name });
        }
        note_left(work, chosen, Some(v.role.site), new.site, now);
        self.landed(work, chosen, new, site, by, now);
        self.claim_event(chosen, v.role.site, new, by, None);
        self.claimed(w.as_ref(), &name, new, to, by).await;
        work.local[site] = protocol::bump_counter(&self.own, site).await?;
        Ok(ClaimOutcome::Claimed {
            node: name,
            site: self.settings.site_name(to),
            epoch: new.epoch,
        })
    }

    /// Bumps site `site`'s update counter on every other proxy.
    async fn bump_peers(&self, site: usize) {
        let bumps = self.settings.reconfig.peers.iter().map(|peer| async move {
            let r = match self.source.proxy(peer.id) {
                Some(pw) => protocol::bump_counter(pw.as_ref(), site).await.map(|_| ()),
                None => Err(ProtocolError::Window {
                    step: "FAA of update counter",
                    peer: format!("proxy {}", peer.id),
                    source: rdmalb_window::WindowError::Closed {
                        peer: format!("proxy {}", peer.id),
                    },
                }),
            };
            (peer.id, r)
        });
        for (peer, r) in futures_util::future::join_all(bumps).await {
            if let Err(e) = r {
                self.error("counter");
                tracing::warn!(peer, error = %e, "could not bump a peer's update counter; it may claim for the same event");
            }
        }
    }

    /// What follows a role CAS that landed (or may have): routing, moves,
    /// the hot history.
    fn landed(
        &self,
        work: &mut Work,
        chosen: usize,
        new: RoleWord,
        site: usize,
        by: By,
        now: Instant,
    ) {
        self.follow(chosen, new.site, false);
        self.moved();
        work.moved_at[chosen] = Some(now);
        work.last_epoch[chosen] = Some(new.epoch);
        work.last_site[chosen] = Some(new.site);
        work.hot.reset(site);
        if by == By::Agent {
            // The agent's claims for hot sites are judged (adaptive T); an
            // operator's move or a loan going home is not evidence about
            // bursts.
            let offered = Agent::site_qos(work)
                .get(site)
                .map_or(0.0, |q| q.offered_rps);
            work.hot.claimed(site, offered, now);
        }
    }

    /// Records a claim known to have landed: the claim record on the node
    /// (informational) and the claim counters.
    async fn claimed(&self, w: &dyn RemoteWindow, name: &str, new: RoleWord, to: SiteSlot, by: By) {
        if let Err(e) = protocol::write_claim_record(w, self.settings.proxy_id, new.epoch).await {
            Counters::bump(&self.counters.claim_record_errors);
            tracing::debug!(node = %name, error = %e, "claim record not written");
        }
        Counters::bump(&self.counters.claims);
        metrics::counter!(status::CLAIMS, "site" => self.settings.site_name(to), "by" => by.as_str())
            .increment(1);
    }

    /// Settles claims whose CAS got no reply, from this round's role words:
    /// our word there means it landed; the word at or past our epoch with
    /// another value means it did not (or was changed since: either way it
    /// is not ours to count).
    pub(super) async fn settle_pending(
        &self,
        work: &mut Work,
        views: &[Result<NodeView, ViewError>],
    ) {
        let mut still = Vec::new();
        for p in std::mem::take(&mut work.pending) {
            let Some(Ok(v)) = views.get(p.node) else {
                still.push(p);
                continue;
            };
            let name = self.settings.nodes[p.node].name.clone();
            if v.raw_role == p.word.encode() {
                tracing::info!(node = %name, epoch = p.word.epoch, "the claim whose reply was lost landed");
                if let Some(w) = self.source.node(p.node) {
                    self.claimed(w.as_ref(), &name, p.word, p.word.site, p.by)
                        .await;
                }
            } else if v.role.epoch >= p.word.epoch {
                tracing::info!(node = %name, epoch = p.word.epoch, now = %v.role,
                    "the claim whose reply was lost did not land (or was changed since)");
            } else {
                still.push(p);
            }
        }
        work.pending = still;
    }
}
