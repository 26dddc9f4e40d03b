//! Stopping long work from outside: the Python layer asks for it when the user presses Ctrl-C
//! (the work runs without the interpreter's lock, so Python cannot interrupt it itself). Each
//! call has a [`Token`] of its own, current on the threads doing its work ([`with_token`], and
//! [`set_current`] for a thread pool's workers), so cancelling one call leaves another thread's
//! call running. Long loops (reading a snapshot, replaying, probing caps) look at the current
//! token every few thousand steps, a few milliseconds apart, and stop with
//! [`Error::Cancelled`](crate::Error::Cancelled). Work with no token is never cancelled.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One call's request to stop, shared by the threads doing its work.
#[derive(Debug, Clone, Default)]
pub struct Token(Arc<AtomicBool>);

impl Token {
    /// A token not cancelled.
    pub fn new() -> Token {
        Token::default()
    }

    /// Asks the work this token is current for to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`Token::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Token>> = const { RefCell::new(None) };
}

/// Makes `token` the current one of this thread (a thread pool's start handler calls it for
/// each of its workers); `None`: no token.
pub fn set_current(token: Option<Token>) {
    CURRENT.with(|current| *current.borrow_mut() = token);
}

/// Runs `work` with `token` current on this thread, then restores the one before.
pub fn with_token<R>(token: &Token, work: impl FnOnce() -> R) -> R {
    let before = CURRENT.with(|current| current.replace(Some(token.clone())));
    struct Restore(Option<Token>);
    impl Drop for Restore {
        fn drop(&mut self) {
            set_current(self.0.take());
        }
    }
    let _restore = Restore(before);
    work()
}

/// Whether this thread's current token asks its work to stop.
pub fn requested() -> bool {
    CURRENT.with(|current| current.borrow().as_ref().is_some_and(Token::is_cancelled))
}

/// `Err(Cancelled)` once this thread's current token asks its work to stop.
pub fn check() -> crate::Result<()> {
    if requested() {
        Err(crate::Error::Cancelled)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_current_only_on_its_thread_and_only_within_its_call() {
        let (a, b) = (Token::new(), Token::new());
        a.cancel();
        with_token(&a, || {
            assert!(requested());
            // Another thread's call, with a token of its own, is not cancelled.
            let other = std::thread::spawn({
                let b = b.clone();
                move || with_token(&b, || check().is_ok())
            });
            assert!(other.join().unwrap());
            with_token(&b, || assert!(!requested()));
            assert!(requested(), "the outer token is restored");
        });
        assert!(!requested(), "no token after the call");
        assert!(!b.is_cancelled());
    }
}
