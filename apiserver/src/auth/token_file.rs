//! `--token-auth-file`: static bearer tokens, one per line as kube-apiserver reads them:
//! `token,user,uid[,"group1,group2"]`. Blank lines and lines starting with `#` are skipped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::UserInfo;

/// Why the token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("cannot read the token file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: {reason} (expected token,user,uid[,\"group1,group2\"])", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        #[source]
        reason: LineError,
    },
}

/// What is wrong with one line of the token file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("a quote in the middle of an unquoted field")]
    StrayQuote,
    #[error("unterminated quoted field")]
    Unterminated,
    #[error("{0} fields, at least 3 needed")]
    TooFewFields(usize),
    #[error("the token and the user may not be empty")]
    Empty,
}

/// The tokens of a token file.
pub struct TokenFile {
    users: HashMap<String, UserInfo>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves.
        write!(f, "TokenFile({} tokens)", self.users.len())
    }
}

impl TokenFile {
    pub fn load(path: &Path) -> Result<Self, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|(line, reason)| TokenFileError::Line {
            path: path.to_owned(),
            line,
            reason,
        })
    }

    /// Parses the file's text; errors carry the 1-based line number.
    pub fn parse(text: &str) -> Result<Self, (usize, LineError)> {
        let mut users = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields = split_csv(line).map_err(|e| (i + 1, e))?;
            if fields.len() < 3 {
                return Err((i + 1, LineError::TooFewFields(fields.len())));
            }
            let (token, name, uid) = (&fields[0], &fields[1], &fields[2]);
            if token.is_empty() || name.is_empty() {
                return Err((i + 1, LineError::Empty));
            }
            let groups = fields
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            let mut user = UserInfo::new(name.clone(), groups);
            user.uid = uid.clone();
            if users.insert(token.clone(), user).is_some() {
                tracing::warn!(
                    line = i + 1,
                    "duplicate token in the token file; the last wins"
                );
            }
        }
        Ok(Self { users })
    }

    pub fn lookup(&self, token: &str) -> Option<UserInfo> {
        self.users.get(token).cloned()
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// Splits one CSV line: fields separated by commas, optionally double-quoted (`""` inside a
/// quoted field is a quote).
fn split_csv(line: &str) -> Result<Vec<String>, LineError> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', false) if cur.is_empty() && !was_quoted => {
                quoted = true;
                was_quoted = true;
            }
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', true) => quoted = false,
            (',', false) => {
                fields.push(std::mem::take(&mut cur).trim().to_owned());
                was_quoted = false;
            }
            ('"', false) => return Err(LineError::StrayQuote),
            (c, _) => cur.push(c),
        }
    }
    if quoted {
        return Err(LineError::Unterminated);
    }
    fields.push(cur.trim().to_owned());
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_upstream_format() {
        let f =
            TokenFile::parse("# comment\n\ns3cr3t,alice,1001,\"dev,ops\"\nt2,bob,1002\n").unwrap();
        let a = f.lookup("s3cr3t").unwrap();
        assert_eq!(a.name, "alice");
        assert_eq!(a.uid, "1001");
        assert_eq!(a.groups, ["dev", "ops", "system:authenticated"]);
        assert_eq!(f.lookup("t2").unwrap().groups, ["system:authenticated"]);
        assert!(f.lookup("nope").is_none());
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn bad_lines_name_their_number() {
        for (text, line, reason, message) in [
            (
                "a,b\n",
                1,
                LineError::TooFewFields(2),
                "2 fields, at least 3 needed",
            ),
            (
                "ok,u,1\n\"unterminated,u,1\n",
                2,
                LineError::Unterminated,
                "unterminated quoted field",
            ),
            (
                ",u,1\n",
                1,
                LineError::Empty,
                "the token and the user may not be empty",
            ),
            (
                "t,u\"x,1\n",
                1,
                LineError::StrayQuote,
                "a quote in the middle of an unquoted field",
            ),
        ] {
            let err = TokenFile::parse(text).err().unwrap();
            assert_eq!(err.0, line, "{text:?}: {}", err.1);
            assert_eq!((&err.1, err.1.to_string().as_str()), (&reason, message));
        }
        let e = TokenFileError::Line {
            path: "/etc/tokens.csv".into(),
            line: 3,
            reason: LineError::Empty,
        };
        assert_eq!(
            e.to_string(),
            "/etc/tokens.csv:3: the token and the user may not be empty (expected token,user,uid[,\"group1,group2\"])"
        );
    }
}
