//! The join token agents present, in k3s's format: `K10<ca-hash>::<user>:<password>`, where
//! `<ca-hash>` is the SHA-256 (hex) of the cluster CA certificate (PEM bytes). The hash lets a
//! joining agent check the CA it downloads from `/cacerts` before trusting it; the password
//! authenticates it. A "short" token (just the password) is accepted too, as k3s does.
//!
//! A request bearing the token is the bootstrap user `system:k1s:agent` in
//! `system:bootstrappers` and `system:bootstrappers:k1s`: enough to obtain a node client
//! certificate, nothing else.

use std::path::Path;

use super::UserInfo;

/// The user name of requests bearing the join token.
pub const AGENT_USER: &str = "system:k1s:agent";
/// The group of requests bearing the join token (besides `system:bootstrappers`).
pub const AGENT_GROUP: &str = "system:bootstrappers:k1s";

/// Why a token cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum JoinTokenError {
    #[error("invalid join token: {0}")]
    Invalid(&'static str),
    #[error("the join token's CA hash does not match this cluster's CA")]
    CaMismatch,
    #[error("cannot {op} the join token file {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The server's join token.
#[derive(Clone)]
pub struct JoinToken {
    ca_hash: String,
    user: String,
    password: String,
}

impl std::fmt::Debug for JoinToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JoinToken(K10{}::{}:[elided])", self.ca_hash, self.user)
    }
}

/// The hash a full token pins: SHA-256 of the CA certificate PEM, hex.
pub use k1s_api::join::ca_hash;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl JoinToken {
    /// The token for this server: `configured` (`--token`, full or short) or the one saved in
    /// `path`, or a new random one, saved to `path` (mode 0600) in its full form.
    pub fn load_or_create(
        path: &Path,
        configured: Option<&str>,
        ca_pem: &str,
    ) -> Result<Self, JoinTokenError> {
        let hash = ca_hash(ca_pem);
        let text = Self::resolve_text(path, configured)?;
        let token = Self::parse(&text, &hash)?;
        let io = |op, source| JoinTokenError::Io {
            op,
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io("create the directory of", e))?;
        }
        let mut f = tempfile::NamedTempFile::new_in(path.parent().unwrap_or(Path::new(".")))
            .map_err(|e| io("write", e))?;
        std::io::Write::write_all(&mut f, format!("{}\n", token.full()).as_bytes())
            .map_err(|e| io("write", e))?;
        f.as_file().sync_all().map_err(|e| io("write", e))?;
        f.persist(path).map_err(|e| io("write", e.error))?;
        Ok(token)
    }

    /// The token text this server goes by: `configured` (`--token`), else the one saved in
    /// `path`, else a new random password ([`JoinToken::load_or_create`] saves it).
    pub fn resolve_text(path: &Path, configured: Option<&str>) -> Result<String, JoinTokenError> {
        Ok(match configured {
            Some(t) => t.trim().to_owned(),
            None => match std::fs::read_to_string(path) {
                Ok(t) => t.trim().to_owned(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let mut secret = [0u8; 16];
                    rand::fill(&mut secret);
                    hex(&secret)
                }
                Err(source) => {
                    return Err(JoinTokenError::Io {
                        op: "read",
                        path: path.to_owned(),
                        source,
                    });
                }
            },
        })
    }

    /// The password of a full or short token, whatever CA it pins (what the cluster
    /// identity in the datastore is sealed with, so that both forms open it).
    pub fn password_of(text: &str) -> Result<String, JoinTokenError> {
        let pinned = text
            .trim()
            .strip_prefix("K10")
            .and_then(|rest| rest.split_once("::"))
            .map_or("", |(hash, _)| hash);
        Ok(Self::parse(text, pinned)?.password)
    }

    /// Parses a full or short token for a cluster whose CA hashes to `ca_hash`.
    pub fn parse(text: &str, ca_hash: &str) -> Result<Self, JoinTokenError> {
        let text = text.trim();
        let (hash, creds) = match text.strip_prefix("K10") {
            Some(rest) => {
                let (hash, creds) = rest.split_once("::").ok_or(JoinTokenError::Invalid(
                    "a K10 token needs '::' after the CA hash",
                ))?;
                if hash != ca_hash {
                    return Err(JoinTokenError::CaMismatch);
                }
                (hash, creds)
            }
            None => (ca_hash, text),
        };
        let (user, password) = creds.split_once(':').unwrap_or(("server", creds));
        if password.len() < 8 {
            return Err(JoinTokenError::Invalid(
                "the password must have at least 8 characters",
            ));
        }
        if password.contains(char::is_whitespace) || user.contains(char::is_whitespace) {
            return Err(JoinTokenError::Invalid(
                "the token may not contain white space",
            ));
        }
        Ok(Self {
            ca_hash: hash.to_owned(),
            user: user.to_owned(),
            password: password.to_owned(),
        })
    }

    /// The full form, as agents are given it.
    pub fn full(&self) -> String {
        format!("K10{}::{}:{}", self.ca_hash, self.user, self.password)
    }

    /// The bootstrap user, if `presented` is this token (full, `user:password`, or short).
    pub fn authenticate(&self, presented: &str) -> Option<UserInfo> {
        let creds = match presented.strip_prefix("K10") {
            Some(rest) => {
                let (hash, creds) = rest.split_once("::")?;
                if hash != self.ca_hash {
                    return None;
                }
                creds
            }
            None => presented,
        };
        let password = creds
            .split_once(':')
            .map_or(creds, |(u, p)| if u == self.user { p } else { "" });
        constant_time_eq(password.as_bytes(), self.password.as_bytes()).then(|| {
            UserInfo::new(
                AGENT_USER,
                ["system:bootstrappers".to_owned(), AGENT_GROUP.to_owned()],
            )
        })
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_of_either_form() {
        let hash = ca_hash("CA PEM");
        let full = JoinToken::parse("supersecret", &hash).unwrap().full();
        assert_eq!(JoinToken::password_of(&full).unwrap(), "supersecret");
        assert_eq!(
            JoinToken::password_of("supersecret").unwrap(),
            "supersecret"
        );
        assert_eq!(
            JoinToken::password_of("admin:supersecret").unwrap(),
            "supersecret"
        );
        assert!(JoinToken::password_of("short").is_err());
    }

    #[test]
    fn full_and_short_forms() {
        let hash = ca_hash("CA PEM");
        let t = JoinToken::parse("supersecret", &hash).unwrap();
        let full = t.full();
        assert!(full.starts_with("K10") && full.ends_with("::server:supersecret"));
        assert!(t.authenticate(&full).is_some());
        assert!(t.authenticate("supersecret").is_some());
        assert!(t.authenticate("server:supersecret").is_some());
        assert!(t.authenticate("supersecreT").is_none());
        assert!(t.authenticate("other:supersecret").is_none());
        let wrong_ca = full.replacen(&hash[..4], "ffff", 1);
        assert!(t.authenticate(&wrong_ca).is_none());
        let u = t.authenticate("supersecret").unwrap();
        assert_eq!(u.name, AGENT_USER);
        assert!(u.in_group("system:bootstrappers"));
    }

    #[test]
    fn bad_tokens() {
        let hash = ca_hash("CA PEM");
        assert!(matches!(
            JoinToken::parse("K10abc::server:longenough", &hash),
            Err(JoinTokenError::CaMismatch)
        ));
        assert!(JoinToken::parse("short", &hash).is_err());
        assert!(JoinToken::parse("K10nocolons", &hash).is_err());
    }

    #[test]
    fn created_once_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server/token");
        let a = JoinToken::load_or_create(&path, None, "CA").unwrap();
        let b = JoinToken::load_or_create(&path, None, "CA").unwrap();
        assert_eq!(a.full(), b.full());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
