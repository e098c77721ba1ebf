//! Compiles the device plugin API (`proto/deviceplugin.proto`) with protox (pure Rust, no
//! system `protoc`) into prost messages and tonic clients and servers: the kubelet serves
//! Registration and calls DevicePlugin; test plugins use the other halves.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let file = "proto/deviceplugin.proto";
    println!("cargo:rerun-if-changed={file}");
    let descriptors = protox::compile([file], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
