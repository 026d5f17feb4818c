//! View math without egui: the time axis, level of detail and culling, as pure functions with unit tests. The GUI
//! and the headless renderer draw what these compute.

pub mod lanes;
pub mod layout;
pub mod load;
pub mod lod;
pub mod ruler;
pub mod step_summary;
pub mod trace_view;
pub mod viewport;

pub use trace_view::TraceView;
