fn main() -> std::process::ExitCode {
    fleetop::main()
}
