//! What the API server's handlers share ([`ApiState`]: the storage layer, authentication,
//! authorization, metrics, the cluster CA) and how it is built from the store and the
//! server's settings ([`ApiConfig`]).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use k1s_store::Store;
use tokio_util::sync::CancellationToken;

use crate::auth::Authenticator;
use crate::auth::join_token::JoinToken;
use crate::auth::jwt::Signer;
use crate::auth::serviceaccount::TokenAuthenticator;
use crate::auth::token_file::TokenFile;
use crate::authz::Authorizer;
use crate::metrics::{InstrumentedStore, Metrics};
use crate::registry::Registry;
use crate::rest::{Rest, ServiceNetwork};
use crate::status::ApiError;

/// What the handlers share.
pub struct ApiState {
    /// The datastore, timed into `metrics`.
    pub store: Arc<dyn Store>,
    /// The generic storage of every resource (over `store`).
    pub rest: Arc<Rest>,
    pub registry: Arc<Registry>,
    /// The OpenAPI documents of the current catalog.
    pub openapi: crate::http::openapi::OpenApiCache,
    /// Fired when the server stops: ends watches so connections can drain.
    pub cancel: CancellationToken,
    pub metrics: Arc<Metrics>,
    /// Set when shutdown begins: `/readyz` fails from then on, so load balancers drain.
    pub shutting_down: AtomicBool,
    /// Who each request comes from.
    pub authn: Authenticator,
    /// ServiceAccount tokens: issued by TokenRequest, accepted by `authn`.
    pub tokens: Arc<TokenAuthenticator>,
    /// What each user may do.
    pub authz: Arc<Authorizer>,
    /// The cluster CA (for `/cacerts` and node certificates), when serving HTTPS.
    pub pki: Option<crate::pki::Pki>,
    /// What a joining server is told (a shared datastore only).
    pub server_join: Option<crate::auth::join::ServerJoin>,
}

/// Settings of the API beyond the store.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// `--service-cidr` and `--service-node-port-range`.
    pub services: ServiceNetwork,
    /// The address other nodes and pods reach this server at (the `kubernetes` Service's
    /// endpoint).
    pub advertise_address: std::net::IpAddr,
    /// The HTTPS port.
    pub port: u16,
    /// `--token-auth-file`, loaded.
    pub token_file: Option<Arc<TokenFile>>,
    /// The join token agents present.
    pub join_token: Option<JoinToken>,
    /// Where the ServiceAccount signing key lives; `None` uses a key kept in memory only.
    pub service_account_key: Option<std::path::PathBuf>,
    /// The cluster PKI, for `/cacerts` and node certificates.
    pub pki: Option<crate::pki::Pki>,
    /// `--admission-control-config-file`, loaded.
    pub admission: crate::admission::config::AdmissionConfig,
    /// Encryption at rest (`--encryption-provider-config`); identity when not configured.
    pub encryption: Arc<crate::encryption::Transformer>,
    /// The shared datastore, for servers that join this one (`None`: the embedded store).
    pub server_join: Option<crate::auth::join::ServerJoin>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            services: ServiceNetwork::default(),
            advertise_address: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            port: 6443,
            token_file: None,
            join_token: None,
            service_account_key: None,
            pki: None,
            admission: Default::default(),
            encryption: Arc::new(crate::encryption::Transformer::identity()),
            server_join: None,
        }
    }
}

impl ApiState {
    pub fn new(store: Arc<dyn Store>, config: &ApiConfig) -> Result<Arc<Self>, ApiStateError> {
        let metrics = Metrics::new();
        let store: Arc<dyn Store> = Arc::new(InstrumentedStore::new(store, metrics.clone()));
        let registry = Arc::new(Registry::new());
        let rest = Arc::new(
            Rest::new(store.clone(), registry.clone(), config.services)
                .with_encryption(config.encryption.clone()),
        );
        // Every write of the server goes through the REST layer's store, which notes what
        // admission's remembered lists depend on.
        let store = rest.store.clone();
        let signer = match &config.service_account_key {
            Some(path) => Signer::load_or_create(path)?,
            None => {
                let key = rcgen::KeyPair::generate()
                    .map_err(|e| ApiStateError::Key(crate::auth::jwt::KeyError::Generate(e)))?;
                Signer::from_pem(&key.serialize_pem()).map_err(ApiStateError::Key)?
            }
        };
        let tokens = Arc::new(TokenAuthenticator::new(signer, rest.clone()));
        let authn = Authenticator::new(
            config.token_file.clone(),
            config.join_token.clone(),
            Some(tokens.clone()),
        );
        let authz = Authorizer::new(store.clone(), config.encryption.clone());
        let chain: Arc<dyn crate::admission::Admission> = Arc::new(crate::admission::Chain::new(
            authz.clone(),
            config.admission.clone(),
        ));
        let _ = rest.admission.set(chain);
        Ok(Arc::new(Self {
            rest,
            registry,
            openapi: Default::default(),
            cancel: CancellationToken::new(),
            store,
            metrics,
            shutting_down: AtomicBool::new(false),
            authn,
            tokens,
            authz,
            pki: config.pki.clone(),
            server_join: config.server_join.clone(),
        }))
    }

    /// Starts what the API needs running in the background (the authorizers' mirrors, ClusterRole
    /// aggregation) and reconciles the bootstrap RBAC policy.
    pub async fn start(
        self: &Arc<Self>,
        tasks: &tokio_util::task::TaskTracker,
        cancel: &CancellationToken,
    ) -> Result<(), ApiError> {
        self.authz.run(tasks, &self.rest, cancel);
        crate::authz::policy::reconcile(&self.rest).await?;
        tasks.spawn(crate::authz::aggregation::run(
            self.rest.clone(),
            cancel.clone(),
        ));
        Ok(())
    }
}

/// Why the API state cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ApiStateError {
    #[error(transparent)]
    ServiceAccountKey(#[from] crate::auth::jwt::JwtError),
    #[error("cannot generate a service account key: {0}")]
    Key(#[source] crate::auth::jwt::KeyError),
}
