//! The desktop app (eframe): the shell, the wide-angle waterfall, and their panels.

pub mod app;
pub mod capture;
pub mod findings;
pub mod job;
pub mod microscope;
pub mod panels;
pub mod render;
pub mod stats;
pub mod theme;
pub mod waterfall;

pub use app::{App, DEMO_NAME, DEMO_TRACE, TraceSource};

/// Opens the window; returns when it is closed.
pub fn run(source: TraceSource) -> Result<(), eframe::Error> {
    let options = eframe::NativeOptions {
        viewport: eframe::egui::ViewportBuilder::default()
            .with_inner_size([1400.0, 860.0])
            .with_title("tokenscope")
            .with_drag_and_drop(true),
        ..Default::default()
    };
    eframe::run_native(
        "tokenscope",
        options,
        Box::new(|cc| Ok(Box::new(App::new(source, cc.storage)))),
    )
}

/// Which trace a background result was computed for. It holds a weak reference: while it lives the trace's
/// allocation cannot be reused by another trace, so a result of a trace that was closed never passes for one of the
/// trace opened after it (comparing addresses alone could).
#[derive(Clone)]
pub struct TraceRef(std::sync::Weak<crate::trace::Trace>);

impl TraceRef {
    /// The reference of a trace.
    pub fn of(trace: &std::sync::Arc<crate::trace::Trace>) -> Self {
        Self(std::sync::Arc::downgrade(trace))
    }

    /// True when it is this trace.
    pub fn is(&self, trace: &std::sync::Arc<crate::trace::Trace>) -> bool {
        std::ptr::eq(self.0.as_ptr(), std::sync::Arc::as_ptr(trace))
    }
}

impl PartialEq for TraceRef {
    fn eq(&self, other: &Self) -> bool {
        self.0.ptr_eq(&other.0)
    }
}

impl std::fmt::Debug for TraceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TraceRef({:p})", self.0.as_ptr())
    }
}
