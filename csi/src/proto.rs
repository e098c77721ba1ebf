//! Generated protocol types: `v1` is CSI (`csi.v1`), `registration` the kubelet's plugin
//! registration service (`pluginregistration`). Both come from `proto/` via `build.rs`.

#[allow(clippy::all, clippy::pedantic, missing_docs, rust_2018_idioms)]
pub mod v1 {
    tonic::include_proto!("csi.v1");
}

#[allow(clippy::all, clippy::pedantic, missing_docs, rust_2018_idioms)]
pub mod registration {
    tonic::include_proto!("pluginregistration");
}
