//! Integration tests of the session store: one test binary, one module per concern.

mod durability;
mod event_pages;
mod events;
mod inbox;
mod inbox_steers;
mod inspect;
mod open;
mod session_state;
mod sessions;
