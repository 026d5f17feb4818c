//! A trace drawn while it loads: the loader hands over the requests and steps merged so far from time to time
//! (Parquet; `Progress::with_previews`), and the waterfall draws the latest, updating as the load goes on. Findings
//! and statistics wait for the whole trace.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use eframe::egui::{self, RichText, Ui};

use crate::ingest::Progress;
use crate::trace::Trace;
use crate::ui::views::waterfall::{self, WaterfallState};
use crate::view::TraceView;
use crate::view::lanes::TrackLayout;
use crate::view::layout::{TrackFilter, TrackOrder};

/// The least time between two previews.
const EVERY: Duration = Duration::from_millis(1500);

/// The latest preview handed over (its view built on the loader's thread), and the one on screen.
pub struct Preview {
    slot: Arc<Mutex<Option<TraceView>>>,
    shown: Option<(TraceView, WaterfallState)>,
}

impl Preview {
    /// A preview and the progress of the load that feeds it, its tracks in `order`; `waker` is asked to repaint
    /// when a preview comes.
    pub fn start(waker: Option<&egui::Context>, order: TrackOrder) -> (Self, Progress) {
        let slot: Arc<Mutex<Option<TraceView>>> = Arc::default();
        let (into, waker) = (Arc::clone(&slot), waker.cloned());
        let progress = Progress::with_previews(EVERY, move |trace: Arc<Trace>| {
            let view = TraceView::new(trace, order, &TrackFilter::default());
            *into.lock().unwrap_or_else(PoisonError::into_inner) = Some(view);
            if let Some(ctx) = &waker {
                ctx.request_repaint();
            }
        });
        (Preview { slot, shown: None }, progress)
    }

    /// Takes the latest preview, if a new one came.
    fn refresh(&mut self) {
        let newer = self.slot.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(view) = newer {
            let mut state = match self.shown.take() {
                Some((old, mut state)) => {
                    // A view nobody moved follows the trace as it grows; one zoomed or panned stays.
                    let untouched = state.viewport.is_none_or(|vp| {
                        let full = old.full_view(vp.width);
                        full.start_ns == vp.start_ns && full.ns_per_point == vp.ns_per_point
                    });
                    if untouched {
                        state.viewport = None;
                    }
                    state
                }
                None => WaterfallState::default(),
            };
            state.hover_ns = None;
            self.shown = Some((view, state));
        }
    }

    /// How many requests the preview on screen shows.
    pub fn requests(&self) -> Option<usize> {
        self.shown.as_ref().map(|(v, _)| v.trace.request_count())
    }

    /// Draws the latest preview, if one came; false when there is none yet.
    pub fn ui(&mut self, ui: &mut Ui, layout: TrackLayout) -> bool {
        self.refresh();
        let Some((view, state)) = &mut self.shown else {
            return false;
        };
        ui.label(
            RichText::new(format!(
                "Loading: {} requests and {} steps read so far. Findings and statistics start when the load ends.",
                view.trace.request_count(),
                view.trace.iterations.len()
            ))
            .weak(),
        );
        state.layout = layout;
        // What a click asks for has nowhere to go until the trace is whole.
        let mut ignored = Vec::new();
        waterfall::waterfall_ui(ui, view, state, None, &mut ignored);
        true
    }
}
