//! The C boundary's safety net: no panic unwinds into C. A caught panic is
//! turned into an error by the caller, and poisons the library state
//! because the ranks may have diverged.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

static PANICKED: AtomicBool = AtomicBool::new(false);

/// Runs `f`, returning the panic message if it panicked.
#[inline(always)]
pub fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        PANICKED.store(true, Ordering::SeqCst);
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into())
    })
}

/// Whether any call has panicked in this process.
pub fn panicked() -> bool {
    PANICKED.load(Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    #[test]
    fn catches_panics() {
        assert_eq!(super::catch(|| 3), Ok(3));
        let e = super::catch(|| -> i32 { panic!("boom {}", 1) });
        assert_eq!(e, Err("boom 1".to_string()));
        assert!(super::panicked());
    }
}
