//! The macros refuse what they cannot make a tool, prompt or resource of,
//! with an error on the offending tokens (`tests/ui/*.stderr` hold the
//! messages; `TRYBUILD=overwrite` writes them again).

#[test]
fn macros_refuse_what_they_cannot_use() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
