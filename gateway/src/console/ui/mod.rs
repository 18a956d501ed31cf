//! What every page is drawn with: the layout and navigation, money and time as text, charts, lists.

pub(crate) mod chart;
pub(crate) mod format;
pub(crate) mod layout;
pub(crate) mod list;
