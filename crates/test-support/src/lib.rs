//! Test helpers that the tests of more than one crate use (a dev-dependency only).
//!
//! - [`netns`]: a network namespace of the test's own, so that tests whose targets are not
//!   loopback (the cloud metadata address, private and "public" addresses, a DNS resolver)
//!   send nothing to the machine's network even if the guard under test regresses.

pub mod netns;
