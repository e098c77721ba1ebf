//! Parsing an image config blob (OCI `application/vnd.oci.image.config.v1+json` or Docker's
//! `application/vnd.docker.container.image.v1+json`, the same JSON) into what the runtime uses
//! and the layers' `diff_id`s.

use serde::Deserialize;

use super::ImageConfig;
use super::digest::sha256_hex;

/// A parsed image config blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedConfig {
    pub config: ImageConfig,
    /// Uncompressed layer digests, lowest first.
    pub diff_ids: Vec<String>,
    pub os: String,
    pub architecture: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct File {
    config: Option<Config>,
    rootfs: Option<RootFs>,
    os: String,
    architecture: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Config {
    #[serde(rename = "Entrypoint")]
    entrypoint: Option<Vec<String>>,
    #[serde(rename = "Cmd")]
    cmd: Option<Vec<String>>,
    #[serde(rename = "Env")]
    env: Option<Vec<String>>,
    #[serde(rename = "WorkingDir")]
    working_dir: Option<String>,
    #[serde(rename = "User")]
    user: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RootFs {
    diff_ids: Vec<String>,
}

/// Why an image config blob is refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not JSON, or not of the config's shape.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("not a JSON object")]
    NotAnObject,
    #[error("unsupported diff_id {0:?}")]
    DiffId(String),
}

/// Parses an image config blob.
pub fn parse(data: &[u8]) -> Result<ParsedConfig, ConfigError> {
    let value: serde_json::Value = serde_json::from_slice(data)?;
    if !value.is_object() {
        return Err(ConfigError::NotAnObject);
    }
    let file: File = serde_json::from_value(value)?;
    let c = file.config.unwrap_or_default();
    let diff_ids = file.rootfs.map(|r| r.diff_ids).unwrap_or_default();
    if let Some(bad) = diff_ids.iter().find(|d| sha256_hex(d).is_none()) {
        return Err(ConfigError::DiffId(bad.clone()));
    }
    Ok(ParsedConfig {
        config: ImageConfig {
            entrypoint: c.entrypoint.unwrap_or_default(),
            cmd: c.cmd.unwrap_or_default(),
            env: c.env.unwrap_or_default(),
            working_dir: c.working_dir.filter(|w| !w.is_empty()),
            user: c.user.filter(|u| !u.is_empty()),
        },
        diff_ids,
        os: file.os,
        architecture: file.architecture,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_config() {
        let d = format!("sha256:{}", "a".repeat(64));
        let json = format!(
            r#"{{"architecture":"amd64","os":"linux",
               "config":{{"Env":["PATH=/bin"],"Cmd":["/bin/sh"],"Entrypoint":null,
                          "WorkingDir":"","User":"1000:1000"}},
               "rootfs":{{"type":"layers","diff_ids":["{d}"]}}}}"#
        );
        let p = parse(json.as_bytes()).unwrap();
        assert_eq!(p.config.cmd, vec!["/bin/sh"]);
        assert!(p.config.entrypoint.is_empty());
        assert_eq!(p.config.working_dir, None);
        assert_eq!(p.config.user.as_deref(), Some("1000:1000"));
        assert_eq!(p.diff_ids, vec![d]);
        assert_eq!((p.os.as_str(), p.architecture.as_str()), ("linux", "amd64"));
        let e = parse(br#"{"rootfs":{"diff_ids":["md5:x"]}}"#).unwrap_err();
        assert!(matches!(e, ConfigError::DiffId(_)), "{e:?}");
        assert_eq!(e.to_string(), "unsupported diff_id \"md5:x\"");
        let e = parse(b"[]").unwrap_err();
        assert!(matches!(e, ConfigError::NotAnObject), "{e:?}");
        assert_eq!(e.to_string(), "not a JSON object");
        assert!(matches!(parse(b"{").unwrap_err(), ConfigError::Json(_)));
    }
}
