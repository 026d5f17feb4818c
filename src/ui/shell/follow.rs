//! A view that follows the present of a growing trace (a live recording, a watched log) until the user moves it:
//! each new version fits the waterfall to its last minute; a viewport other than the one the follow set means the
//! user moved the view, and the follow stops until asked again.

use crate::ui::shell::session::Session;

/// The span a view follows: the last minute, or all of it when shorter.
const SPAN_NS: i64 = 60_000_000_000;

/// Whether a view follows the present, and the viewport the last follow left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Follow {
    /// The view follows the present.
    pub on: bool,
    /// The view's time axis as the last follow left it (start, ns per point), to tell when the user moved it.
    followed: Option<(i64, u64)>,
}

impl Default for Follow {
    fn default() -> Self {
        Follow {
            on: true,
            followed: None,
        }
    }
}

impl Follow {
    /// Looks at the growing trace's session: once the follow's fit is drawn, a viewport other than the one it left
    /// means the user moved the view, and the follow stops.
    pub fn notice(&mut self, s: &Session) {
        if !self.on || s.waterfall.fit.is_some() {
            return;
        }
        let Some(vp) = s.waterfall.viewport else { return };
        let now = (vp.start_ns, vp.ns_per_point.to_bits());
        match self.followed {
            None => self.followed = Some(now),
            Some(f) if f != now => self.on = false,
            Some(_) => {}
        }
    }

    /// Fits the view of `s` to the last minute before `latest_ns`, from `from_ns` at the earliest, when following.
    pub fn fit(&mut self, s: &mut Session, from_ns: i64, latest_ns: i64) {
        if !self.on {
            return;
        }
        let from = from_ns.max(latest_ns - SPAN_NS);
        let pad = ((latest_ns - from) / 20).max(50_000_000);
        s.waterfall.fit = Some((from, latest_ns + pad));
        self.followed = None;
    }

    /// Follows the present again.
    pub fn again(&mut self) {
        *self = Follow::default();
    }
}
