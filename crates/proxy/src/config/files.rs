//! Secrets a proxy config names by path, read from disk by
//! [`super::load`] (so `rdmalb check` and a real start agree on them) and,
//! for the admin token, again on every mutating admin call (replacing the
//! file rotates the token without a reload). Validation of the config text
//! itself never touches the disk.

use std::path::Path;

/// Fewest characters an admin token may have (`rdmalb psk` prints 78).
pub const MIN_TOKEN_LEN: usize = 32;

/// How to make an admin token, for every refusal.
const MAKE_TOKEN: &str = "make one with `rdmalb psk --out FILE` (any secret of at least 32 \
     visible ASCII characters, mode 0600, works)";

/// The bearer token in `path`: the file's text without surrounding
/// whitespace, at least [`MIN_TOKEN_LEN`] visible ASCII characters (it
/// travels in an `Authorization` header), in a file with no permission
/// bits for "other". The error names the file and says how to make one.
pub fn admin_token(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("`{shown}`: cannot read it: {e}"))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o007 != 0 {
        return Err(format!(
            "`{shown}`: mode {mode:04o} lets other users read the admin token; run `chmod 600 {shown}`"
        ));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("`{shown}`: cannot read it: {e}"))?;
    let token = text.trim();
    if token.len() < MIN_TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "`{shown}`: not a usable admin token (expected at least {MIN_TOKEN_LEN} visible \
             ASCII characters and no spaces); {MAKE_TOKEN}"
        ));
    }
    Ok(token.to_string())
}
