fn main() {
    std::process::exit(modelfs::main());
}
