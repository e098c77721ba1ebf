//! `k1s secrets-encrypt`: look at and rotate the encryption-at-rest keys (k3s's command), and
//! the choice of the configuration file the server uses (`--encryption-provider-config`, or
//! the one `--secrets-encryption` generates under the data dir).
//!
//! These commands work on the file. A running server notices the change within seconds,
//! loads it and re-encrypts what is not under the new write key (see
//! `k1s_apiserver::encryption::sweep`); a restarted server does the same at start.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use k1s_apiserver::encryption::config::{self, EncryptionConfig};

#[derive(Args, Debug)]
pub struct SecretsEncryptArgs {
    /// The server's data directory (its generated configuration lives under it).
    #[arg(
        long,
        default_value = "/var/lib/k1s",
        env = "K1S_DATA_DIR",
        global = true
    )]
    pub data_dir: PathBuf,
    /// The EncryptionConfiguration file the server was given, if not the generated one.
    #[arg(long, global = true)]
    pub encryption_provider_config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: SecretsEncryptCommand,
}

#[derive(Subcommand, Debug)]
pub enum SecretsEncryptCommand {
    /// Show the configuration: resources, providers and keys in order, and which key writes.
    Status,
    /// Put a new random key first (it writes from now on); the old keys stay to read older
    /// values until the server has re-encrypted them.
    RotateKeys,
}

/// The configuration file the server uses: the explicit one, else with `--secrets-encryption`
/// the generated one (created on first use), else none.
pub fn server_config_path(
    data_dir: &Path,
    explicit: Option<&Path>,
    secrets_encryption: bool,
) -> anyhow::Result<Option<PathBuf>> {
    if let Some(p) = explicit {
        return Ok(Some(p.to_owned()));
    }
    if !secrets_encryption {
        return Ok(None);
    }
    let path = config::generated_path(data_dir);
    config::ensure_generated(&path).context("--secrets-encryption")?;
    Ok(Some(path))
}

pub fn run(args: SecretsEncryptArgs) -> anyhow::Result<()> {
    let path = match args.encryption_provider_config {
        Some(p) => p,
        None => config::generated_path(&args.data_dir),
    };
    if !path.exists() {
        anyhow::bail!(
            "{} does not exist: encryption at rest is not enabled (start the server with --secrets-encryption, or pass --encryption-provider-config FILE)",
            path.display()
        );
    }
    match args.command {
        SecretsEncryptCommand::Status => {
            let c = EncryptionConfig::load(&path)?;
            print!("{}", c.describe());
        }
        SecretsEncryptCommand::RotateKeys => {
            let r = config::rotate_keys(&path)?;
            println!(
                "Added key {} to {}; it encrypts new writes.",
                r.new_key,
                path.display()
            );
            for resources in &r.not_writing {
                println!(
                    "Note: the first provider for {resources} is not aesgcm, so those resources are still written unencrypted."
                );
            }
            println!(
                "A running server loads the file within seconds and re-encrypts stored objects under the new key (watch its log for \"re-encryption sweep done\"); the other servers of the cluster take the new key too. After that the old keys can be removed from the file (on one running server)."
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_uses_the_explicit_file_else_the_generated_one_when_enabled() {
        let dir = tempfile::tempdir().unwrap();
        let explicit = dir.path().join("mine.yaml");
        assert_eq!(
            server_config_path(dir.path(), Some(&explicit), true).unwrap(),
            Some(explicit)
        );
        assert_eq!(server_config_path(dir.path(), None, false).unwrap(), None);
        let generated = server_config_path(dir.path(), None, true).unwrap().unwrap();
        assert_eq!(generated, config::generated_path(dir.path()));
        assert!(EncryptionConfig::load(&generated).is_ok());
    }
}
