//! Container logs for `kubectl logs`: reads the CRI-format files the shims write
//! (`pod-logs/NS_NAME_UID/CONTAINER/ATTEMPT.log`, rotated as `.log.1`, `.log.2`, …), with
//! `--previous`, `--tail`, `--since`/`--since-time`, `--timestamps`, `--limit-bytes` and
//! `--follow` (which ends when the container does, as upstream); and the tail of a failed
//! container's log that `terminationMessagePolicy: FallbackToLogsOnError` reports.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k1s_api::client::ClientError;
use k1s_api::streams::{ByteStream, LogOptions};
use serde_json::Value;

use crate::config::Config;

pub(crate) fn bad_request(message: String) -> ClientError {
    ClientError {
        code: 400,
        reason: "BadRequest".into(),
        message,
    }
}

/// One parsed log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub time: String,
    pub stream: String,
    pub text: Vec<u8>,
}

/// Parses CRI log text, joining partial (`P`) records into their line.
pub fn parse(data: &[u8]) -> Vec<Line> {
    let mut out = Vec::new();
    let mut pending: Option<Line> = None;
    for raw in data.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let mut parts = raw.splitn(4, |b| *b == b' ');
        let (Some(ts), Some(stream), Some(tag)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let text = parts.next().unwrap_or(b"");
        let ts = String::from_utf8_lossy(ts).to_string();
        let stream = String::from_utf8_lossy(stream).to_string();
        let line = pending.get_or_insert_with(|| Line {
            time: ts,
            stream,
            text: Vec::new(),
        });
        line.text.extend_from_slice(text);
        if tag != b"P" {
            out.extend(pending.take());
        }
    }
    out.extend(pending);
    out
}

fn rfc3339(s: &str) -> Option<jiff::Timestamp> {
    k1s_api::time::parse(s)
}

/// Applies since/tail/timestamps/limit to parsed lines and renders them.
pub fn render(lines: &[Line], o: &LogOptions, now: jiff::Timestamp) -> Vec<u8> {
    let since = o.since_time.as_deref().and_then(rfc3339).or_else(|| {
        o.since_seconds
            .map(|s| now - jiff::SignedDuration::from_secs(s))
    });
    let mut kept: Vec<&Line> = lines
        .iter()
        .filter(|l| since.is_none_or(|s| rfc3339(&l.time).is_none_or(|t| t >= s)))
        .collect();
    if let Some(n) = o.tail_lines.filter(|n| *n >= 0) {
        let n = n as usize;
        if kept.len() > n {
            kept.drain(..kept.len() - n);
        }
    }
    let mut out = Vec::new();
    for l in kept {
        if o.timestamps {
            out.extend_from_slice(l.time.as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(&l.text);
        out.push(b'\n');
    }
    if let Some(limit) = o.limit_bytes.filter(|l| *l >= 0) {
        out.truncate(limit as usize);
    }
    out
}

/// Upstream's bounds on a termination message read from the log: its last 80 lines, at most
/// 2048 bytes of them.
const TERMINATION_LOG_LINES: usize = 80;
const TERMINATION_LOG_BYTES: usize = 2048;

/// The termination message of a container whose message file stayed empty, from its CRI log
/// text: the last 80 records, each as printed (a full record with its newline, a partial one
/// without), cut to their last 2048 bytes (upstream's `readLastStringFromContainerLogs`).
pub fn termination_tail(data: &[u8]) -> String {
    let records: Vec<&[u8]> = data
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let start = records.len().saturating_sub(TERMINATION_LOG_LINES);
    let mut out = Vec::new();
    for raw in &records[start..] {
        let mut parts = raw.splitn(4, |b| *b == b' ');
        let (Some(_), Some(_), Some(tag)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        out.extend_from_slice(parts.next().unwrap_or(b""));
        if tag != b"P" {
            out.push(b'\n');
        }
    }
    let cut = out.len().saturating_sub(TERMINATION_LOG_BYTES);
    String::from_utf8_lossy(&out[cut..]).into_owned()
}

/// [`termination_tail`] of the log at `path` and its rotated files.
pub fn termination_tail_of(path: &Path) -> String {
    let mut data = Vec::new();
    for f in files_of(path) {
        data.extend(std::fs::read(&f).unwrap_or_default());
    }
    termination_tail(&data)
}

/// The attempts whose logs are in `dir`, oldest first.
fn attempts(dir: &Path) -> Vec<i32> {
    let mut v: Vec<i32> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".log")?.parse().ok())
        .collect();
    v.sort();
    v
}

/// The rotated files of `path`, oldest first, then `path` itself.
fn files_of(path: &Path) -> Vec<PathBuf> {
    let mut rotated: Vec<(u32, PathBuf)> = (1..100)
        .map(|n| (n, PathBuf::from(format!("{}.{n}", path.display()))))
        .take_while(|(_, p)| p.exists())
        .collect();
    rotated.reverse();
    let mut out: Vec<PathBuf> = rotated.into_iter().map(|(_, p)| p).collect();
    out.push(path.to_path_buf());
    out
}

/// The log of a container of `pod` (the Pod object as stored), as `kubectl logs` asks.
pub async fn read(config: &Config, pod: &Value, o: &LogOptions) -> Result<ByteStream, ClientError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let uid = crate::pod::static_pods::runtime_uid(pod);
    let names = |key: &str| -> Vec<String> {
        pod["spec"][key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(String::from))
            .collect()
    };
    let (main, init) = (names("containers"), names("initContainers"));
    let container = match &o.container {
        Some(c) => c.clone(),
        None if main.len() == 1 => main[0].clone(),
        None => {
            return Err(bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                main.join(" ")
            )));
        }
    };
    let is_init = init.contains(&container);
    if !is_init && !main.contains(&container) {
        return Err(bad_request(format!(
            "container {container} is not valid for pod {name}"
        )));
    }
    let dir = config.container_logs_dir(ns, name, uid, &container);
    let attempts = attempts(&dir);
    let attempt = if o.previous {
        match attempts.len() {
            0 | 1 => {
                return Err(bad_request(format!(
                    "previous terminated container \"{container}\" in pod \"{name}\" not found"
                )));
            }
            n => attempts[n - 2],
        }
    } else {
        match attempts.last() {
            Some(a) => *a,
            None => {
                return Err(bad_request(format!(
                    "container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating"
                )));
            }
        }
    };
    let path = dir.join(format!("{attempt}.log"));
    let mut data = Vec::new();
    for f in files_of(&path) {
        data.extend(std::fs::read(&f).unwrap_or_default());
    }
    let now = jiff::Timestamp::now();
    let first = render(&parse(&data), o, now);
    if !o.follow || o.previous {
        return Ok(Box::pin(futures::stream::iter([first])));
    }
    // Follow: poll the file for growth until the container exits.
    let exit = config
        .bundle_dir(uid, is_init, &container, attempt)
        .join(crate::runtime::spec::EXIT);
    let start = std::fs::metadata(&path).map_or(0, |m| m.len());
    let follow_opts = LogOptions {
        tail_lines: None,
        since_seconds: None,
        since_time: None,
        limit_bytes: None,
        ..o.clone()
    };
    struct Follow {
        path: PathBuf,
        exit: PathBuf,
        offset: u64,
        opts: LogOptions,
    }
    let state = Follow {
        path,
        exit,
        offset: start,
        opts: follow_opts,
    };
    let rest = futures::stream::unfold(state, |mut s| async move {
        loop {
            let finished = s.exit.exists();
            let len = std::fs::metadata(&s.path).map_or(0, |m| m.len());
            if len < s.offset {
                // Rotated: start over on the new file.
                s.offset = 0;
            }
            if len > s.offset {
                use std::io::{Read, Seek, SeekFrom};
                let mut buf = Vec::new();
                if let Ok(mut f) = std::fs::File::open(&s.path) {
                    let _ = f.seek(SeekFrom::Start(s.offset));
                    let _ = f.read_to_end(&mut buf);
                }
                // Only whole lines; the rest comes with the next read.
                let whole = buf.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
                if whole > 0 {
                    s.offset += whole as u64;
                    let out = render(&parse(&buf[..whole]), &s.opts, jiff::Timestamp::now());
                    return Some((out, s));
                }
            }
            if finished {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let first = futures::stream::once(async move { first });
    Ok(Box::pin(futures::StreamExt::chain(first, rest)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "2026-11-22T10:00:00.1Z stdout F one\n2026-11-22T10:00:01.5Z stderr P par\n2026-11-22T10:00:01.6Z stderr F tial\n2026-11-22T10:00:05Z stdout F three\n";

    #[test]
    fn parse_joins_partials() {
        let l = parse(LOG.as_bytes());
        assert_eq!(l.len(), 3);
        assert_eq!(l[1].text, b"partial");
        assert_eq!(l[1].stream, "stderr");
    }

    #[test]
    fn render_options() {
        let lines = parse(LOG.as_bytes());
        let now = rfc3339("2026-11-22T10:00:06Z").unwrap();
        let all = LogOptions::default();
        assert_eq!(render(&lines, &all, now), b"one\npartial\nthree\n");
        let tail = LogOptions {
            tail_lines: Some(1),
            ..Default::default()
        };
        assert_eq!(render(&lines, &tail, now), b"three\n");
        let since = LogOptions {
            since_seconds: Some(3),
            ..Default::default()
        };
        assert_eq!(render(&lines, &since, now), b"three\n");
        let ts = LogOptions {
            timestamps: true,
            tail_lines: Some(1),
            ..Default::default()
        };
        assert_eq!(render(&lines, &ts, now), b"2026-11-22T10:00:05Z three\n");
        let lim = LogOptions {
            limit_bytes: Some(5),
            ..Default::default()
        };
        assert_eq!(render(&lines, &lim, now), b"one\np");
    }

    #[test]
    fn termination_tail_keeps_80_lines_and_2048_bytes() {
        // `echo -n DONE; false`: the partial record without a newline.
        let log = b"2026-11-22T10:00:00Z stdout P DONE\n";
        assert_eq!(termination_tail(log), "DONE");
        assert_eq!(termination_tail(LOG.as_bytes()), "one\npartial\nthree\n");
        let many: String = (0..100)
            .map(|i| format!("2026-11-22T10:00:00Z stdout F line {i}\n"))
            .collect();
        let tail = termination_tail(many.as_bytes());
        assert!(tail.starts_with("line 20\n"), "{tail}");
        assert!(tail.ends_with("line 99\n"));
        let long = format!("2026-11-22T10:00:00Z stderr F {}\n", "x".repeat(5000));
        assert_eq!(termination_tail(long.as_bytes()).len(), 2048);
        assert_eq!(termination_tail(b""), "");
    }
}
