//! The shell: the app and its menus, bars and windows (`app/`), the session of a trace, the windows that hold sessions
//! (a comparison, a live recording, a watched log, following the present), the status bar and small panels, the dataset
//! dialog, the views composed headless.

pub mod app;
pub mod compare;
pub mod dataset;
pub mod follow;
pub mod live;
pub mod panels;
pub mod render;
pub mod session;
pub mod watching;
