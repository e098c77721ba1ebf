//! `k1s server`: the control-plane process: the datastore with its background compaction and
//! the HTTPS API (certificates, kubeconfig, authentication, authorization, admission, the REST
//! API); the scheduler, controllers and kubelet join it as their issues land.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k1s_api::client::Client;
use k1s_apiserver::auth::join_token::JoinToken;
use k1s_apiserver::auth::token_file::TokenFile;
use k1s_apiserver::cluster_identity;
use k1s_apiserver::encryption::Transformer;
use k1s_apiserver::encryption::config::EncryptionConfig;
use k1s_apiserver::local_client::LocalClient;
use k1s_apiserver::pki::{Pki, PkiConfig};
use k1s_apiserver::rest::ServiceNetwork;
use k1s_apiserver::server::{self as api, ApiConfig, ApiState};
use k1s_store::compactor::{self, CompactionPolicy};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::server_args::ServerArgs;
use crate::{components, datastore};

/// `--advertise-address`, else `--bind-address` unless unspecified, else the node's first
/// address (upstream's order).
fn advertise_address(args: &ServerArgs, node_ips: &[IpAddr]) -> IpAddr {
    args.advertise_address
        .or((!args.bind_address.is_unspecified()).then_some(args.bind_address))
        .or(node_ips.first().copied())
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

pub async fn run(args: ServerArgs) -> anyhow::Result<()> {
    // Take over SIGTERM/SIGINT before anything else, so a stop during start-up is clean too.
    let stop = crate::host::shutdown_signal()?;
    let services = ServiceNetwork::parse(&args.service_cidr, &args.service_node_port_range)
        .map_err(|e| anyhow::anyhow!("--service-cidr/--service-node-port-range: {e}"))?;
    crate::agent::check_proxy_flags(&args.kubelet, &args.service_cidr)?;
    let disabled_admission =
        k1s_apiserver::admission::plugins::parse_disabled(&args.disable_admission_plugins)
            .map_err(|e| anyhow::anyhow!("--{e}"))?;
    let snapshots = if args.disable_snapshots {
        None
    } else {
        Some(crate::snapshot::Schedule {
            cron: crate::cron::Cron::parse(&args.snapshot_schedule)
                .map_err(|e| anyhow::anyhow!("--snapshot-schedule: {e}"))?,
            retention: args.snapshot_retention.max(1),
            dir: args
                .snapshot_dir
                .clone()
                .unwrap_or_else(|| crate::snapshot::default_dir(&args.data_dir)),
        })
    };
    let (datastore_endpoint, tls) = crate::server_join::datastore(&args).await?;
    let server_join = crate::server_join::answer(datastore_endpoint.as_deref(), &tls)?;
    let (store, etcd) =
        datastore::open_with_etcd(&args.data_dir, datastore_endpoint.as_deref(), &tls).await?;
    let revision = store.current_revision().await?;
    tracing::info!(revision, data_dir = %args.data_dir.display(), "datastore ready");
    // The cluster identity first: a server joining a cluster on etcd takes its CA and its
    // ServiceAccount key before it loads either.
    let token_path = args.data_dir.join("server/token");
    let token_text = JoinToken::resolve_text(&token_path, args.token.as_deref())?;
    let password = JoinToken::password_of(&token_text).context("--token")?;
    let fetched = cluster_identity::fetch(&*store, &args.data_dir, &password).await?;
    match &fetched {
        cluster_identity::Fetched::Absent => {}
        cluster_identity::Fetched::Written(changed) if changed.is_empty() => {}
        cluster_identity::Fetched::Written(changed) => {
            tracing::info!(files = ?changed, "took the cluster identity from the datastore");
        }
    }
    let encryption_config = crate::secrets_encrypt::server_config_path(
        &args.data_dir,
        args.encryption_provider_config.as_deref(),
        args.secrets_encryption,
    )?;

    let cancel = CancellationToken::new();
    let tasks = TaskTracker::new();
    let policy = CompactionPolicy {
        keep_revisions: args.compaction_keep_revisions,
        keep_for: Duration::from_secs(args.compaction_keep_seconds),
        interval: Duration::from_secs(args.compaction_interval_seconds.max(1)),
    };
    tasks.spawn(compactor::run(store.clone(), policy, cancel.clone()));
    if let Some(schedule) = snapshots {
        crate::snapshot::spawn(store.clone(), etcd, schedule, &tasks, &cancel);
    }

    let hostname = crate::host::hostname();
    let node_ips = crate::host::node_ips(&args.node_ip, &hostname);
    let pki_config = PkiConfig {
        dir: args.data_dir.join("tls"),
        hostname: hostname.clone(),
        node_ips: node_ips.clone(),
        // Pods reach the API at the `kubernetes` Service's ClusterIP (the service CIDR's first
        // address), as kube-apiserver's certificate covers it.
        tls_sans: args
            .tls_san
            .iter()
            .cloned()
            .chain([services.first().to_string()])
            .collect(),
    };
    let mut pki = Pki::load_or_create(&pki_config)?;
    let sa_key = args.data_dir.join("tls/service-account.key");
    if fetched == cluster_identity::Fetched::Absent {
        // This server's identity becomes the cluster's, unless another server's got there
        // first (two first servers at once): then that one is taken, and the leaf
        // certificates are issued again from its CA.
        k1s_apiserver::auth::jwt::Signer::load_or_create(&sa_key)?;
        if cluster_identity::publish(&*store, &args.data_dir, &password).await? {
            tracing::info!(
                "published this server's identity (CA, ServiceAccount key) as the cluster's, sealed with the join token"
            );
        } else {
            cluster_identity::fetch(&*store, &args.data_dir, &password).await?;
            tracing::info!("another server published the cluster identity first: took it");
            pki = Pki::load_or_create(&pki_config)?;
        }
    }
    if matches!(fetched, cluster_identity::Fetched::Written(_)) {
        // A cluster whose identity predates a file of it (the front proxy CA): the first
        // server with one shares it; the others take that one and re-issue what it signs.
        match cluster_identity::extend(&*store, &args.data_dir, &password).await? {
            cluster_identity::Extended::Added => {
                tracing::info!("added this server's new identity files to the cluster's");
            }
            cluster_identity::Extended::Complete => {}
            cluster_identity::Extended::Raced => {
                cluster_identity::fetch(&*store, &args.data_dir, &password).await?;
                tracing::info!("took the new identity files another server added");
                pki = Pki::load_or_create(&pki_config)?;
            }
        }
    }
    // The generated configuration (--secrets-encryption) is the cluster's: kept in step with
    // the datastore's copy. A server started without the flag on a cluster that has one takes
    // it too, or it could not read the cluster's secrets.
    let shared_encryption = args.encryption_provider_config.is_none()
        && (args.secrets_encryption
            || store
                .get(k1s_apiserver::encryption::shared::KEY)
                .await?
                .is_some());
    let encryption_config = if shared_encryption {
        let generated = k1s_apiserver::encryption::config::generated_path(&args.data_dir);
        if k1s_apiserver::encryption::shared::take_if_absent(&*store, &generated, &password)
            .await
            .context("taking the cluster's encryption configuration")?
        {
            tracing::info!(path = %generated.display(), "took the cluster's encryption configuration");
        }
        let path = crate::secrets_encrypt::server_config_path(&args.data_dir, None, true)?
            .context("the generated encryption configuration")?;
        let done = k1s_apiserver::encryption::shared::reconcile(
            &*store,
            &path,
            &password,
            k1s_apiserver::encryption::shared::Prefer::Newer,
        )
        .await
        .context("sharing the encryption configuration")?;
        tracing::info!(outcome = ?done, "encryption configuration in step with the cluster's");
        tasks.spawn(k1s_apiserver::encryption::shared::run(
            store.clone(),
            path.clone(),
            password.clone(),
            cancel.clone(),
        ));
        Some(path)
    } else {
        encryption_config
    };
    let encryption = match &encryption_config {
        Some(path) => {
            let config = EncryptionConfig::load(path).context("--encryption-provider-config")?;
            tracing::info!(path = %path.display(), "encryption at rest enabled");
            Transformer::new(config)
        }
        None => Transformer::identity(),
    };
    let tls = Arc::new(pki.server_config()?);
    let addr = SocketAddr::new(args.bind_address, args.https_port);
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("cannot listen on {addr} (is another API server running? use --https-port)")
    })?;
    let server_url = format!("https://127.0.0.1:{}", args.https_port);
    pki.write_kubeconfig(
        &args.write_kubeconfig,
        args.write_kubeconfig_mode,
        &server_url,
    )?;
    tracing::info!(kubeconfig = %args.write_kubeconfig.display(), "wrote admin kubeconfig");
    let config = ApiConfig {
        services,
        advertise_address: advertise_address(&args, &node_ips),
        port: args.https_port,
        token_file: match &args.token_auth_file {
            Some(path) => Some(Arc::new(TokenFile::load(path)?)),
            None => None,
        },
        admission: k1s_apiserver::admission::config::AdmissionConfig {
            disabled: disabled_admission,
            ..match &args.admission_control_config_file {
                Some(path) => k1s_apiserver::admission::config::AdmissionConfig::load(path)?,
                None => Default::default(),
            }
        },
        join_token: Some(JoinToken::load_or_create(
            &token_path,
            Some(&token_text),
            &pki.ca.cert_pem,
        )?),
        service_account_key: Some(sa_key),
        pki: Some(pki.clone()),
        encryption: Arc::new(encryption),
        server_join,
    };
    let state = ApiState::new(store.clone(), &config)?;
    k1s_apiserver::bootstrap::run(&state.rest, config.advertise_address, config.port)
        .await
        .map_err(|e| {
            anyhow::anyhow!("creating the system namespaces and services: {}", e.message)
        })?;
    k1s_apiserver::bootstrap::extension_apiserver_authentication(
        &state.rest,
        &pki.ca.cert_pem,
        &pki.request_header_ca.cert_pem,
    )
    .await
    .map_err(|e| {
        anyhow::anyhow!(
            "writing kube-system/extension-apiserver-authentication: {}",
            e.message
        )
    })?;
    state
        .start(&tasks, &cancel)
        .await
        .map_err(|e| anyhow::anyhow!("reconciling the bootstrap RBAC policy: {}", e.message))?;
    k1s_apiserver::snapshot_crds::ensure(&state.rest)
        .await
        .map_err(|e| anyhow::anyhow!("installing the volume snapshot CRDs: {}", e.message))?;
    tasks.spawn(k1s_apiserver::crds::run(state.rest.clone(), cancel.clone()));
    tasks.spawn(k1s_apiserver::apiservice_status::run(
        state.rest.clone(),
        state.pki.as_ref().map(|p| p.front_proxy.clone()),
        cancel.clone(),
    ));
    tasks.spawn(k1s_apiserver::encryption::sweep::run(
        state.rest.clone(),
        encryption_config,
        cancel.clone(),
    ));
    tasks.spawn(k1s_apiserver::event_ttl::run(
        state.rest.clone(),
        Duration::from_secs(args.event_ttl_seconds),
        cancel.clone(),
    ));
    let client: Arc<dyn Client> = Arc::new(
        LocalClient::new(state.rest.clone(), "k1s-server", cancel.clone())
            .with_tokens(state.tokens.clone()),
    );
    if datastore_endpoint.is_some() {
        // Several servers may share the datastore: the `kubernetes` endpoints list every live
        // one (upstream's lease endpoint reconciler).
        tasks.spawn(k1s_apiserver::endpoint_leases::run(
            client.clone(),
            k1s_apiserver::endpoint_leases::Config::new(config.advertise_address, config.port),
            cancel.clone(),
        ));
    }
    let provisioners = k1s_controllers::provisioner::ProvisionerSet::new();
    let cluster_dns = !args.disable.iter().any(|c| c == "dns");
    let node_ipam = k1s_controllers::node_ipam::Config {
        cluster_cidr: args
            .kubelet
            .cluster_cidr
            .parse()
            .map_err(|e| anyhow::anyhow!("--cluster-cidr: {e}"))?,
        node_mask: args.node_cidr_mask_size,
    };
    if node_ipam.node_mask < node_ipam.cluster_cidr.prefix_len() {
        anyhow::bail!(
            "--node-cidr-mask-size {} is larger than --cluster-cidr {} (use a longer mask)",
            node_ipam.node_mask,
            node_ipam.cluster_cidr
        );
    }
    crate::dns::ensure_service(&*client, &args.service_cidr, cluster_dns).await?;
    let local_storage = !args.disable.iter().any(|c| c == "local-storage");
    if local_storage {
        crate::local_storage::ensure_objects(&*client).await?;
    }
    // This server's identity in leader elections: unique per start, like upstream's.
    let leader_elect = args.leader_elect.unwrap_or(datastore_endpoint.is_some());
    let identity = leader_elect.then(|| format!("{hostname}_{}", uuid::Uuid::new_v4()));
    if !leader_elect {
        tracing::info!(
            "controller manager and scheduler run without leader election (embedded store: one server)"
        );
    }
    if !args.disable_controller_manager {
        tasks.spawn(components::controllers(
            client.clone(),
            state.registry.clone(),
            pki.ca.cert_pem.clone(),
            identity.clone(),
            k1s_controllers::Options {
                node_monitor_grace_period: args.node_monitor_grace_period,
                terminated_pod_gc_threshold: args.terminated_pod_gc_threshold,
                provisioners: provisioners.clone(),
                servicelb: !args.disable.iter().any(|c| c == "servicelb"),
                cluster_dns,
                node_ipam: args.allocate_node_cidrs.then_some(node_ipam),
                ..Default::default()
            },
            cancel.clone(),
        ));
    }
    if !args.disable_scheduler {
        let config = match &args.scheduler_config {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| {
                    format!("cannot read --scheduler-config {}", path.display())
                })?;
                k1s_scheduler::Config::parse(&text)
                    .with_context(|| format!("--scheduler-config {}", path.display()))?
            }
            None => k1s_scheduler::Config::default(),
        };
        tasks.spawn(components::scheduler(
            client.clone(),
            config,
            identity.clone(),
            cancel.clone(),
        ));
    }
    let mut local_kubelet = None;
    if !args.disable_agent {
        let node_ip = node_ips
            .iter()
            .find(|ip| ip.is_ipv4())
            .copied()
            .unwrap_or(IpAddr::from([127, 0, 0, 1]));
        let node = crate::agent::node_name(&args.kubelet, &hostname);
        let mut addresses = node_ips.clone();
        if !addresses.contains(&node_ip) {
            addresses.push(node_ip);
        }
        let (cert, key) = pki.issue_kubelet_serving_cert(
            &node,
            &addresses,
            jiff::SignedDuration::from_hours(24 * 365),
            None,
        )?;
        let port_tls =
            k1s_kubelet::port::KubeletTls::new(&pki.ca.cert_pem, &cert, &key.unwrap_or_default())?;
        let mut kubelet = args.kubelet.clone();
        kubelet.disable_dns |= !cluster_dns;
        kubelet.disable_network_policy |= args.disable.iter().any(|c| c == "network-policy");
        let streams = crate::agent::start(
            &kubelet,
            &args.data_dir,
            &hostname,
            node_ip,
            &args.service_cidr,
            client.clone(),
            client.clone(),
            Some(crate::agent::ServerSide {
                metrics: state.metrics.clone(),
                provisioners: provisioners.clone(),
            }),
            port_tls,
            local_storage,
            &tasks,
            &cancel,
        )
        .await?;
        state.rest.set_node_streams(&streams);
        // Held here until the end of `run`: the API server only keeps a weak reference.
        local_kubelet = Some(streams);
    }
    // Remote nodes' kubelets are reached over HTTPS with a client certificate of this
    // server's own (re-issued at every start).
    let (cert, key) = pki.issue_client_cert(
        k1s_apiserver::kubelet_client::KUBELET_CLIENT_USER,
        Some(k1s_apiserver::kubelet_client::KUBELET_CLIENT_GROUP),
        jiff::SignedDuration::from_hours(24 * 365),
        None,
    )?;
    state
        .rest
        .set_kubelet_dialer(k1s_apiserver::kubelet_client::KubeletDialer::new(
            &pki.ca.cert_pem,
            &cert,
            &key.unwrap_or_default(),
        )?);
    let certs = pki.client_cert_check()?;
    tasks.spawn(api::serve(
        listener,
        tls,
        Some(certs),
        state,
        cancel.clone(),
    ));
    tracing::info!(%addr, version = api::KUBE_GIT_VERSION, "API server listening");
    tasks.close();

    stop.await;
    tracing::info!("shutting down");
    cancel.cancel();
    tasks.wait().await;
    drop(local_kubelet);
    drop(store);
    tracing::info!("stopped");
    Ok(())
}
