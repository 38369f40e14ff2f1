//! A runtime session: the level it runs at and whether it is interactive
//! (`prompt`). The stats socket holds one per connection, `POST /runtime`
//! one per request (admin level); both run every command through
//! [`Session::run`], so the two doors run the same commands with the same
//! answers.
//!
//! Besides the commands of [`super::run_at`], a session takes HAProxy's
//! session commands: `prompt` (toggles interactive mode), `quit` (ends the
//! session), `user` and `operator` (lower the session's level; raising it
//! is refused with `Permission denied`), `set timeout cli <seconds>` (the
//! session's idle timeout, at most a day).

use http::StatusCode;

use super::{run_at, Admin, Outcome};
use crate::config::Level;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    pub level: Level,
    /// Interactive mode: every answer is followed by the `> ` prompt and
    /// the connection stays open.
    pub prompt: bool,
    /// How long the session may stay idle (`set timeout cli <seconds>`;
    /// the stats socket closes it after that).
    pub timeout: std::time::Duration,
}

/// Longest `set timeout cli` taken: a day.
const MAX_TIMEOUT_SECS: u64 = 86_400;

impl Session {
    pub fn new(level: Level) -> Session {
        Session {
            level,
            prompt: false,
            timeout: super::super::socket::IDLE,
        }
    }

    /// Runs one command: `Ok(None)` after `quit`, else its answer (an
    /// empty line follows it on the wire).
    pub async fn run(
        &mut self,
        state: &Admin,
        command: &str,
    ) -> Result<Option<String>, (StatusCode, String)> {
        let words: Vec<&str> = command.split_whitespace().collect();
        match words.as_slice() {
            ["quit"] => Ok(None),
            ["prompt"] => {
                self.prompt = !self.prompt;
                Ok(Some(String::new()))
            }
            ["set", "timeout", rest @ ..] => {
                let seconds = match rest {
                    ["cli", s] => s
                        .parse::<u64>()
                        .ok()
                        .filter(|s| (1..=MAX_TIMEOUT_SECS).contains(s))
                        .ok_or("Invalid timeout value."),
                    ["cli"] => Err("Expects an integer value."),
                    _ => Err("'set timeout' only supports 'cli'."),
                }
                .map_err(|m| (StatusCode::BAD_REQUEST, m.to_string()))?;
                self.timeout = std::time::Duration::from_secs(seconds);
                Ok(Some(String::new()))
            }
            [lower @ ("user" | "operator")] => {
                let Some(to) = Level::parse(lower).filter(|l| *l <= self.level) else {
                    return Err((StatusCode::FORBIDDEN, "Permission denied".into()));
                };
                self.level = to;
                Ok(Some(String::new()))
            }
            _ => run_at(state, command, self.level).await.map(Some),
        }
    }

    /// Runs one command for the socket: its answer, or its error text, as
    /// HAProxy prints it (ending with a newline); `None` after `quit`.
    pub async fn answer(&mut self, state: &Admin, command: &str) -> Option<String> {
        let outcome: Outcome = match self.run(state, command).await {
            Ok(None) => return None,
            Ok(Some(a)) => Ok(a),
            Err(e) => Err(e),
        };
        Some(match outcome {
            Ok(a) => a,
            Err((_, mut message)) => {
                if !message.ends_with('\n') {
                    message.push('\n');
                }
                message
            }
        })
    }
}
