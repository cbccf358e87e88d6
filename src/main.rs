// mimalloc: the console and the demo's in-process agents allocate a small
// sample per node per second across many threads; glibc's malloc spent a
// third of a 1,024-node demo's start in its own bookkeeping (perf, see
// docs/PERFORMANCE.md).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    fleetop::main()
}
