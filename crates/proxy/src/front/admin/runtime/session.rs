//! A runtime session: the level it runs at and whether it is interactive
//! (`prompt`). The stats socket holds one per connection, `POST /runtime`
//! one per request (admin level); both run every command through
//! [`Session::run`], so the two doors run the same commands with the same
//! answers.
//!
//! Besides the commands of [`super::command`] that read or change the
//! proxy, a session takes HAProxy's session commands (run by
//! [`super::execute`] on the session): `prompt` (toggles interactive mode), `quit` (ends the
//! session), `user` and `operator` (lower the session's level; raising it
//! is refused with `Permission denied`), `set timeout cli <seconds>` (the
//! session's idle timeout, at most a day).

use http::StatusCode;

use super::command::Refusal;
use super::{execute, Admin, Command, Outcome};
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
    pub async fn run(&mut self, state: &Admin, command: &str) -> Result<Option<String>, Refusal> {
        let words: Vec<&str> = command.split_whitespace().collect();
        let command = Command::parse(&words, self.level)?;
        execute(state, command, self).await
    }

    /// `user`, `operator`: lowers the session's level; raising it is
    /// refused.
    pub(super) fn lower(&mut self, to: Level) -> Outcome {
        if to > self.level {
            return Err((StatusCode::FORBIDDEN, "Permission denied".into()));
        }
        self.level = to;
        Ok(String::new())
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
