fn main() {
    let code = referee_harness::cli::main(std::env::args_os());
    std::process::exit(code);
}
