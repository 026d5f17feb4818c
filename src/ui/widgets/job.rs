//! The one way the app runs work off the UI thread: a [`Job`] runs a closure on a named thread of its own and hands
//! back its result once. When the job is given the UI's context, the worker wakes the UI as soon as the result is
//! there (`request_repaint`), so nothing polls on a timer. Dropping a job drops its result: a result of work that
//! is no longer wanted (another trace opened, another range selected) never lands. `clippy.toml` keeps
//! `std::thread::spawn` and `Builder::spawn` in this module.

use std::sync::mpsc::{RecvError, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use eframe::egui;

/// Where a job's result is.
#[derive(Debug)]
enum State<T> {
    Running,
    Ready(T),
    /// Taken, or the worker died without a result.
    Gone,
}

/// The result slot a worker fills and the UI takes from.
#[derive(Debug)]
struct Slot<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

impl<T> Slot<T> {
    fn set(&self, state: State<T>) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state;
        self.ready.notify_all();
    }
}

/// Marks the slot gone if the worker ends without a result (a panic), so that nobody waits forever.
struct Guard<T>(Arc<Slot<T>>);

impl<T> Drop for Guard<T> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*state, State::Running) {
            *state = State::Gone;
            self.0.ready.notify_all();
        }
    }
}

/// Work running on a thread of its own, and its result to come.
#[derive(Debug)]
pub struct Job<T> {
    slot: Arc<Slot<T>>,
}

impl<T: Send + 'static> Job<T> {
    /// Runs `work` on a thread named `name`; `waker`, when given, is asked to repaint when the result is ready. The
    /// error says the thread could not start.
    #[expect(clippy::disallowed_methods, reason = "the one place threads start")]
    pub fn spawn(
        name: &str,
        waker: Option<&egui::Context>,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Self, String> {
        let slot = Arc::new(Slot {
            state: Mutex::new(State::Running),
            ready: Condvar::new(),
        });
        let guard = Guard(Arc::clone(&slot));
        let waker = waker.cloned();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let result = work();
                guard.0.set(State::Ready(result));
                if let Some(ctx) = waker {
                    ctx.request_repaint();
                }
            })
            .map(|_| Job { slot })
            .map_err(|e| format!("cannot start the {name} thread: {e}"))
    }
}

impl<T> Job<T> {
    /// Takes the result when it is ready: `Empty` while the work runs, `Disconnected` once taken or when the worker
    /// died without one.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut state = self.slot.state.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *state, State::Gone) {
            State::Ready(v) => Ok(v),
            State::Running => {
                *state = State::Running;
                Err(TryRecvError::Empty)
            }
            State::Gone => Err(TryRecvError::Disconnected),
        }
    }

    /// Blocks until the result is ready (or the worker died), without taking it.
    pub fn wait(&self) {
        let state = self.slot.state.lock().unwrap_or_else(PoisonError::into_inner);
        let _ready = self
            .slot
            .ready
            .wait_while(state, |s| matches!(s, State::Running))
            .unwrap_or_else(PoisonError::into_inner);
    }

    /// Waits for the result and takes it.
    pub fn recv(&self) -> Result<T, RecvError> {
        self.wait();
        self.try_recv().map_err(|_| RecvError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_hands_back_its_result_and_wakes_the_ui() {
        let ctx = egui::Context::default();
        let job = Job::spawn("test", Some(&ctx), || 6 * 7).unwrap();
        assert_eq!(job.recv(), Ok(42));
        assert!(matches!(job.try_recv(), Err(TryRecvError::Disconnected)));
        // A dropped job's work finishes without anyone to take its result, and nothing panics.
        drop(
            Job::spawn("dropped", None, || {
                std::thread::sleep(std::time::Duration::from_millis(10));
            })
            .unwrap(),
        );
    }
}
