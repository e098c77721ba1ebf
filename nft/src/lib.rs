//! The nftables edge shared by the components that own a table of their own (the service
//! proxy's `ip k1s-proxy`, the network policy's `ip k1s-policy`): the typed ruleset and its
//! transactions ([`ruleset`]), and the edges that hand a transaction to the kernel
//! ([`Nft`]): [`NftNetlink`] compiles it to nf_tables netlink messages and sends them as one
//! batch ([`netlink`]); [`NftCommand`] runs Debian's `nft -f -`, as kube-proxy's nftables mode
//! does; [`FakeNft`] records transactions for tests.
//!
//! Transactions are written as `nft -f` text either way: it is what an operator reads with
//! `nft list table ip k1s-proxy`, what the golden tests compare, and one run of it is one
//! atomic kernel transaction. The netlink path compiles the part of the language k1s's
//! tables use (the service proxy's, whole) and hands anything else to `nft`: parsing and
//! cache loads in `nft` made a full sync of 10,000 Services take seconds, most of which the
//! compiled batch does not spend (docs/benchmarks.md, proxy).

pub mod netlink;
pub mod ruleset;
pub mod sysctl;
pub mod testing;

use std::process::Stdio;
use std::sync::Mutex;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

pub use netlink::NftNetlink;

/// Why a transaction was not applied.
#[derive(Debug, thiserror::Error)]
pub enum NftError {
    #[error(
        "the nft program is not installed: install Debian's nftables package (apt-get install nftables), or turn off what needs it (--disable-kube-proxy, --disable-network-policy)"
    )]
    Missing,
    #[error("nft: {0}")]
    Io(#[source] std::io::Error),
    #[error("nft rejected the transaction: {0}")]
    Rejected(String),
}

/// Applies nftables transactions.
#[async_trait::async_trait]
pub trait Nft: Send + Sync {
    /// Applies `script` (`nft -f` syntax) as one transaction.
    async fn apply(&self, script: &str) -> Result<(), NftError>;
    /// Deletes `family name` if it exists.
    async fn delete_table(&self, family: &str, name: &str) -> Result<(), NftError> {
        self.apply(&format!(
            "add table {family} {name}\ndelete table {family} {name}\n"
        ))
        .await
    }
}

/// The real one: Debian's `nft` (nftables ≥ 1.0) reading the transaction on stdin.
#[derive(Debug, Clone)]
pub struct NftCommand {
    /// The command line before `-f -`: `["nft"]`, or e.g. `["ip", "netns", "exec", "NS",
    /// "nft"]` to program another network namespace (tests).
    pub command: Vec<String>,
}

impl Default for NftCommand {
    fn default() -> Self {
        Self {
            command: vec!["nft".into()],
        }
    }
}

#[async_trait::async_trait]
impl Nft for NftCommand {
    async fn apply(&self, script: &str) -> Result<(), NftError> {
        let (program, prefix) = self.command.split_first().ok_or(NftError::Missing)?;
        let mut child = Command::new(program)
            .args(prefix)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => NftError::Missing,
                _ => NftError::Io(e),
            })?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(script.as_bytes())
                .await
                .map_err(NftError::Io)?;
        }
        let out = child.wait_with_output().await.map_err(NftError::Io)?;
        if out.status.success() {
            Ok(())
        } else {
            let text = String::from_utf8_lossy(&out.stderr);
            // nft prints the failing line and a caret: keep the first lines only.
            let msg: Vec<&str> = text.lines().take(6).collect();
            Err(NftError::Rejected(msg.join(" | ")))
        }
    }
}

/// Records every transaction; fails the next ones while `fail` is set.
#[derive(Debug, Default)]
pub struct FakeNft {
    pub applied: Mutex<Vec<String>>,
    pub fail: Mutex<Option<String>>,
}

impl FakeNft {
    pub fn transactions(&self) -> Vec<String> {
        self.applied
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

#[async_trait::async_trait]
impl Nft for FakeNft {
    async fn apply(&self, script: &str) -> Result<(), NftError> {
        if let Some(msg) = self
            .fail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
        {
            return Err(NftError::Rejected(msg));
        }
        self.applied
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(script.to_string());
        Ok(())
    }
}
