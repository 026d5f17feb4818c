//! Quiet containment: a panic inside a third-party decoder (arrow-rs, a decompressor) is caught and reported as a
//! rejected row group with its reason, and its message and backtrace never reach the user's terminal. Panics
//! anywhere else still print as they always did: the hook installed here stays silent only on a thread that is
//! inside [`catch`], and hands every other panic to the hook that was there before.

use std::any::Any;
use std::cell::Cell;
use std::sync::Once;

thread_local! {
    /// How many [`catch`] calls the thread is inside.
    static INSIDE: Cell<u32> = const { Cell::new(0) };
}

static HOOK: Once = Once::new();

/// The message a panic was raised with.
fn message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

/// Runs `f`; a panic in it comes back as its message, unprinted.
///
/// # Errors
/// `f` panicked: the panic's message.
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if INSIDE.with(Cell::get) == 0 {
                previous(info);
            }
        }));
    });
    INSIDE.with(|n| n.set(n.get() + 1));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    INSIDE.with(|n| n.set(n.get().saturating_sub(1)));
    result.map_err(|panic| message(&*panic))
}
