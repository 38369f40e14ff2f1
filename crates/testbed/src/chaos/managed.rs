//! A child process of the campaign that faults kill, stop and restart.

use super::*;

/// One managed child process that faults kill, stop and restart.
pub(super) struct Managed {
    pub(super) name: String,
    pub(super) exe: PathBuf,
    pub(super) args: Vec<String>,
    pub(super) log: PathBuf,
    pub(super) child: Option<Child>,
    pub(super) stopped: bool,
    /// Clock offset (ms) passed on the next start (proxies).
    pub(super) skew_ms: i64,
}

impl Managed {
    pub(super) fn start(&mut self) -> Result<(), ClusterError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| io(&self.log, e))?;
        let err = file.try_clone().map_err(|e| io(&self.log, e))?;
        let mut cmd = Command::new(&self.exe);
        cmd.args(&self.args)
            .env("NO_COLOR", "1")
            .env("RDMALB_LOG", "info")
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err);
        if self.skew_ms != 0 {
            cmd.env(
                rdmalb_base::time::CLOCK_OFFSET_ENV,
                self.skew_ms.to_string(),
            );
        }
        let child = cmd.spawn().map_err(|e| ClusterError::Io {
            what: format!("cannot start {}", self.name),
            source: e,
        })?;
        self.child = Some(child);
        self.stopped = false;
        Ok(())
    }

    pub(super) fn signal(&self, sig: &str) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .arg(format!("-{sig}"))
                .arg(c.id().to_string())
                .stderr(Stdio::null())
                .status();
        }
    }

    pub(super) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.stopped = false;
    }

    pub(super) fn stop(&mut self) {
        self.signal("STOP");
        self.stopped = true;
    }

    pub(super) fn cont(&mut self) {
        self.signal("CONT");
        self.stopped = false;
    }

    /// Running (not exited); a stopped one counts as running.
    pub(super) fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Continues it if stopped, starts it if dead; true when it (re)started.
    pub(super) fn ensure_running(&mut self) -> Result<bool, ClusterError> {
        if self.stopped {
            self.cont();
        }
        if self.alive() {
            return Ok(false);
        }
        self.kill();
        self.start()?;
        Ok(true)
    }

    /// Kills it and starts it again with clock offset `skew_ms`.
    pub(super) fn restart_with_skew(&mut self, skew_ms: i64) -> Result<(), ClusterError> {
        self.kill();
        // The watcher sees the old run's last claim record before the new
        // run starts (claims are attributed to the run that made them).
        std::thread::sleep(Duration::from_millis(50));
        self.skew_ms = skew_ms;
        self.start()
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        if self.stopped {
            self.cont();
        }
        self.kill();
    }
}
