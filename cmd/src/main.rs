//! `k1s`: Kubernetes in one binary. This file only parses the command line and wires the
//! library crates together; the work happens in them.

mod agent;
mod agent_cmd;
mod agent_servers;
mod allocator;
#[cfg(feature = "server")]
mod bench;
#[cfg(feature = "server")]
mod bench_api;
#[cfg(feature = "server")]
mod bench_dns;
#[cfg(feature = "server")]
mod bench_ha;
#[cfg(feature = "server")]
mod bench_idle;
#[cfg(feature = "server")]
mod bench_netpol;
#[cfg(feature = "server")]
mod bench_podnet;
#[cfg(feature = "server")]
mod bench_pods;
#[cfg(feature = "server")]
mod bench_proxy;
#[cfg(feature = "server")]
mod bench_scheduler;
#[cfg(feature = "server")]
mod components;
#[cfg(feature = "server")]
mod cron;
mod csi_hostpath;
#[cfg(feature = "server")]
mod datastore;
mod dns;
mod host;
mod local_storage;
#[cfg(feature = "server")]
mod secrets_encrypt;
#[cfg(feature = "server")]
mod server;
#[cfg(feature = "server")]
mod server_args;
#[cfg(feature = "server")]
mod server_join;
#[cfg(feature = "server")]
mod snapshot;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "k1s", version, about = "Kubernetes in one binary")]
struct Cli {
    /// Log format: text or json.
    #[arg(long, global = true, default_value = "text", env = "K1S_LOG_FORMAT")]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the control plane (datastore, API server, scheduler, controllers) on this node.
    #[cfg(feature = "server")]
    Server(Box<server_args::ServerArgs>),
    /// Run a worker node: join the server at --server with --token and run its kubelet.
    Agent(Box<agent_cmd::AgentArgs>),
    /// Measure this machine: `k1s bench store` checks whether a disk is fast enough, `k1s bench
    /// api` measures a running API server.
    #[cfg(feature = "server")]
    Bench {
        #[command(subcommand)]
        what: bench::BenchCommand,
    },
    /// Datastore snapshots: `save` (from the running server), `ls`, `restore` (into a data
    /// directory, server stopped).
    #[cfg(feature = "server")]
    Snapshot(snapshot::SnapshotArgs),
    /// Encryption at rest: show the keys (`status`) or rotate them (`rotate-keys`).
    #[cfg(feature = "server")]
    SecretsEncrypt(secrets_encrypt::SecretsEncryptArgs),
    /// Run the hostpath CSI plugin (hostpath.csi.k1s.io) on this node.
    CsiHostpath(csi_hostpath::CsiHostpathArgs),
    /// Helpers k1s runs itself (the container shim); not for people.
    #[command(hide = true)]
    Internal {
        #[command(subcommand)]
        what: Internal,
    },
}

#[derive(Subcommand)]
enum Internal {
    /// Start the container described by BUNDLE/config.json and look after it until it exits.
    Shim { bundle: std::path::PathBuf },
    /// Run COMMAND inside the running container of BUNDLE (`kubectl exec`).
    Exec {
        bundle: std::path::PathBuf,
        /// Give the command the caller's terminal as its controlling terminal.
        #[arg(long)]
        tty: bool,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("K1S_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The shim forks: it must run before any thread (tokio's included) exists.
    if let Command::Internal {
        what: Internal::Shim { bundle },
    } = &cli.command
    {
        std::process::exit(k1s_kubelet::runtime::shim::main(bundle));
    }
    // So does the exec helper, and it joins namespaces, which needs a single thread.
    if let Command::Internal {
        what: Internal::Exec {
            bundle,
            tty,
            command,
        },
    } = &cli.command
    {
        std::process::exit(k1s_kubelet::runtime::exec::main(bundle, *tty, command));
    }
    init_logging(&cli.log_format);
    #[cfg(feature = "server")]
    if let Command::SecretsEncrypt(args) = cli.command {
        return secrets_encrypt::run(args);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("k1s")
        .on_thread_park(allocator::on_park)
        .build()?;
    // The command runs on a worker thread, not on this one: a worker hands memory back to
    // the system when it parks (`allocator::on_park`); this thread, blocked here until the
    // command ends, would keep what start-up freed.
    let command = runtime.spawn(async move {
        match cli.command {
            #[cfg(feature = "server")]
            Command::Server(args) => server::run(*args).await,
            Command::Agent(args) => agent_cmd::run(*args).await,
            #[cfg(feature = "server")]
            Command::Bench { what } => bench::run(what).await,
            Command::CsiHostpath(args) => csi_hostpath::run(args).await,
            #[cfg(feature = "server")]
            Command::Snapshot(args) => snapshot::run(args).await,
            #[cfg(feature = "server")]
            Command::SecretsEncrypt(_) => unreachable!("handled before the runtime starts"),
            Command::Internal { .. } => unreachable!("handled before the runtime starts"),
        }
    });
    match runtime.block_on(command) {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(e.into()),
    }
}
