//! Cancelling is per call: two calls run at once on two threads, each with a token of its own;
//! the one cancelled stops with `Cancelled`, the other finishes with its figures (issue 37: a
//! Ctrl-C in one thread's call used to stop every call, through one process-wide flag).

use std::path::PathBuf;

use allocators::{run_cancellable, Error, Replay};
use experiments::cancel::Token;
use experiments::Trace;

fn replay(token: &Token) -> Result<experiments::ReplayRecord, Error> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../reports/reference/h100/alloc-traces/gpt/default.pickle.gz");
    run_cancellable(token, || {
        let traces = Trace::load_all(&path, None)?;
        Replay::new(traces, None)?.policies(None, &[]).run()
    })
}

#[test]
fn cancelling_one_call_leaves_the_other_calls_running() {
    let (kept, cancelled) = (Token::new(), Token::new());
    cancelled.cancel();
    let (ok, stopped) = std::thread::scope(|scope| {
        let ok = scope.spawn(|| replay(&kept));
        let stopped = scope.spawn(|| replay(&cancelled));
        (ok.join().unwrap(), stopped.join().unwrap())
    });
    let record = ok.expect("the call not cancelled finishes");
    assert!(record.results[0].peak_reserved_bytes > 0);
    match stopped {
        Err(Error::Input(experiments::Error::Cancelled)) => {}
        other => panic!(
            "the cancelled call must stop with Cancelled: {:?}",
            other.map(|r| r.trace)
        ),
    }
    assert!(!kept.is_cancelled());
}
