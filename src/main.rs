//! The `vramlab` binary: the command line of the `vramlab` library crate, stamped with the
//! commit it was built from.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    experiments::set_code_commit(env!("VRAMLAB_COMMIT"));
    std::process::ExitCode::from(vramlab::main(std::env::args_os()))
}
