//! A real local registry for integration tests, and a tiny busybox image to put in it.
//!
//! Uses Debian's `docker-registry` (distribution v2), `skopeo`, `umoci` and `busybox-static`,
//! installing them with apt-get when missing (tests run as root). When they cannot be had,
//! [`ensure_tools`] prints a visible `SKIP` line and returns `false`: the test should return.
//!
//! ```ignore
//! mod support;
//! use support::registry::{Registry, build_busybox_layout, ensure_tools, push};
//! if !ensure_tools() { return; }
//! let dir = tempfile::tempdir().unwrap();
//! let layout = build_busybox_layout(&dir.path().join("oci")).unwrap();
//! let registry = Registry::start(&dir.path().join("registry")).unwrap(); // killed on drop
//! push(&layout, "latest", &format!("{}/busybox:latest", registry.host())).unwrap();
//! // pull `registry.host()/busybox` with `registry.registries_yaml()` as registries.yaml
//! ```

#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOOLS: &[(&str, &str)] = &[
    ("docker-registry", "docker-registry"),
    ("skopeo", "skopeo"),
    ("umoci", "umoci"),
    ("busybox", "busybox-static"),
];

fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes sure the registry tools are installed; `false` (and a printed SKIP) if they are not
/// and cannot be.
pub fn ensure_tools() -> bool {
    let missing: Vec<&str> = TOOLS
        .iter()
        .filter(|(tool, _)| !have(tool))
        .map(|(_, pkg)| *pkg)
        .collect();
    if missing.is_empty() {
        return true;
    }
    if have("apt-get") {
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y \
                 --no-install-recommends {}",
                missing.join(" ")
            ))
            .stdout(Stdio::null())
            .status();
        if status.is_ok_and(|s| s.success()) && TOOLS.iter().all(|(tool, _)| have(tool)) {
            return true;
        }
    }
    println!(
        "SKIP: registry test tools missing and not installable with apt-get: {}",
        missing.join(", ")
    );
    eprintln!(
        "SKIP: registry test tools missing and not installable with apt-get: {}",
        missing.join(", ")
    );
    false
}

/// Runs `cmd`, failing with its stderr.
pub fn run(cmd: &mut Command) -> io::Result<String> {
    let out = cmd.stdin(Stdio::null()).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Builds an OCI layout at `layout` with one image, tag `latest`: a static busybox as
/// `/bin/busybox`, a symlink to it in `/bin` for each of its applets (`sh`, `tar` for
/// `kubectl cp`, `nc`, ...) and a `/tmp` as in the busybox image, and `cmd` `["/bin/sh"]`.
pub fn build_busybox_layout(layout: &Path) -> io::Result<PathBuf> {
    let parent = layout
        .parent()
        .ok_or_else(|| io::Error::other("layout needs a parent directory"))?;
    std::fs::create_dir_all(parent)?;
    let bundle = parent.join(format!(
        "{}-bundle",
        layout
            .file_name()
            .map_or("oci".into(), |n| n.to_string_lossy())
    ));
    let image = format!("{}:latest", layout.display());
    run(Command::new("umoci").args(["init", "--layout"]).arg(layout))?;
    run(Command::new("umoci").args(["new", "--image", &image]))?;
    run(Command::new("umoci")
        .args(["unpack", "--image", &image])
        .arg(&bundle))?;
    let bin = bundle.join("rootfs/bin");
    std::fs::create_dir_all(&bin)?;
    let tmp = bundle.join("rootfs/tmp");
    std::fs::create_dir_all(&tmp)?;
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o1777))?;
    let busybox = which("busybox")?;
    std::fs::copy(&busybox, bin.join("busybox"))?;
    let applets = run(Command::new(&busybox).arg("--list"))?;
    for applet in applets.lines().map(str::trim).filter(|a| !a.is_empty()) {
        if applet != "busybox" && !applet.contains('/') {
            std::os::unix::fs::symlink("busybox", bin.join(applet))?;
        }
    }
    if !bin.join("sh").exists() {
        std::os::unix::fs::symlink("busybox", bin.join("sh"))?;
    }
    run(Command::new("umoci")
        .args(["repack", "--image", &image])
        .arg(&bundle))?;
    run(Command::new("umoci").args(["config", "--image", &image, "--config.cmd", "/bin/sh"]))?;
    Ok(layout.to_path_buf())
}

fn which(tool: &str) -> io::Result<PathBuf> {
    let out = run(Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}")))?;
    Ok(PathBuf::from(out.trim()))
}

/// The manifest digest and layer digests of `tag` in an OCI layout.
pub fn layout_digests(layout: &Path, tag: &str) -> io::Result<(String, Vec<String>)> {
    let read_json = |p: PathBuf| -> io::Result<serde_json::Value> {
        serde_json::from_slice(&std::fs::read(&p)?).map_err(io::Error::other)
    };
    let index = read_json(layout.join("index.json"))?;
    let manifests = index["manifests"].as_array().cloned().unwrap_or_default();
    let desc = manifests
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag)
        .ok_or_else(|| io::Error::other(format!("no {tag} in {}", layout.display())))?;
    let digest = desc["digest"].as_str().unwrap_or_default().to_string();
    let hex = digest.trim_start_matches("sha256:");
    let manifest = read_json(layout.join("blobs/sha256").join(hex))?;
    let layers = manifest["layers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|l| l["digest"].as_str().unwrap_or_default().to_string())
        .collect();
    Ok((digest, layers))
}

/// Copies `layout:tag` to `docker://dest` over plain HTTP.
pub fn push(layout: &Path, tag: &str, dest: &str) -> io::Result<()> {
    run(Command::new("skopeo")
        .args(["--insecure-policy", "copy", "--dest-tls-verify=false"])
        .arg(format!("oci:{}:{tag}", layout.display()))
        .arg(format!("docker://{dest}")))?;
    Ok(())
}

/// Writes `layout:tag` as an airgap archive: `format` is skopeo's transport, `docker-archive`
/// (`docker save` format) or `oci-archive` (OCI layout tarball), tagged `name`.
pub fn save_archive(
    layout: &Path,
    tag: &str,
    format: &str,
    dest: &Path,
    name: &str,
) -> io::Result<()> {
    run(Command::new("skopeo")
        .args(["--insecure-policy", "copy"])
        .arg(format!("oci:{}:{tag}", layout.display()))
        .arg(format!("{format}:{}:{name}", dest.display())))?;
    Ok(())
}

/// A free TCP port on 127.0.0.1 (free when asked; good enough for tests).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A `docker-registry serve` process on 127.0.0.1, killed when dropped.
pub struct Registry {
    child: Option<Child>,
    pub port: u16,
    /// The registry's storage root (`rootdirectory`).
    pub storage: PathBuf,
    pub dir: PathBuf,
}

impl Registry {
    /// Starts a registry storing under `dir/storage` on a free port and waits until it answers.
    pub fn start(dir: &Path) -> io::Result<Self> {
        Self::start_on(dir, free_port()?)
    }

    /// Starts a registry on `port` (e.g. again on the same storage after [`Registry::stop`]).
    pub fn start_on(dir: &Path, port: u16) -> io::Result<Self> {
        let storage = dir.join("storage");
        std::fs::create_dir_all(&storage)?;
        let config = dir.join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
                storage.display()
            ),
        )?;
        let log = std::fs::File::create(dir.join("registry.log"))?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut registry = Self {
            child: Some(child),
            port,
            storage,
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if registry.answers() {
                return Ok(registry);
            }
            if let Some(child) = registry.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                let log = std::fs::read_to_string(dir.join("registry.log")).unwrap_or_default();
                return Err(io::Error::other(format!(
                    "docker-registry exited with {status}: {log}"
                )));
            }
            if Instant::now() > deadline {
                registry.stop();
                return Err(io::Error::other("docker-registry did not answer in 30s"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether `GET /v2/` answers 200.
    fn answers(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"GET /v2/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).contains(" 200 ")
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A `registries.yaml` that makes this registry plain HTTP (k3s semantics).
    pub fn registries_yaml(&self) -> String {
        format!(
            "mirrors:\n  \"{host}\":\n    endpoint:\n      - \"http://{host}\"\n",
            host = self.host()
        )
    }

    /// The file holding blob `digest` in the registry's storage.
    pub fn blob_data_path(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// Kills the registry and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}
