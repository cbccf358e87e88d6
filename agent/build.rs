//! Compiles the kubelet's PodResources API (vendored in proto/podresources)
//! with protox, as the proto crate compiles fleetop.proto: no system `protoc`.
//! The server side too: the agent's tests answer `List` as a kubelet would.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/podresources/v1/api.proto");
    let fds = protox::compile(["podresources/v1/api.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
