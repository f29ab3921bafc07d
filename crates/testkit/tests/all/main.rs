//! The integration tests of the test kit's own command line tools, as one test binary (one
//! module per scenario file).

mod install_codex;
