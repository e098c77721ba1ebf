//! The kubelet's side of the streaming subresources of pods (`log`, `exec`, `attach`,
//! `portforward`): [`KubeletStreams`], the in-process [`NodeStreams`] the API server calls for
//! pods of this node. It finds the container (as upstream picks and validates it) and its
//! current bundle, and hands the session to the [`Runtime`]; logs are read by
//! [`crate::server::logs`]; port-forward connections are opened here, from a thread inside the pod's
//! network namespace.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use k1s_api::client::ClientError;
use k1s_api::streams::{
    ByteStream, Duplex, LogOptions, NodeStreams, ProxyResponse, StreamIo, StreamOptions,
};
use serde_json::Value;

use crate::config::Config;
use crate::runtime::{Runtime, RuntimeError};
use crate::server::logs::bad_request;

/// An error the kubelet answers with 500, as upstream's streaming server does for anything
/// that is not a gRPC NotFound.
fn internal(message: String) -> ClientError {
    ClientError {
        code: 500,
        reason: "InternalError".into(),
        message,
    }
}

/// The kubelet's side of the streaming subresources, for the pods of this node.
pub struct KubeletStreams {
    config: Arc<Config>,
    runtime: Arc<dyn Runtime>,
    /// The plain requests of `nodes/NAME/proxy/...`; without it they answer 503.
    node_api: Option<crate::server::node_api::NodeApi>,
}

/// A container of a pod, as a session needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub name: String,
    pub init: bool,
    /// `stdin`, `stdinOnce` and `tty` of the container's spec.
    pub stdin: bool,
    pub tty: bool,
}

/// Picks the container of `pod` a session is for, as upstream's `validateContainer`: the
/// only container when none is named, else a named (init or app) container.
pub fn pick_container(pod: &Value, container: Option<&str>) -> Result<Target, ClientError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let list =
        |key: &str| -> Vec<Value> { pod["spec"][key].as_array().cloned().unwrap_or_default() };
    let (main, init) = (list("containers"), list("initContainers"));
    let target = |c: &Value, init: bool| Target {
        name: c["name"].as_str().unwrap_or_default().to_string(),
        init,
        stdin: c["stdin"].as_bool().unwrap_or(false),
        tty: c["tty"].as_bool().unwrap_or(false),
    };
    match container.filter(|c| !c.is_empty()) {
        None => match main.len() {
            1 => Ok(target(&main[0], false)),
            0 => Err(bad_request(format!(
                "a container name must be specified for pod {name}"
            ))),
            _ => {
                let names: Vec<&str> = init
                    .iter()
                    .chain(main.iter())
                    .filter_map(|c| c["name"].as_str())
                    .collect();
                Err(bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    names.join(" ")
                )))
            }
        },
        Some(want) => {
            if let Some(c) = main.iter().find(|c| c["name"] == want) {
                Ok(target(c, false))
            } else if let Some(c) = init.iter().find(|c| c["name"] == want) {
                Ok(target(c, true))
            } else {
                Err(bad_request(format!(
                    "container {want} is not valid for pod {name}"
                )))
            }
        }
    }
}

/// The newest attempt's bundle under `dir` (`containers/main-NAME`), if any.
fn latest_bundle(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<i32>().ok()?, e.path())))
        .max_by_key(|(n, _)| *n)
        .map(|(_, p)| p)
}

impl KubeletStreams {
    pub fn new(config: Arc<Config>, runtime: Arc<dyn Runtime>) -> Self {
        Self {
            config,
            runtime,
            node_api: None,
        }
    }

    /// Serves the kubelet's plain HTTP API ([`crate::server::node_api`]) too.
    pub fn with_node_api(mut self, api: crate::server::node_api::NodeApi) -> Self {
        self.node_api = Some(api);
        self
    }

    /// The bundle of the running instance of `target`, or upstream's "container not found".
    fn running_bundle(&self, pod: &Value, target: &Target) -> Result<PathBuf, ClientError> {
        let uid = crate::pod::static_pods::runtime_uid(pod);
        let not_found = || internal(format!("container not found ({:?})", target.name));
        if uid.is_empty() || uid.contains('/') || uid.contains("..") {
            return Err(not_found());
        }
        let any = self.config.bundle_dir(uid, target.init, &target.name, 0);
        let dir = any.parent().ok_or_else(not_found)?;
        let bundle = latest_bundle(dir).ok_or_else(not_found)?;
        if self.runtime.state(&bundle).is_none() || self.runtime.exit(&bundle).is_some() {
            return Err(not_found());
        }
        Ok(bundle)
    }
}

fn runtime_error(e: RuntimeError) -> ClientError {
    internal(e.to_string())
}

#[async_trait::async_trait]
impl NodeStreams for KubeletStreams {
    fn node_name(&self) -> &str {
        &self.config.node_name
    }

    async fn logs(&self, pod: &Value, options: &LogOptions) -> Result<ByteStream, ClientError> {
        crate::server::logs::read(&self.config, pod, options).await
    }

    async fn exec(
        &self,
        pod: &Value,
        options: &StreamOptions,
        io: StreamIo,
    ) -> Result<i32, ClientError> {
        if options.command.is_empty() {
            return Err(bad_request("you must specify at least 1 command".into()));
        }
        let target = pick_container(pod, options.container.as_deref())?;
        let bundle = self.running_bundle(pod, &target)?;
        tracing::debug!(container = %target.name, bundle = %bundle.display(), "exec");
        self.runtime
            .exec(&bundle, &options.command, options.tty, io)
            .await
            .map_err(runtime_error)
    }

    async fn attach(
        &self,
        pod: &Value,
        options: &StreamOptions,
        mut io: StreamIo,
    ) -> Result<i32, ClientError> {
        let target = pick_container(pod, options.container.as_deref())?;
        let bundle = self.running_bundle(pod, &target)?;
        // Stdin reaches only a container started with one; a terminal only one with a tty
        // (its output is then one stream).
        if !target.stdin {
            io.stdin = None;
        }
        if !target.tty {
            io.resize = None;
        }
        self.runtime
            .attach(&bundle, io)
            .await
            .map_err(runtime_error)
    }

    async fn port_forward(&self, pod: &Value, port: u16) -> Result<Box<dyn Duplex>, ClientError> {
        let uid = crate::pod::static_pods::runtime_uid(pod);
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        if port == 0 {
            return Err(bad_request(format!("invalid port {port}")));
        }
        let host_network = pod["spec"]["hostNetwork"].as_bool().unwrap_or(false);
        let netns = if host_network {
            None
        } else {
            if uid.is_empty() || uid.contains('/') || uid.contains("..") {
                return Err(internal(format!(
                    "pod {name:?} has no sandbox on this node"
                )));
            }
            let path = self.config.pods_dir().join(uid).join("ns").join("net");
            if !crate::runtime::nsfile::is_bound(&path) {
                return Err(internal(format!(
                    "failed to find sandbox for pod {name:?}: its network namespace is gone"
                )));
            }
            Some(path)
        };
        let stream = connect_in(netns.clone(), port).await.map_err(|e| {
            internal(format!(
                "failed to connect to localhost:{port} inside namespace {:?}, IPv4: dial tcp4 127.0.0.1:{port}: connect: {}",
                netns.as_deref().map_or("host".into(), |p| p.display().to_string()),
                go_error_text(&e)
            ))
        })?;
        Ok(Box::new(stream))
    }

    async fn proxy(
        &self,
        method: &str,
        path: &str,
        query: Option<&str>,
    ) -> Result<ProxyResponse, ClientError> {
        match &self.node_api {
            Some(api) => api.handle(&self.config, method, path, query).await,
            None => Err(k1s_api::streams::not_served(&self.config.node_name, path)),
        }
    }
}

/// An OS error as Go prints it (`connection refused`).
fn go_error_text(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            let desc = nix::errno::Errno::from_raw(n).desc();
            let mut c = desc.chars();
            match c.next() {
                Some(f) => f.to_lowercase().chain(c).collect(),
                None => String::new(),
            }
        }
        None => e.to_string(),
    }
}

/// Connects to 127.0.0.1:`port` inside the network namespace `netns` (the host's when
/// `None`), from a thread of its own that joins the namespace and ends right after: a
/// socket keeps the namespace it was created in.
pub async fn connect_in(
    netns: Option<PathBuf>,
    port: u16,
) -> std::io::Result<tokio::net::TcpStream> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("k1s-portforward".into())
        .spawn(move || {
            let r = (|| -> std::io::Result<std::net::TcpStream> {
                if let Some(ns) = &netns {
                    let f = std::fs::File::open(ns)?;
                    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET)
                        .map_err(std::io::Error::from)?;
                }
                let s = std::net::TcpStream::connect(("127.0.0.1", port))?;
                s.set_nonblocking(true)?;
                Ok(s)
            })();
            let _ = tx.send(r);
        })?;
    let s = rx
        .await
        .map_err(|_| std::io::Error::other("the port-forward thread died"))??;
    tokio::net::TcpStream::from_std(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
            "spec": {
                "initContainers": [{"name": "setup"}],
                "containers": [{"name": "a", "stdin": true, "tty": true}, {"name": "b"}]
            }
        })
    }

    #[test]
    fn containers_are_picked_as_upstream() {
        let p = pod();
        let err = pick_container(&p, None).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "a container name must be specified for pod p, choose one of: [setup a b]"
        );
        let a = pick_container(&p, Some("a")).unwrap();
        assert!(a.stdin && a.tty && !a.init);
        assert!(pick_container(&p, Some("setup")).unwrap().init);
        let err = pick_container(&p, Some("zz")).unwrap_err();
        assert_eq!(err.message, "container zz is not valid for pod p");
        let one = json!({"metadata": {"name": "q"}, "spec": {"containers": [{"name": "only"}]}});
        assert_eq!(pick_container(&one, None).unwrap().name, "only");
        assert_eq!(pick_container(&one, Some("")).unwrap().name, "only");
    }

    #[test]
    fn the_newest_attempt_is_the_bundle() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(latest_bundle(d.path()), None);
        for n in ["0", "2", "10", "junk"] {
            std::fs::create_dir(d.path().join(n)).unwrap();
        }
        assert_eq!(latest_bundle(d.path()), Some(d.path().join("10")));
    }

    #[test]
    fn errors_read_as_go_prints_them() {
        let e = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(go_error_text(&e), "connection refused");
    }

    #[tokio::test]
    async fn exec_into_a_missing_or_stopped_container_is_not_found() {
        let d = tempfile::tempdir().unwrap();
        let config = Arc::new(Config::new(
            "n",
            d.path().to_path_buf(),
            "127.0.0.1".parse().unwrap(),
        ));
        let runtime = Arc::new(crate::runtime::fake::FakeRuntime::default());
        let streams = KubeletStreams::new(config.clone(), runtime.clone());
        let p = pod();
        let opts = StreamOptions {
            container: Some("b".into()),
            command: vec!["ls".into()],
            stdout: true,
            ..Default::default()
        };
        let err = streams
            .exec(&p, &opts, StreamIo::default())
            .await
            .unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (500, "container not found (\"b\")")
        );
        // Started, then ended: still not found.
        let bundle = config.bundle_dir("u1", false, "b", 0);
        std::fs::create_dir_all(&bundle).unwrap();
        runtime
            .start(&bundle, &crate::runtime::spec::ContainerSpec::default())
            .await
            .unwrap();
        runtime.script_exec("ls", 3, b"out");
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let io = StreamIo {
            stdout: Some(tx),
            ..Default::default()
        };
        assert_eq!(streams.exec(&p, &opts, io).await.unwrap(), 3);
        assert_eq!(rx.recv().await.unwrap(), b"out");
        runtime.finish(&bundle, 0);
        let err = streams
            .exec(&p, &opts, StreamIo::default())
            .await
            .unwrap_err();
        assert_eq!(err.message, "container not found (\"b\")");
        let none = StreamOptions {
            command: vec![],
            ..opts
        };
        assert_eq!(
            streams
                .exec(&p, &none, StreamIo::default())
                .await
                .unwrap_err()
                .code,
            400
        );
    }

    #[tokio::test]
    async fn port_forward_reaches_the_host_for_host_network_pods() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let d = tempfile::tempdir().unwrap();
        let config = Arc::new(Config::new(
            "n",
            d.path().to_path_buf(),
            "127.0.0.1".parse().unwrap(),
        ));
        let streams = KubeletStreams::new(
            config,
            Arc::new(crate::runtime::fake::FakeRuntime::default()),
        );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let hostnet =
            json!({"metadata": {"name": "h", "uid": "u2"}, "spec": {"hostNetwork": true}});
        let mut c = streams.port_forward(&hostnet, port).await.unwrap();
        let (mut s, _) = l.accept().await.unwrap();
        c.write_all(b"ping").await.unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"ping");
        drop(l);
        drop(s);
        // Nothing listens any more.
        let err = match streams.port_forward(&hostnet, port).await {
            Err(e) => e,
            Ok(_) => panic!("connected to a closed port"),
        };
        assert!(
            err.message.contains("connection refused"),
            "{}",
            err.message
        );
        // A pod whose sandbox is gone.
        let gone = json!({"metadata": {"name": "g", "uid": "u3"}, "spec": {}});
        assert!(streams.port_forward(&gone, port).await.is_err());
    }
}
