fn main() {
    std::process::exit(modelfs::cli::main());
}
