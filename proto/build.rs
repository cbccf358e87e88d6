//! Compiles the wire contract with protox (a pure-Rust protobuf compiler), so no
//! machine needs a system `protoc` to build fleetop.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=fleetop.proto");
    let fds = protox::compile(["fleetop.proto"], ["."])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // `fleetop-agent sample --format json` prints the wire types as they are.
        .type_attribute(".", "#[derive(serde::Serialize)]")
        // prost's codec with small stream buffers (see src/codec.rs).
        .codec_path("crate::codec::SmallBufferCodec")
        .compile_fds(fds)?;
    // Ray's autoscaler state service (a subset, see the file): the console
    // reads Ray's node states and drains Ray nodes through it; the tests
    // serve it too, so both ends are built.
    println!("cargo:rerun-if-changed=ray/autoscaler.proto");
    let ray = protox::compile(["ray/autoscaler.proto"], ["."])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(ray)?;
    Ok(())
}
