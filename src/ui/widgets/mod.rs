//! What the views and the shell share: every colour and size (theme), the one background job type, the command list,
//! PNG capture, a log's counter rows.

pub mod command;
pub mod job;
pub mod png;
pub mod sample_rows;
pub mod theme;
