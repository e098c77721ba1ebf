//! Compiles `proto/*.proto` with protox (a pure-Rust protobuf compiler, so no system
//! `protoc` is needed) and generates prost messages plus tonic clients and servers.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/csi.proto", "proto/pluginregistration.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
