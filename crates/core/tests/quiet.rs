//! A panic inside `ingest::quiet::catch` comes back as its message and reaches no panic hook; a panic anywhere else
//! still reaches the hook that was there. (A test binary of its own: it sets the process's panic hook.)

use std::sync::atomic::{AtomicUsize, Ordering};

use tokenscope_core::ingest::quiet;

static PRINTED: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_contained_panic_is_not_printed_and_any_other_still_is() {
    std::panic::set_hook(Box::new(|_| {
        PRINTED.fetch_add(1, Ordering::SeqCst);
    }));
    let caught: Result<u32, String> = quiet::catch(|| panic!("offset + len out of bounds"));
    assert_eq!(caught, Err("offset + len out of bounds".to_owned()));
    let page = 3;
    let caught: Result<u32, String> = quiet::catch(|| panic!("bad page {page}"));
    assert_eq!(caught, Err("bad page 3".to_owned()));
    assert_eq!(quiet::catch(|| 7), Ok(7));
    assert_eq!(PRINTED.load(Ordering::SeqCst), 0, "nothing reached the hook");
    // Outside `catch`, the hook that was there hears of it.
    let elsewhere = std::panic::catch_unwind(|| panic!("a bug elsewhere"));
    assert!(elsewhere.is_err());
    assert_eq!(PRINTED.load(Ordering::SeqCst), 1);
}
