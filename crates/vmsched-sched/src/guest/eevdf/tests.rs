//! Unit tests of the EEVDF model.
