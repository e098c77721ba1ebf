//! nf_tables over netlink, without the `nft` program: a transaction's text is compiled
//! ([`compile`], [`encode`]) to the messages nft would send and applied as one batch
//! ([`socket`]), so a full sync of a large table costs what the kernel spends on it, not
//! nft's parsing and cache loads (docs/benchmarks.md, proxy).
//!
//! [`NftNetlink`] implements [`Nft`]: text the compiler covers goes to the kernel directly;
//! anything else (interval sets, anonymous sets, counters: the network policy's table) is
//! handed to `nft -f -` unchanged. Either way one script is one atomic transaction.

pub mod compile;
pub mod encode;
pub mod expr;
pub mod socket;
pub mod wire;

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Nft, NftCommand, NftError};

/// Applies transactions over netlink, falling back to `nft` for what it does not compile.
#[derive(Debug)]
pub struct NftNetlink {
    /// The network namespace to program (a file such as `/run/netns/NAME`); `None`: this
    /// process's.
    pub netns: Option<PathBuf>,
    /// Where text the compiler does not cover goes.
    pub fallback: NftCommand,
    seq: AtomicU32,
    /// The sets the applied transactions declared: how their elements are written.
    layouts: Mutex<compile::Layouts>,
    /// The socket, kept between transactions (closing a netlink socket waits for an RCU
    /// grace period: milliseconds per sync); dropped after any error.
    socket: Mutex<Option<OwnedFd>>,
}

impl Default for NftNetlink {
    fn default() -> Self {
        Self::new(None, NftCommand::default())
    }
}

impl NftNetlink {
    pub fn new(netns: Option<PathBuf>, fallback: NftCommand) -> Self {
        Self {
            netns,
            fallback,
            seq: AtomicU32::new(0x6b31_0000),
            layouts: Mutex::new(compile::Layouts::new()),
            socket: Mutex::new(None),
        }
    }

    fn layouts(&self) -> std::sync::MutexGuard<'_, compile::Layouts> {
        self.layouts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What became of a script handed to the netlink path.
enum Outcome {
    /// Applied (or refused by the kernel); the layouts to keep if applied, and the socket if
    /// it is still good to use.
    Sent(Result<compile::Layouts, NftError>, Option<OwnedFd>),
    Unsupported(String, compile::Unsupported, Option<OwnedFd>),
}

/// Compiles and applies `script` (blocking: the kernel works inside `sendmsg`) on `fd`, or
/// on a socket opened in `netns`.
fn compile_and_send(
    netns: Option<PathBuf>,
    fd: Option<OwnedFd>,
    script: String,
    mut layouts: compile::Layouts,
    base: u32,
) -> Outcome {
    let started = std::time::Instant::now();
    let lines = match compile::parse(&script, &mut layouts) {
        Ok(lines) => lines,
        Err(why) => return Outcome::Unsupported(script, why, fd),
    };
    let fd = match fd {
        Some(fd) => fd,
        None => match socket::open(netns.as_deref()) {
            Ok(fd) => fd,
            Err(e) => {
                let e = match e.raw_os_error() {
                    Some(libc::EPROTONOSUPPORT) => NftError::Rejected(
                        "the kernel has no nfnetlink (CONFIG_NETFILTER_NETLINK): nftables cannot be used on this host".into(),
                    ),
                    _ => NftError::Io(e),
                };
                return Outcome::Sent(Err(e), None);
            }
        },
    };
    match send(&fd, &script, &lines, base, started) {
        Ok(()) => Outcome::Sent(Ok(layouts), Some(fd)),
        // The kernel refused the batch: the socket read everything up to the probe.
        Err(e @ NftError::Rejected(_)) => Outcome::Sent(Err(e), Some(fd)),
        Err(e) => Outcome::Sent(Err(e), None),
    }
}

fn send(
    fd: &OwnedFd,
    script: &str,
    lines: &[compile::Line],
    base: u32,
    started: std::time::Instant,
) -> Result<(), NftError> {
    let parsed = started.elapsed();
    let batch = encode::encode(lines, base);
    if batch.is_empty() {
        return Ok(());
    }
    let (bytes, origins, last) = batch.end();
    let encoded = started.elapsed();
    let errors = socket::exchange(fd, &bytes, last.wrapping_add(1)).map_err(NftError::Io)?;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    tracing::debug!(
        commands = lines.len(),
        bytes = bytes.len(),
        parse_ms = ms(parsed),
        encode_ms = ms(encoded - parsed),
        kernel_ms = ms(started.elapsed() - encoded),
        errors = errors.len(),
        "transaction sent over netlink"
    );
    let Some((errno, seq, message)) = errors.first() else {
        return Ok(());
    };
    let errno = std::io::Error::from_raw_os_error(-errno);
    let what = origins
        .iter()
        .find(|(s, _)| s == seq)
        .and_then(|(_, line)| script.lines().nth(*line))
        .map(str::trim);
    let detail = message
        .as_deref()
        .map(|m| format!(" ({m})"))
        .unwrap_or_default();
    let more = if errors.len() > 1 {
        format!("; {} more errors", errors.len() - 1)
    } else {
        String::new()
    };
    Err(NftError::Rejected(match what {
        Some(text) => format!("{text}: {errno}{detail}{more}"),
        // The batch itself: the commit, or nf_tables missing from the kernel.
        None if errno.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            "the kernel has no nf_tables (modprobe nf_tables)".to_string()
        }
        None => format!("the transaction: {errno}{detail}{more}"),
    }))
}

#[async_trait::async_trait]
impl Nft for NftNetlink {
    async fn apply(&self, script: &str) -> Result<(), NftError> {
        // Sequence numbers only need to differ between exchanges: each batch gets a range of
        // its own (a message per line at most, and the closing probe).
        let span = (script.len() as u32 / 8).saturating_add(1 << 10);
        let base = self.seq.fetch_add(span, Ordering::Relaxed);
        let layouts = self.layouts().clone();
        let fd = self
            .socket
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let (netns, owned) = (self.netns.clone(), script.to_string());
        let outcome =
            tokio::task::spawn_blocking(move || compile_and_send(netns, fd, owned, layouts, base))
                .await
                .map_err(|e| NftError::Io(std::io::Error::other(e)))?;
        let keep = |fd: Option<OwnedFd>| {
            *self
                .socket
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = fd;
        };
        match outcome {
            Outcome::Sent(result, fd) => {
                keep(fd);
                *self.layouts() = result?;
                Ok(())
            }
            Outcome::Unsupported(script, why, fd) => {
                keep(fd);
                tracing::debug!(%why, "applying the transaction with nft");
                // What nft does to the table is not followed here: forget every layout, so
                // that later elements of those sets go to nft too until they are redeclared.
                self.layouts().clear();
                self.fallback.apply(&script).await
            }
        }
    }
}
