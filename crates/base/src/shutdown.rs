//! The one shutdown signal of every rdmalb process: a `watch` channel whose
//! value turns `true` when the process should stop. Background loops
//! (health checks, load publishing, the agent, listeners) select on
//! [`requested`] and stop cleanly; `main` turns SIGTERM and SIGINT into it
//! with [`termination`].

use tokio::sync::watch;

/// Resolves once `rx` says stop, or its sender is gone (nobody can tell
/// the loop to go on any more, so it stops too).
pub async fn requested(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Resolves on SIGTERM or SIGINT (on Ctrl-C where the signal handlers
/// cannot be installed).
pub async fn termination() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests;
