//! The `vramlab` binary: the command line of the `vramlab` library crate, stamped with the
//! commit it was built from.

#![forbid(unsafe_code)]

/// A reader that stops early (`vramlab tune ... | head`) closes the pipe; Rust ignores SIGPIPE, so
/// the next print panics ("failed printing to stdout: Broken pipe"). Exit instead as a Unix tool
/// killed by SIGPIPE does (status 128 + 13), quietly: the reader asked for no more.
const BROKEN_PIPE_STATUS: i32 = 128 + 13;

fn main() -> std::process::ExitCode {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(BROKEN_PIPE_STATUS);
        }
        default_hook(info);
    }));
    experiments::set_code_commit(env!("VRAMLAB_COMMIT"));
    std::process::ExitCode::from(vramlab::main(std::env::args_os()))
}
