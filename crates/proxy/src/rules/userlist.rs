//! User lists for Basic authentication (HAProxy's `userlist`): each user
//! has a password hash in one of the crypt(3) forms HAProxy's `password`
//! accepts on Linux, bcrypt (`$2a$`, `$2b$`, `$2y$`) and SHA-crypt
//! (`$5$` SHA-256, `$6$` SHA-512), or a clear-text `insecure-password`.

use std::collections::HashMap;

use base64::Engine;

/// A password as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Password {
    Bcrypt(String),
    Sha256Crypt(String),
    Sha512Crypt(String),
    /// `insecure_password`: compared as written.
    Clear(String),
}

impl Password {
    /// Recognizes a crypt(3) hash; the error says which forms are known.
    pub fn hash(h: &str) -> Result<Password, String> {
        if h.starts_with("$2a$") || h.starts_with("$2b$") || h.starts_with("$2y$") {
            Ok(Password::Bcrypt(h.to_string()))
        } else if h.starts_with("$5$") {
            Ok(Password::Sha256Crypt(h.to_string()))
        } else if h.starts_with("$6$") {
            Ok(Password::Sha512Crypt(h.to_string()))
        } else {
            Err(format!("`{h}` is not a password hash this build checks (expected bcrypt `$2b$...`, SHA-256-crypt `$5$...` or SHA-512-crypt `$6$...`)"))
        }
    }

    fn verify(&self, password: &str) -> bool {
        match self {
            Password::Bcrypt(h) => bcrypt::verify(password, h).unwrap_or(false),
            Password::Sha256Crypt(h) | Password::Sha512Crypt(h) => {
                use sha_crypt::PasswordVerifier;
                sha_crypt::ShaCrypt::default()
                    .verify_password(password.as_bytes(), h.as_str())
                    .is_ok()
            }
            Password::Clear(p) => constant_time_eq(p.as_bytes(), password.as_bytes()),
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A named list of users.
#[derive(Debug, Clone, Default)]
pub struct Userlist {
    pub name: String,
    pub users: HashMap<String, Password>,
}

impl Userlist {
    /// Whether base64 `user:password` credentials name a user of the list
    /// with that password.
    pub fn check_basic(&self, cred: &str) -> bool {
        let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(cred) else {
            return false;
        };
        let Ok(text) = std::str::from_utf8(&raw) else {
            return false;
        };
        let Some((user, password)) = text.split_once(':') else {
            return false;
        };
        self.users.get(user).is_some_and(|p| p.verify(password))
    }
}
