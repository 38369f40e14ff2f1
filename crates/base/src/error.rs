//! Error messages for people: an error and its sources on one line.

use std::error::Error;

/// `e` and its sources joined with ": ", skipping a source whose text the
/// message before it already ends with (thiserror messages often embed
/// their source; hyper's and sideway's put the useful part in the chain).
pub fn chain(e: &(dyn Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.ends_with(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests;
